"""An embedded server keeps an idle keep-alive connection open well past uvicorn's default
5 s (servers/embedded KEEP_ALIVE_S), so the harness's client, which reuses a connection
idle for a few seconds, never sends a request on one the server is closing."""

from __future__ import annotations

import re
import socket

from pytest_agentgym.servers.embedded import KEEP_ALIVE_S

REQUEST = b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
#: past uvicorn's default keep-alive of 5 s
IDLE_S = 6.5


def answer(sock: socket.socket) -> bytes:
    """Ask ``GET /`` on ``sock``; the whole answer (head and Content-Length bytes of body)."""
    sock.sendall(REQUEST)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"the server closed the connection instead of answering; got {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection in the middle of its answer"
        body += chunk
    return head + b"\r\n\r\n" + body


def test_an_idle_connection_outlives_uvicorns_default(embedded_server):
    assert KEEP_ALIVE_S > IDLE_S
    server = embedded_server("lmrlgym")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        assert answer(sock).startswith(b"HTTP/1.1 200 OK")
        sock.settimeout(IDLE_S)
        try:  # waits for the server to close the idle connection, up to IDLE_S
            closed = sock.recv(1) == b""
        except TimeoutError:
            closed = False
        assert not closed, f"the server closed a connection idle for less than {IDLE_S} s"
        sock.settimeout(10)
        assert answer(sock).startswith(b"HTTP/1.1 200 OK")
