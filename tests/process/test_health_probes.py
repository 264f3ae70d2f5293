"""Health probes of a managed server (process/health.py): one probe client serves every
poll of a server's lifecycle instead of one client per poll."""

from __future__ import annotations

import sys

from pytest_agentgym.process import health
from pytest_agentgym.process import managed as process


SLOW_SERVER = """\
import http.server, sys, time
time.sleep(1.5)  # not listening yet: the harness has to poll a few times
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_one_health_probe_client_serves_every_poll_of_a_server_lifecycle(tmp_path, monkeypatch):
    made, probes = [], []
    real_client, real_probe = health.probe_client, health.probe

    def counting_client():  # type: ignore[no-untyped-def]
        made.append(1)
        return real_client()

    def counting_probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        probes.append(kwargs.get("client") if "client" in kwargs else (args[3] if len(args) > 3 else None))
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(process, "probe_client", counting_client)
    monkeypatch.setattr(process, "probe", counting_probe)
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SERVER)
    server = process.ManagedServer("slow", command=[sys.executable, str(script), "{port}"],
                                   log_path=tmp_path / "slow.log", startup_timeout=30)
    try:
        server.start()
        assert server.is_alive()
    finally:
        server.stop()
    assert len(probes) >= 2, f"the server answered at once: the test did not poll ({(tmp_path / 'slow.log').read_text()})"
    assert len(made) == 1
    assert all(client is probes[0] and client is not None for client in probes)
