"""A minimal OpenAI-compatible chat endpoint for ``http.server``: every request gets the
same chat completion, and the request bodies are kept in ``ChatHandler.bodies``."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(body)
        answer = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "Action:\nmove up"}}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):  # type: ignore[no-untyped-def]
        pass
