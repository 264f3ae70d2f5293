"""The plainest HTTP server, for tests of starting, probing and moving servers: it answers
every GET with 200 ``ok`` on loopback, and may start listening a given number of seconds
late (a server that is slow to come up).

    ManagedServer("plain", command=plain_http.command(delay=1.5), ...)
"""

from __future__ import annotations

import sys

SERVER = """\
import http.server, sys, time
time.sleep(float(sys.argv[2]))  # not listening yet: the harness has to poll
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def command(delay: float = 0.0) -> list[str]:
    """The argv (``{port}`` filled in by ManagedServer) of a server that listens after ``delay`` s."""
    return [sys.executable, "-c", SERVER, "{port}", str(delay)]
