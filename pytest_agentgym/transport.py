"""A lean keep-alive HTTP/1.1 transport for the hot path: for ``httpx.AsyncClient``,
and, through :class:`Route`, without httpx's request and response objects at all.

The episode loop sends two small requests per environment step (the model's
chat completion, the environment's ``/step``), many episodes at once, to a few
loopback servers. httpx's default transport (httpcore) is correct but costly
there: before each request it scans every pooled connection and asks the socket
of each whether it has expired, so its cost per request grows with the number of
episodes in flight, on the one thread that runs them all. This transport keeps,
per server, a stack of idle connections (take the last, put it back: O(1)),
writes the request in one piece and reads the answer with asyncio's streams.

What it speaks: ``http://`` only (``https://`` goes to httpx's own transport),
HTTP/1.1 with keep-alive, answers with ``Content-Length``, chunked or
read-to-close bodies; it returns the body whole (no streaming). Failures are
httpx's own exceptions (``ConnectError``, ``ConnectTimeout``, ``ReadTimeout``,
``WriteTimeout``, ``RemoteProtocolError``, ``ReadError``), so callers map them
as they would httpx's. An idle connection the server has closed is not reused;
one idle longer than ``idle_expiry`` seconds is closed (uvicorn closes at 5 s).

The clients take it by default; tests still inject ``httpx.MockTransport``.

:class:`Route` is the leaner way in, for the two requests of every step: it
writes a request head prepared once per server (host, fixed headers) plus the
JSON body, and hands back a :class:`RawAnswer` (status, headers, bytes) instead
of an ``httpx.Response``. httpx's ``AsyncClient.send`` builds and merges URLs,
headers and cookies for every call; on this path that cost more CPU than the
exchange itself (docs/how-it-works.md, "The hot path").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from typing import Any, Mapping
from urllib.parse import urlsplit

import httpx

from pytest_agentgym.results.jsonl import json_utf8

#: seconds a connection may sit idle before it is closed rather than reused
IDLE_EXPIRY_S = 4.0
_HEAD_LIMIT = 64 * 1024


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float, expiry: float) -> bool:
        return (not self.reader.at_eof() and not self.writer.is_closing()
                and now - self.idle_since < expiry)

    def close(self) -> None:
        self.writer.close()


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None, float | None]:
    timeout = request.extensions.get("timeout") or {}
    return timeout.get("connect"), timeout.get("read"), timeout.get("write")


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """See the module's docstring. One per client; not shared across event loops."""

    def __init__(self, *, idle_expiry: float = IDLE_EXPIRY_S) -> None:
        self.idle_expiry = idle_expiry
        self._idle: dict[tuple[str, int], list[_Connection]] = defaultdict(list)
        self._tls: httpx.AsyncHTTPTransport | None = None
        #: connections opened so far (tests and benchmarks read it)
        self.opened = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            if self._tls is None:
                self._tls = httpx.AsyncHTTPTransport()
            return await self._tls.handle_async_request(request)
        payload = self._encode(request, await request.aread())
        status, headers, body = await self.exchange(
            (url.host, url.port or 80), payload, request.method, *_timeouts(request))
        return httpx.Response(status, headers=headers, content=body,
                              extensions={"http_version": b"HTTP/1.1"})

    async def exchange(self, address: tuple[str, int], payload: bytes, method: str,
                       connect_timeout: float | None, read_timeout: float | None,
                       write_timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send ``payload`` (a whole HTTP/1.1 request) to ``address`` over an idle
        connection, or a new one; the answer's status, headers and body."""
        conn = self._take(address)
        if conn is None:
            conn = await self._open(address, connect_timeout)
        try:
            await self._write(conn, payload, write_timeout)
            status, headers, body, keep = await self._read(conn, method, read_timeout)
        except BaseException:
            conn.close()
            raise
        if keep:
            conn.idle_since = time.monotonic()
            self._idle[address].append(conn)
        else:
            conn.close()
        return status, headers, body

    async def aclose(self) -> None:
        for stack in self._idle.values():
            for conn in stack:
                conn.close()
        self._idle.clear()
        if self._tls is not None:
            await self._tls.aclose()

    # -- connections -------------------------------------------------------------

    def _take(self, address: tuple[str, int]) -> _Connection | None:
        stack = self._idle.get(address)
        now = time.monotonic()
        while stack:
            conn = stack.pop()
            if conn.usable(now, self.idle_expiry):
                return conn
            conn.close()
        return None

    async def _open(self, address: tuple[str, int], timeout: float | None) -> _Connection:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(*address, limit=_HEAD_LIMIT * 16)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {address[0]}:{address[1]} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{exc.strerror or exc} ({address[0]}:{address[1]})") from exc
        self.opened += 1
        return _Connection(reader, writer)

    # -- the exchange -------------------------------------------------------------

    @staticmethod
    def _encode(request: httpx.Request, body: bytes) -> bytes:
        target = request.url.raw_path.decode("ascii")
        lines = [f"{request.method} {target} HTTP/1.1"]
        has_length = False
        for name, value in request.headers.multi_items():
            if name.lower() == "content-length":
                has_length = True
            lines.append(f"{name}: {value}")
        if body and not has_length:
            lines.append(f"content-length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    @staticmethod
    async def _write(conn: _Connection, payload: bytes, timeout: float | None) -> None:
        try:
            conn.writer.write(payload)
            if conn.writer.transport.get_write_buffer_size():  # the kernel did not take it all
                async with asyncio.timeout(timeout):
                    await conn.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("sending the request timed out") from None
        except OSError as exc:
            raise httpx.WriteError(f"sending the request failed: {exc}") from exc

    async def _read(self, conn: _Connection, method: str,
                    timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        try:
            async with asyncio.timeout(timeout):
                return await self._response(conn.reader, method)
        except TimeoutError:
            raise httpx.ReadTimeout("no answer within the read timeout") from None
        except asyncio.IncompleteReadError as exc:
            raise httpx.RemoteProtocolError(
                "the server closed the connection before a complete answer"
                if exc.partial or exc.expected else "the server closed the connection without an answer") from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError("the answer's head is too long") from exc
        except OSError as exc:
            raise httpx.ReadError(f"reading the answer failed: {exc}") from exc

    @staticmethod
    async def _response(reader: asyncio.StreamReader,
                        method: str) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, *header_lines = head[:-4].split(b"\r\n")
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
                raise httpx.RemoteProtocolError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
            status = int(parts[1])
            if not 100 <= status < 200 or status == 101:
                break  # 1xx (other than 101) are interim: the real answer follows
        headers = []
        length = None
        chunked = False
        close = parts[0] == b"HTTP/1.0"
        for line in header_lines:
            name, _, value = line.partition(b":")
            name, value = name.strip(), value.strip()
            headers.append((name, value))
            lower = name.lower()
            if lower == b"content-length":
                length = int(value)
            elif lower == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lower == b"connection":
                close = b"close" in value.lower() if not close else close and b"keep-alive" not in value.lower()
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif chunked:
            pieces = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                        pass
                    break
                pieces.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(pieces)
        elif length is not None:
            body = await reader.readexactly(length)
        else:
            body, close = await reader.read(), True
        return status, headers, body, not close


# ------------------------------------------------------------------------ the direct route


class RawAnswer:
    """An HTTP answer as :class:`Route` returns it: what callers of the hot path read
    of an ``httpx.Response`` (``status_code``, ``headers.get``, ``content``, ``text``,
    ``json()``), without building one."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: list[tuple[bytes, bytes]], content: bytes) -> None:
        self.status_code = status_code
        #: lower-case names; a repeated header keeps its last value
        self.headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


def encode_json(value: Any) -> bytes:
    """A request body as httpx encodes ``json=``: compact, UTF-8, no NaN."""
    return json_utf8(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


class Route:
    """Requests to one ``http://`` base URL (path prefix included) straight over a
    :class:`KeepAliveTransport`; see the module's docstring.

    ``headers`` are sent with every request (an API key, the SDK's user agent);
    the host header and the prefix are prepared here once. Failures are the
    transport's httpx exceptions, as through ``httpx.AsyncClient``.
    """

    def __init__(self, transport: KeepAliveTransport, base_url: str,
                 headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"a direct route needs a plain http:// URL, not {base_url!r}")
        self.transport = transport
        self.address = (parts.hostname, parts.port or 80)
        self.prefix = parts.path.rstrip("/")
        fixed = {"host": parts.netloc, "accept": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}}
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())

    @classmethod
    def usable(cls, base_url: str) -> bool:
        """Whether ``base_url`` can be reached this way (plain http, no query)."""
        parts = urlsplit(base_url)
        return parts.scheme == "http" and bool(parts.hostname) and not parts.query and not parts.fragment

    async def request(self, method: str, path: str, body: bytes | None, timeout: float | None) -> RawAnswer:
        """``method`` ``path`` (under the prefix; may carry a query) with a JSON ``body``."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{self._fixed}"
        if body is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "content-length: 0\r\n"  # as httpx sends an empty POST
        payload = (head + "\r\n").encode("latin-1") + (body or b"")
        status, headers, content = await self.transport.exchange(
            self.address, payload, method, timeout, timeout, timeout)
        return RawAnswer(status, headers, content)
