"""An HTTP receiver of webhook POSTs on 127.0.0.1 that keeps every one it gets."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class WebhookReceiver:
    """Keeps ``{"path", "headers", "body"}`` per POST (``path`` with its query) in ``posts``;
    answers the status ``status(path)`` gives, with an empty body. A status of None: the
    receiver reads the request and never answers (until :meth:`close`), a receiver that hangs."""

    def __init__(self, status: Callable[[str], int | None]) -> None:
        self.posts: list[dict] = []
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.posts.append({"path": self.path, "headers": dict(self.headers), "body": body.decode()})
                code = status(self.path)
                if code is None:
                    receiver.release.wait()
                    return
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def paths(self) -> list[str]:
        return [post["path"] for post in self.posts]

    def to(self, route: str) -> list[dict]:
        """The POSTs to ``route`` (a path without its query)."""
        return [post for post in self.posts if post["path"].split("?")[0] == route]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
