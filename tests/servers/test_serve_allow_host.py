"""`pytest-agentgym serve NAME --allow-host NAME`, with a real `serve textcraft` process on
loopback: the names given answer (a whole create and reset, with the fast path in front), any
other name gets 403 and creates nothing, the flag is used instead of AGENTGYM_ALLOW_HOSTS,
and a value that is no host name stops the start naming the flag."""

from __future__ import annotations

import json
import subprocess
import sys

from pytest_agentgym.process.managed import ManagedServer

from helpers import REPO
from helpers.web_callers import raw

SERVE = [sys.executable, "-m", "pytest_agentgym", "serve", "textcraft"]


def test_a_server_given_allow_host_answers_that_name_and_refuses_others(tmp_path):
    # the variable names a host too: the flag, when given, is the list
    server = ManagedServer("allow-host", command=[*SERVE, "--port", "{port}", "--allow-host", "example.test"],
                           log_path=tmp_path / "allow-host.log", startup_timeout=60, label="serve --allow-host",
                           env={"PYTHONPATH": str(REPO), "AGENTGYM_ALLOW_HOSTS": "envs.example"}).start()
    try:
        def ask(host: str, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
            status, _, answer = raw(server.port, method, path, {"Host": host, "Content-Type": "application/json"},
                                    json.dumps(body).encode() if body is not None else None)
            return status, answer

        created = ask("127.0.0.1", "GET", "/embedded/envs")[1]
        for host in ("other.test", f"other.test:{server.port}", "envs.example", "example.test.other.test"):
            status, answer = ask(host, "POST", "/create", {})
            assert status == 403, (host, answer)
            assert f"Host {json.dumps(host)}" in json.loads(answer)["error"], answer
            assert b"--allow-host" in answer and b"AGENTGYM_ALLOW_HOSTS" not in answer, answer  # what was used
        assert ask("127.0.0.1", "GET", "/embedded/envs")[1] == created  # nothing was created

        for host in ("example.test", f"example.test:{server.port}", "EXAMPLE.TEST"):
            status, answer = ask(host, "POST", "/create", {})
            assert status == 200, (host, answer)
            reset = ask(host, "POST", "/reset", {"id": json.loads(answer)["id"], "data_idx": 3})
            assert reset[0] == 200 and b"Crafting commands" in reset[1], (host, reset)
    finally:
        server.stop()


def test_an_allow_host_that_is_no_host_name_stops_the_start_naming_the_flag(tmp_path):
    started = subprocess.run([*SERVE, "--port", "0", "--allow-host", "http://example.test/"], capture_output=True,
                             text=True, timeout=60, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert started.returncode == 2, started.stderr
    assert "--allow-host 'http://example.test/' is not a host name" in started.stderr, started.stderr
    assert "AGENTGYM_ALLOW_HOSTS" not in started.stderr
