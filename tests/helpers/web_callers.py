"""What a web page can send to a server on this machine, for the tests of the Host guard
(pytest_agentgym/transport/host_guard.py): raw HTTP requests with the headers a browser
would put on them (a foreign ``Host`` after DNS rebinding, an ``Origin``, ``text/plain``),
a real Chromium whose resolver maps a foreign name to 127.0.0.1, and a page served from
another loopback origin."""

from __future__ import annotations

import http.client
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Mapping
from contextlib import contextmanager

from helpers.report_fixtures import HeadlessChromium

#: The name a rebinding attacker's page has; Chromium's resolver maps it to 127.0.0.1.
ATTACKER = "attacker.example"


def raw(port: int, method: str, path: str, headers: Mapping[str, str | None] | None = None,
        body: bytes | None = None, timeout: float = 60.0) -> tuple[int, dict[str, str], bytes]:
    """One request to 127.0.0.1:``port`` with exactly ``headers`` (``Host`` included when
    given: http.client then adds none; ``"Host": None`` sends no Host at all, as an HTTP/1.0
    client may). Returns (status, lower-cased headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        given = dict(headers or {})
        connection.putrequest(method, path, skip_host="Host" in given, skip_accept_encoding=True)
        for name, value in given.items():
            if value is not None:
                connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def cors_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The CORS headers among ``headers`` (a server that must let no page read it sends none)."""
    return {name: value for name, value in headers.items() if name.lower().startswith("access-control-")}


def rebinding_chromium(chromium: str, workdir: Path, name: str = ATTACKER) -> HeadlessChromium:
    """Headless Chromium whose resolver answers 127.0.0.1 for ``name`` (what a rebinding DNS
    server does): a wrapper script adds ``--host-resolver-rules`` and becomes Chromium."""
    workdir.mkdir(parents=True, exist_ok=True)
    wrapper = workdir / "chromium-rebound"
    wrapper.write_text(f'#!/bin/sh\nexec "{chromium}" "--host-resolver-rules=MAP {name} 127.0.0.1" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return HeadlessChromium(str(wrapper), workdir / "profile")


class _PageHandler(BaseHTTPRequestHandler):
    page = b""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)


@contextmanager
def page_server(html: str) -> Iterator[str]:
    """A page served at http://127.0.0.1:PORT/ (another origin than the server under test,
    as a page of any site is); yields its URL."""
    handler = type("Page", (_PageHandler,), {"page": html.encode("utf-8")})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root`` (links not followed) -> (size, mtime_ns): what a server that
    writes nothing there leaves as it was."""
    found = {}
    for folder, folders, files in os.walk(root):
        for entry in (*folders, *files):
            path = Path(folder) / entry
            status = path.lstat()
            found[str(path.relative_to(root))] = (status.st_size, status.st_mtime_ns)
    return found
