"""A real HTTP proxy on loopback for tests: forwards absolute-form requests and tunnels
CONNECT, and records every request that reached it.

Tests may only use loopback, so the proxy stands in for one on another machine:

* ``hosts`` are names only it can resolve (``{"example.invalid": "127.0.0.1"}``): a
  request for ``http://example.invalid:PORT/`` is forwarded to ``127.0.0.1:PORT``, so
  traffic that the plugin should send through a proxy can be seen to go through it;
* a loopback target (``127.0.0.1``, ``localhost``, ``::1``) is, for a proxy elsewhere,
  its own machine, not ours: it answers **502** for those, unless ``reach_loopback``;
* ``refuse``: it answers **403** to everything (a proxy that will not serve us).

``seen`` lists ``(method, target, proxy-authorization header or None)`` per request.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Mapping
from urllib.parse import urlsplit

#: headers that belong to one connection, not passed on
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer",
              "transfer-encoding", "upgrade"}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class RecordingProxy:
    def __init__(self, *, hosts: Mapping[str, str] | None = None, reach_loopback: bool = False,
                 refuse: bool = False) -> None:
        self.hosts = dict(hosts or {})
        self.reach_loopback = reach_loopback
        self.refuse = refuse
        self.seen: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="test-proxy", daemon=True)
        self._thread.start()

    def record(self, method: str, target: str, auth: str | None) -> None:
        with self._lock:
            self.seen.append((method, target, auth))

    def targets(self) -> list[str]:
        with self._lock:
            return [target for _, target, _ in self.seen]

    def where(self, host: str, port: int) -> tuple[str, int] | None:
        """Where a request for ``host:port`` goes from the proxy, or None: it cannot reach it."""
        if host in self.hosts:
            return self.hosts[host], port
        if host in LOOPBACK and not self.reach_loopback:
            return None  # the proxy's own machine, not the test's
        return (host, port) if host in LOOPBACK else None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "RecordingProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: RecordingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        self.owner.record(self.command, self.path, self.headers.get("proxy-authorization"))
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        if self.owner.refuse:
            return self._answer(403, "this proxy serves nobody")
        parts = urlsplit(self.path)
        if parts.scheme != "http" or not parts.hostname:
            return self._answer(400, f"not a proxy request: {self.path}")
        where = self.owner.where(parts.hostname, parts.port or 80)
        if where is None:
            return self._answer(502, f"the proxy cannot reach {parts.hostname}")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection(*where, timeout=30)
        try:
            upstream.request(self.command, (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                             body=body, headers=headers)
            answer = upstream.getresponse()
            content = answer.read()
        except OSError as exc:
            return self._answer(502, f"the proxy could not reach {parts.hostname}: {exc}")
        finally:
            upstream.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward

    def do_CONNECT(self) -> None:
        self.owner.record("CONNECT", self.path, self.headers.get("proxy-authorization"))
        if self.owner.refuse:
            return self._answer(403, "this proxy serves nobody")
        host, _, port = self.path.rpartition(":")
        where = self.owner.where(host.strip("[]"), int(port))
        if where is None:
            return self._answer(502, f"the proxy cannot reach {host}")
        try:
            upstream = socket.create_connection(where, timeout=30)
        except OSError as exc:
            return self._answer(502, f"the proxy could not reach {host}: {exc}")
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        sockets = [self.connection, upstream]
        try:
            while True:
                readable, _, _ = select.select(sockets, [], [], 30)
                if not readable:
                    return
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (upstream if sock is self.connection else self.connection).sendall(data)
        finally:
            upstream.close()


class EchoHandler(BaseHTTPRequestHandler):
    """A server behind the proxy: ``GET /health`` answers 200, and every request is
    answered with JSON saying the method, the path and the Host header it got."""

    protocol_version = "HTTP/1.1"

    def _echo(self) -> None:
        import json

        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"method": self.command, "path": self.path, "host": self.headers.get("host")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _echo

    def log_message(self, *args: object) -> None:
        pass


class EchoServer:
    """An :class:`EchoHandler` server on ``127.0.0.1``, on a thread; ``port``, ``close()``."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
        self._server.daemon_threads = True
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, name="test-echo", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "EchoServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def use_proxy_variables(monkeypatch, **variables: str) -> None:
    """Remove every ``*_proxy`` variable of this process (any case) and set ``variables``
    (``HTTP_PROXY="http://..."``, ``NO_PROXY=""``) for the test's duration."""
    import os

    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
