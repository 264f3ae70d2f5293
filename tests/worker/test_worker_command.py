"""`pytest-agentgym worker` refusing what it cannot work with: bad input, and a NATS
server it cannot reach, exit 2 saying why, before a model is started (a worker at work
is tests/queue/test_queue_fleet.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.queue_fleet import env_with_repo


@pytest.mark.parametrize("args, said", [
    (["--nats", "nats://127.0.0.1:1?name=a b"], "--nats=nats://127.0.0.1:1?name=a b: name='a b'"),
    (["--nats", "nats://127.0.0.1:1", "--node", "nosuchnode"], "--node=nosuchnode: unknown node"),
    (["--nats", "nats://127.0.0.1:1", "--concurrency", "0"], "--concurrency 0: give a whole number >= 1"),
])
def test_a_worker_given_bad_input_exits_2_saying_why(tmp_path, args, said):
    run = subprocess.run([sys.executable, "-m", "pytest_agentgym", "worker", *args], cwd=tmp_path,
                         capture_output=True, text=True, env=env_with_repo(), timeout=60)
    assert run.returncode == 2 and said in run.stderr, run.stdout + run.stderr


def test_a_worker_with_no_nats_server_exits_2_before_starting_a_model(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pytest_agentgym", "worker", "--nats", "nats://127.0.0.1:1",
                          "--name", "lonely"], cwd=tmp_path, capture_output=True, text=True, env=env_with_repo(),
                         timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "worker lonely: NATS at nats://127.0.0.1:1 unreachable" in run.stdout
    assert not (tmp_path / "reports" / "workers" / "lonely" / "reference-agent.log").exists()
