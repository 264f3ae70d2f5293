"""A real HTTP server on loopback that plays a misbehaving model endpoint.

Each ``POST .../chat/completions`` takes the next :class:`Act` from a script
(the last one repeats when the script runs out): answer normally, answer with
a status (500, 429 with Retry-After, 400 with a context-length message), answer
slowly, accept the request and never answer, drop the connection, or answer
with raw bytes under any status and content type (a 200 whose JSON is broken). Health
routes answer what an OpenAI server (``/v1/models``), a TensorZero gateway
(``/status``), Ollama (``/api/tags``) and vLLM (``/health``) answer.

The server runs in a thread with its own asyncio loop and records every request
with the time it arrived, so tests count retries from the server's side.
Hand-written over ``asyncio.start_server`` (HTTP/1.1, Content-Length bodies,
one request per connection) so that every byte and every stall is under the
test's control.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Act:
    """What the server does with one chat request."""

    kind: str = "ok"  # ok | status | hang | drop | raw
    status: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds before answering
    text: str = "Thought:\nfake\n\nAction:\nmove forward"
    usage: bool = True


def ok(text: str = "Thought:\nfake\n\nAction:\nmove forward", *, delay: float = 0.0, usage: bool = True) -> Act:
    return Act("ok", text=text, delay=delay, usage=usage)


def status(code: int, message: str = "", *, retry_after: str | None = None, delay: float = 0.0) -> Act:
    headers = (("Retry-After", retry_after),) if retry_after is not None else ()
    body = {"error": {"message": message or _REASONS.get(code, "error"), "type": "fake_error",
                      "param": None, "code": code}}
    return Act("status", status=code, body=body, headers=headers, delay=delay)


def context_too_long() -> Act:
    """vLLM's wording for a prompt over max_model_len."""
    return status(400, "This model's maximum context length is 256 tokens. However, you requested "
                       "1024 tokens (1000 in the messages, 24 in the completion). Please reduce the "
                       "length of the messages or completion.")


def raw(body: bytes, *, code: int = 200, content_type: str = "application/json") -> Act:
    """Answer ``code`` with exactly ``body`` under ``content_type``."""
    return Act("raw", status=code, body=body, headers=(("Content-Type", content_type),))


def hang() -> Act:
    return Act("hang")


def drop() -> Act:
    return Act("drop")


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float  # time.monotonic() on arrival


@dataclass
class FakeEndpoint:
    """``with FakeEndpoint(script=[status(500), ok()]) as fake: ... fake.base_url``."""

    script: list[Act] = field(default_factory=lambda: [ok()])
    models: tuple[str, ...] = ("fake-model",)
    ollama_tags: tuple[str, ...] = ("qwen3:8b",)
    health_status: int = 200
    hang_health: bool = False
    model_name: str = "fake-model"

    def __post_init__(self) -> None:
        self.requests: list[Seen] = []
        self.port: int = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._position = 0

    # -- addresses
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def chat_requests(self) -> list[Seen]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- lifecycle
    def start(self) -> "FakeEndpoint":
        self._thread = threading.Thread(target=self._run, name="fake-model-endpoint", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake model endpoint did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "FakeEndpoint":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

    # -- one connection
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await self._read(reader)
            if request is None:
                return
            self.requests.append(request)
            await self._answer(request, writer)
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> Seen | None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        body = json.loads(raw) if raw else None
        return Seen(method, path, headers, body, time.monotonic())

    async def _answer(self, request: Seen, writer: asyncio.StreamWriter) -> None:
        path = request.path.split("?")[0]
        if request.method == "GET":
            if self.hang_health:
                await asyncio.Event().wait()  # never answers; cancelled at stop
            if path == "/v1/models":
                data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.models]
                return self._write(writer, 200, {"object": "list", "data": data})
            if path == "/status":
                return self._write(writer, self.health_status, {"status": "ok", "version": "fake"})
            if path == "/health":
                return self._write(writer, self.health_status, {})
            if path == "/api/tags":
                models = [{"name": t, "model": t} for t in self.ollama_tags]
                return self._write(writer, 200, {"models": models})
            return self._write(writer, 404, {"detail": "Not Found"})
        if not path.endswith("/chat/completions"):
            return self._write(writer, 404, {"detail": "Not Found"})
        act = self.script[min(self._position, len(self.script) - 1)]
        self._position += 1
        if act.delay:
            await asyncio.sleep(act.delay)
        if act.kind == "hang":
            await asyncio.Event().wait()
        if act.kind == "drop":
            return
        if act.kind == "status":
            return self._write(writer, act.status, act.body, act.headers)
        if act.kind == "raw":
            return self._write_bytes(writer, act.status, act.body, act.headers)
        return self._write(writer, 200, self._completion(request, act))

    def _completion(self, request: Seen, act: Act) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()), "model": (request.body or {}).get("model", self.model_name),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": act.text},
                         "finish_reason": "stop"}],
        }
        if act.usage:
            body["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        return body

    @classmethod
    def _write(cls, writer: asyncio.StreamWriter, code: int, payload: Any,
               headers: tuple[tuple[str, str], ...] = ()) -> None:
        cls._write_bytes(writer, code, json.dumps(payload).encode(),
                         (("Content-Type", "application/json"), *headers))

    @staticmethod
    def _write_bytes(writer: asyncio.StreamWriter, code: int, data: bytes,
                     headers: tuple[tuple[str, str], ...]) -> None:
        head = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}", f"Content-Length: {len(data)}",
                "Connection: close"]
        head += [f"{name}: {value}" for name, value in headers]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
