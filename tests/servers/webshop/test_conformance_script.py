"""benchmarks/servers/webshop_conformance.py, the route-by-route comparison with AgentGym's
WebShop, run against our server on loopback (``pytest-agentgym serve webshop``) on both sides,
the "original" side behind a real HTTP stand-in whose ``/state`` answers 500: the script must
take each goal's instruction from ``/instruction_text`` and search its words, or its scripted
episodes test nothing past an empty search."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from pytest_agentgym.process.managed import ManagedServer
from pytest_agentgym.servers.embedded.webshop import missing_requirements
from pytest_agentgym.servers.pool import embedded_command

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "servers" / "webshop_conformance.py"

pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements()))]


class BrokenState:
    """A loopback HTTP server that forwards every request to ``upstream`` but answers
    ``GET /state`` with a 500, as a server whose state page cannot be serialized would."""

    def __init__(self, upstream: str) -> None:
        client = httpx.Client(base_url=upstream, timeout=120)

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                if self.path.startswith("/state"):
                    self.send_response(500)
                    self.send_header("Content-Length", "21")
                    self.end_headers()
                    self.wfile.write(b"Internal Server Error")
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                got = client.request(self.command, self.path, content=body,
                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                self.send_response(got.status_code)
                self.send_header("Content-Type", got.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(got.content)))
                self.end_headers()
                self.wfile.write(got.content)

            do_GET = do_POST = _forward

            def log_message(self, *args) -> None:  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_script_searches_each_goals_words_though_state_is_broken(tmp_path):
    server = ManagedServer("WebShop", command=embedded_command("webshop"), startup_timeout=180,
                           env={"AGENTENV_WEBSHOP_DATA": ""}, log_path=tmp_path / "webshop.log").start()
    original = BrokenState(server.url)
    try:
        assert httpx.get(f"{original.url}/state", params={"env_idx": 0}).status_code == 500
        done = subprocess.run([sys.executable, str(SCRIPT), "--ours", server.url, "--original", original.url,
                               "--sessions", "0-2"], capture_output=True, text=True, timeout=600)
    finally:
        original.close()
        server.stop()
    out = done.stdout + done.stderr
    assert "sessions that searched their instruction's words: 3 of 3" in out, out
    assert done.returncode == 0, out  # the same server on both sides: nothing differs
    steps = {line.split()[1]: int(line.split()[-1]) for line in out.splitlines()
             if line.strip().startswith("/step ") and line.strip().split()[-2] == "same"}
    assert steps.get("search") == 3 and steps.get("click", 0) >= 3 * 3, out  # past the search, on every goal
