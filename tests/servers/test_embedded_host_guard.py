"""The embedded servers' Host rule (transport/host_guard.py), with real `pytest-agentgym
serve textcraft` processes on loopback: a request whose Host is a foreign name (DNS
rebinding) gets 403 and changes nothing, with the fast path and without; the names the
server is reached by (loopback, its bound address, AGENTGYM_ALLOW_HOSTS) get the same
answers, byte for byte, as another server reached as 127.0.0.1; a bad
AGENTGYM_ALLOW_HOSTS stops the start with a message naming it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_agentgym.process.managed import ManagedServer

from helpers import REPO
from helpers.web_callers import ATTACKER, cors_headers, raw

pytestmark = pytest.mark.faults  # issue 39's findings are in the fault tier

SERVE = [sys.executable, "-m", "pytest_agentgym", "serve", "textcraft", "--port", "{port}"]


def _serve(tmp_path, name: str, *args: str, env: dict[str, str] | None = None) -> ManagedServer:
    return ManagedServer(name, command=[*SERVE, *args], log_path=tmp_path / f"{name}.log", startup_timeout=60,
                         label=name, env={"PYTHONPATH": str(REPO), **(env or {})}).start()


def _episode(port: int, hosts: list[str]) -> list[tuple[int, bytes]]:
    """create, reset, observation, step, detail and the greeting, each with the next of
    ``hosts`` as its Host."""
    def ask(number: int, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Host": hosts[number % len(hosts)]}
        status, _, answer = raw(port, method, path, headers, json.dumps(body).encode() if body is not None else None)
        return status, answer

    made = ask(0, "POST", "/create", {})
    env_id = json.loads(made[1])["id"]
    return [made, ask(1, "POST", "/reset", {"id": env_id, "data_idx": 3}),
            ask(2, "GET", f"/observation?id={env_id}"),
            ask(3, "POST", "/step", {"id": env_id, "action": "inventory"}),
            ask(4, "GET", f"/detail?id={env_id}"), ask(5, "GET", "/")]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "app-alone"])
def test_a_foreign_host_is_refused_and_the_servers_names_are_answered_alike(tmp_path, fast_path):
    extra = () if fast_path else ("--no-fast-path",)
    guarded = _serve(tmp_path, "guarded", *extra, env={"AGENTGYM_ALLOW_HOSTS": "envs.example, 10.9.8.7"})
    reference = _serve(tmp_path, "reference", *extra)
    try:
        status_before = raw(guarded.port, "GET", "/embedded/envs", {"Host": "127.0.0.1"})[2]
        for host in (ATTACKER, f"{ATTACKER}:{guarded.port}", "127.0.0.1.nip.io", "envs.example.evil"):
            for method, path, body in (("POST", "/create", b"{}"), ("GET", "/", None),
                                       ("GET", "/observation?id=0", None), ("GET", "/embedded/envs", None)):
                status, headers, answer = raw(guarded.port, method, path,
                                              {"Host": host, "Content-Type": "application/json",
                                               "Origin": f"http://{ATTACKER}"}, body)
                assert status == 403, (host, path, answer)
                said = json.loads(answer)["error"]
                assert f"Host {json.dumps(host)}" in said and "AGENTGYM_ALLOW_HOSTS" in said, said
                assert not cors_headers(headers)
        assert raw(guarded.port, "GET", "/embedded/envs", {"Host": "127.0.0.1"})[2] == status_before  # none made

        allowed = ["127.0.0.1", f"localhost:{guarded.port}", "envs.example", "10.9.8.7:80", f"[::1]:{guarded.port}",
                   "LOCALHOST."]
        played = _episode(guarded.port, allowed)
        assert [status for status, _ in played] == [200] * 6, played
        assert played == _episode(reference.port, ["127.0.0.1"])  # each name answered as 127.0.0.1 is
    finally:
        guarded.stop()
        reference.stop()


def test_a_bad_allow_hosts_value_stops_the_start(tmp_path):
    started = subprocess.run([*SERVE[:-2], "--port", "0"], capture_output=True, text=True, timeout=60, cwd=REPO,
                             env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                  "AGENTGYM_ALLOW_HOSTS": "http://envs.example/"})
    assert started.returncode != 0
    assert "AGENTGYM_ALLOW_HOSTS='http://envs.example/' is not a host name" in started.stderr, started.stderr
