"""An OpenAI-compatible endpoint that writes down the headers of every request it gets.

It speaks just enough of the API for the rollout service to play against it
(``GET /v1/models`` lists :data:`MODEL`; ``POST /v1/chat/completions`` answers
every conversation with the same reply), and ``GET /log`` lists what it was sent
so far, oldest first: ``[{"method", "path", "headers": {lower-cased name: value}}]``
(the requests to ``/log`` itself are left out). A test that starts two of them can
tell which one was given a key.

    python tests/helpers/header_log.py PORT
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "header-log-model"
REPLY = "Thought: I should look around first.\nAction: inventory"


class LoggingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict] = []
    lock = threading.Lock()

    def _note(self) -> None:
        with self.lock:
            self.seen.append({"method": self.command, "path": self.path,
                              "headers": {k.lower(): v for k, v in self.headers.items()}})

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/log":
            with self.lock:
                self._answer(200, list(self.seen))
            return
        self._note()
        if self.path.split("?")[0].rstrip("/") == "/v1/models":
            self._answer(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._answer(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self._note()
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
            self._answer(404, {"error": f"no route {self.path}"})
            return
        self._answer(200, {"id": "chatcmpl-log", "object": "chat.completion", "model": body.get("model", MODEL),
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": REPLY}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 7}})

    def log_message(self, *args: object) -> None:
        pass


def main(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), LoggingHandler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
