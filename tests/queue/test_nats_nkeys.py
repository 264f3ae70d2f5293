"""The queue's doors signing in with an nkey seed file (``nkey=PATH``) and with a ``.creds``
file (``creds=PATH``: a user JWT and its seed, nats-server in operator mode), end to end on
a real nats-server on a free loopback port. The keys, JWTs and creds files are made here
with the ``nkeys`` package (tests/helpers/nkey_creds.py), no ``nsc``.

In both, the worker's user may subscribe only to its own inboxes (``_INBOX_agentgym_worker.>``)
and the roll call, as in docs/scale-out.md: a queue run still plays every episode, and a
key the server does not know is refused with "refused the sign-in", the seed never shown.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.nats_server import NatsServer, queue_made
from helpers.nkey_creds import NkeyUser, Operator
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.run_dirs import read_episodes
from helpers.waiting import wait_until

pytestmark = [pytest.mark.heavy]

WORKER_SUBSCRIBES = ["_INBOX_agentgym_worker.>", "agentgymq.agentgym.ping"]


def nkey_setup(tmp_path) -> tuple[NatsServer, dict[str, str], str]:
    """A server whose users are nkeys; the URL query of each door; a key it does not know."""
    coordinator, worker = NkeyUser.make(tmp_path / "coordinator.nk"), NkeyUser.make(tmp_path / "worker.nk")
    stranger = NkeyUser.make(tmp_path / "stranger.nk")
    subscribes = ", ".join(f'"{s}"' for s in WORKER_SUBSCRIBES)
    config = (f"accounts {{ AGENTGYM {{ jetstream: enabled, users: [\n"
              f"  {{nkey: {coordinator.public}}}\n"
              f"  {{nkey: {worker.public}, permissions: {{subscribe: {{allow: [{subscribes}]}}}}}}\n"
              f"] }} }}\n")
    server = NatsServer(tmp_path / "nats", jetstream=True, config=config)
    return server, {"coordinator": f"nkey={coordinator.seed_file}", "worker": f"nkey={worker.seed_file}"}, \
        f"nkey={stranger.seed_file}"


def creds_setup(tmp_path) -> tuple[NatsServer, dict[str, str], str]:
    """A server in operator mode (resolver: MEMORY); each door's creds file; a user signed by
    a key the operator never trusted."""
    operator = Operator.make("lab", "AGENTGYM")
    coordinator = operator.creds(tmp_path / "coordinator.creds", "coordinator")
    worker = operator.creds(tmp_path / "worker.creds", "worker", permissions={"sub": {"allow": WORKER_SUBSCRIBES}})
    stranger = Operator.make("other", "OTHER").creds(tmp_path / "stranger.creds", "stranger")
    server = NatsServer(tmp_path / "nats", jetstream=True, config=operator.server_config())
    return server, {"coordinator": f"creds={coordinator}", "worker": f"creds={worker}"}, f"creds={stranger}"


SETUPS = {"nkey": nkey_setup, "creds": creds_setup}


@pytest.fixture(params=sorted(SETUPS))
def signed(request, tmp_path):
    server, doors, stranger = SETUPS[request.param](tmp_path)
    yield request.param, server, doors, stranger
    server.stop()


def test_a_queue_run_whose_coordinator_and_worker_sign_in_with_keys_plays_every_episode(tmp_path, signed):
    method, server, doors, _ = signed
    root = tmp_path / "project"
    suites(root, Maze="0-2")
    coordinator_url = f"{server.url}?{doors['coordinator']}&ack_wait=5"
    proc = subprocess.Popen(pytest_command("suites", f"--agentgym-queue={coordinator_url}", "--agentgym-run-id=keys"),
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env_with_repo())
    fleet = Fleet(tmp_path / "fleet", f"{server.url}?{doors['worker']}")
    try:
        wait_until(lambda: queue_made(coordinator_url), 60, "the coordinator made the queue",
                   procs=(proc,))
        fleet.start("w1", profile=worker_profile(tmp_path / "worker.yaml", concurrency=2))
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        codes = fleet.stop_all()
    assert proc.returncode == 0, output
    said = {"nkey": "nkey seed file", "creds": "credentials file"}[method]
    assert f"{said} {tmp_path / ('coordinator.' + ('nk' if method == 'nkey' else 'creds'))}" in output, output
    rows = read_episodes(root / "reports" / "keys")
    assert sorted((r["env"], r["task_index"]) for r in rows) == [("Maze", i) for i in range(3)]
    assert all(r["worker"] == "w1" and r["outcome"] == "passed" for r in rows), rows
    assert codes == {"w1": 0}, (codes, fleet.output("w1"))
    seeds = [line for line in (tmp_path / "coordinator.nk").read_text().splitlines()] if method == "nkey" else \
        [line for line in (tmp_path / "coordinator.creds").read_text().splitlines() if line.startswith("SU")]
    assert seeds and not any(seed in output + fleet.output("w1") for seed in seeds)


def test_a_key_the_server_does_not_know_is_refused_and_exits_2(tmp_path, signed):
    method, server, _, stranger = signed
    profile = worker_profile(tmp_path / "worker.yaml", concurrency=1)
    result = subprocess.run([sys.executable, "-m", "pytest_agentgym", "worker", "--nats", f"{server.url}?{stranger}",
                             "--node", str(profile), "--name", "w", "--log-dir", str(tmp_path / "wlog"),
                             "--reconnect", "2"], cwd=tmp_path, capture_output=True, text=True,
                            env=env_with_repo(), timeout=60)
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    what = {"nkey": "nkey seed file", "creds": "credentials file"}[method]
    assert f"NATS at {server.url} refused the sign-in ({what} {stranger.split('=', 1)[1]};" in said, said
    assert "Authorization Violation" in said, said
