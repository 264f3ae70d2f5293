"""HTTP/1.1 framing for the keep-alive transport: a request written in one piece, an
answer read back whole (``Content-Length``, chunked, or read to the close; 1xx skipped).
Failures are httpx's exceptions; one that ends before a single byte of the answer is
marked (:func:`no_answer`), since on a reused connection it is safe to send again
(``transport.keepalive``).
"""

from __future__ import annotations

import asyncio

import httpx


def no_answer(kind: type[httpx.TransportError], message: str) -> httpx.TransportError:
    """``kind(message)``, marked as ending before a single byte of the answer: on a reused
    connection, the server closed it while idle and never ran the request. A mark, not a
    subclass: callers and records name httpx's own class (``RemoteProtocolError``, ``ReadError``)."""
    exc = kind(message)
    exc.agentgym_no_answer = True  # type: ignore[attr-defined]
    return exc


def encode_request(request: httpx.Request, body: bytes, target: str | None = None,
                   extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    """``request`` with ``body`` as one HTTP/1.1 message: its head (``target``: another request
    target, the absolute form for a proxy; ``extra``: headers added) and the body."""
    target = target or request.url.raw_path.decode("ascii")
    lines = [f"{request.method} {target} HTTP/1.1"]
    has_length = False
    for name, value in (*request.headers.multi_items(), *extra):
        if name.lower() == "content-length":
            has_length = True
        lines.append(f"{name}: {value}")
    if body and not has_length:
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def read_response(reader: asyncio.StreamReader,
                        method: str) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
    """The answer to a ``method`` request read from ``reader``: status, headers, body, and
    whether the connection may carry another request. Interim (1xx) answers are skipped;
    the body is read whole (``Content-Length``, chunked, or up to the close)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        raise no_answer(httpx.RemoteProtocolError, "the server closed the connection without an answer") from exc
    except ConnectionError as exc:  # a reset: the server closed with the request unread
        raise no_answer(httpx.ReadError, f"the server reset the connection without an answer: {exc}") from exc
    while True:
        status_line, *header_lines = head[:-4].split(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
        status = int(parts[1])
        if not 100 <= status < 200 or status == 101:
            break  # 1xx (other than 101) are interim: the real answer follows
        head = await reader.readuntil(b"\r\n\r\n")
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
