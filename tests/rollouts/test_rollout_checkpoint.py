"""`pytest-agentgym rollout-server --checkpoint PATH` launches vLLM on the checkpoint as pytest's
--agentgym-checkpoint does, sends the batches without a base_url to it, and stops it with the
service. vLLM is played by tests/helpers/fake_vllm.py as a family of processes (the launched
one, a child holding on, the reference agent serving as the model) that prints its pids and
the arguments it was started with; the service is a real process stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import psutil
import pytest

from helpers import REPO, fake_vllm
from helpers.checkpoints import counting, servers_started, write_checkpoint
from helpers.rollout_services import post, rollout_server

pytestmark = pytest.mark.heavy

NODE = """\
name: ckptnode
model:
  endpoints:
    - {{kind: vllm, model: reference}}
vllm: {{python: "{python}", startup_timeout: 60}}
limits: {{max_rounds: 10, episode_timeout: 60, concurrency: 2}}
envs: {{servers: spawn}}
"""


def node(tmp_path, python) -> str:
    path = tmp_path / "node.yaml"
    path.write_text(NODE.format(python=python))
    return str(path)


def float32_checkpoint(root):
    directory = write_checkpoint(root / "ckpt")
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "torch_dtype": "float32"}))
    return directory


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_service_launches_the_checkpoint_answers_a_batch_and_stops_vllm_with_it(tmp_path):
    python = fake_vllm.install(tmp_path / "venv", "serve", hold_term=1.0)
    checkpoint = float32_checkpoint(tmp_path)
    service = rollout_server(tmp_path / "service", "--node", node(tmp_path, python),
                             "--checkpoint", str(checkpoint), run_id="ckpt")
    run_dir = tmp_path / "service" / "reports" / "ckpt"
    vllm_log = run_dir / "logs" / "vllm.log"
    try:
        family = [int(p) for p in re.search(r"fake vLLM: pid (\d+), holder pid (\d+), agent pid (\d+)",
                                            vllm_log.read_text()).groups()]
        answer = post(service, {"env": "textcraft", "model": "reference", "ids": [0, 1], "max_round": 10})
        assert answer.status_code == 200, answer.text
        rollouts = answer.json()["rollouts"]
        assert [(r["id"], r["error"]) for r in rollouts] == [(0, None), (1, None)]
        assert all(r["success"] and r["usage"]["completion_tokens"] > 0 for r in rollouts), rollouts
        assert all(not gone(pid) for pid in family)
    finally:
        service.proc.send_signal(signal.SIGTERM)  # to the service alone, as a process manager stops it
        code = service.proc.wait(timeout=60)
    assert code in (0, -signal.SIGTERM)
    assert [pid for pid in family if not gone(pid)] == []  # vLLM's whole family stopped with the service

    printed = (tmp_path / "service" / "rollout-server-ckpt.log").read_text()
    said = ("vLLM dtype float32, the checkpoint's own (config.json torch_dtype=float32; vllm.dtype auto); "
            "logprobs raw_logprobs (vllm.logprobs_mode)")
    assert re.search(rf"^vLLM on {re.escape(str(checkpoint))}: http://127\.0\.0\.1:\d+/v1 serving model reference "
                     rf"\(for batches without base_url\); log: {re.escape(str(vllm_log))}$", printed, re.M), printed
    assert f"vLLM: {said}" in printed.splitlines()
    args = vllm_log.read_text()
    assert "--served-model-name reference --dtype float32 --logprobs-mode raw_logprobs" in args
    info = json.loads((run_dir / "run.json").read_text())
    assert info["checkpoint"] == str(checkpoint) and said in info["notes"]
    assert info["status"] == "finished" and info["counts"]["episodes"] == 2
    service.stop()


@pytest.mark.parametrize("case", ["no tokenizer", "no vllm endpoint", "with --base-url"])
def test_a_checkpoint_that_cannot_be_launched_stops_the_service_before_it_serves(tmp_path, case):
    wrapper = counting(fake_vllm.install(tmp_path / "venv", "serve"))
    checkpoint = write_checkpoint(tmp_path / "ckpt", tokenizer=case != "no tokenizer")
    profile = "local" if case == "no vllm endpoint" else node(tmp_path, wrapper)
    extra = ["--base-url", "http://127.0.0.1:9"] if case == "with --base-url" else []
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "rollout-server", "--port", "0", "--node",
                           profile, "--checkpoint", str(checkpoint), "--run-id", "bad", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rollout service on" not in done.stdout and servers_started(wrapper) == 0
    error = done.stderr
    if case == "with --base-url":
        assert "--checkpoint and --base-url both name the endpoint of batches without base_url; give one" in error
        assert not (tmp_path / "reports" / "bad").exists()
        return
    if case == "no tokenizer":
        assert f"checkpoint {checkpoint} cannot be served, vLLM was not started: {checkpoint}: no tokenizer" in error
    else:
        assert "has no vllm endpoint to launch on" in error and "--node cpu or --node gpu" in error
    info = json.loads((tmp_path / "reports" / "bad" / "run.json").read_text())
    assert info["status"] == "no-episode-scored"
    assert any(n.startswith(f"vLLM on {checkpoint} did not start: ") for n in info["notes"]), info["notes"]
