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

Proxies: one rule for every HTTP client of the plugin, :func:`proxy_for`. Traffic
to this machine (``localhost``, ``127.0.0.0/8``, ``::1``: the environment servers,
the reference agent, a vLLM we launched) never goes through a proxy, whatever
``HTTP_PROXY``, ``ALL_PROXY`` or ``NO_PROXY`` say; traffic to other hosts honours
``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` as httpx does with
``trust_env``. This transport and :class:`Route` speak to an ``http://`` proxy
themselves (absolute-form requests); :class:`ProxyRouting` and
:class:`AsyncProxyRouting` apply the rule under httpx's own transports, and
:func:`http_client` / :func:`async_http_client` are httpx clients built on them.

:class:`Route` is the leaner way in, for the two requests of every step: it
writes a request head prepared once per server (host, fixed headers) plus the
JSON body, and hands back a :class:`RawAnswer` (status, headers, bytes) instead
of an ``httpx.Response``. httpx's ``AsyncClient.send`` builds and merges URLs,
headers and cookies for every call; on this path that cost more CPU than the
exchange itself (docs/how-it-works.md, "The hot path").
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import os
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

import httpx

from pytest_agentgym.results.jsonl import json_utf8
from pytest_agentgym.results.redact import redact_url

#: seconds a connection may sit idle before it is closed rather than reused
IDLE_EXPIRY_S = 4.0
_HEAD_LIMIT = 64 * 1024


# ------------------------------------------------------------------------ proxies


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine: ``localhost`` (and ``*.localhost``), an
    address in ``127.0.0.0/8``, ``::1`` (an IPv4-mapped one too), or the
    unspecified address (``0.0.0.0``, ``::``), which reaches this machine."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


@dataclass(frozen=True)
class _Pattern:
    """One key of httpx's proxy mounts (``http://``, ``all://*example.com``, ...)
    with its proxy (None: no proxy); matched as httpx's ``URLPattern`` matches."""

    scheme: str
    host: str
    port: int | None
    host_regex: re.Pattern[str] | None
    proxy: str | None

    @classmethod
    def of(cls, key: str, proxy: str | None) -> "_Pattern":
        url = httpx.URL(key)
        scheme = "" if url.scheme == "all" else url.scheme
        host = "" if url.host == "*" else url.host
        if not host:
            regex = None
        elif host.startswith("*."):  # *.example.com: www.example.com, not example.com
            regex = re.compile(f"^.+\\.{re.escape(host[2:])}$")
        elif host.startswith("*"):  # *example.com: www.example.com and example.com
            regex = re.compile(f"^(.+\\.)?{re.escape(host[1:])}$")
        else:
            regex = re.compile(f"^{re.escape(host)}$")
        return cls(scheme, host, url.port, regex, proxy)

    def matches(self, url: httpx.URL) -> bool:
        if self.scheme and self.scheme != url.scheme:
            return False
        if self.host and self.host_regex is not None and not self.host_regex.match(url.host):
            return False
        return self.port is None or self.port == url.port

    @property
    def priority(self) -> tuple[int, int, int]:
        """httpx's order: a port first, then longer hosts, then longer schemes."""
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))


def _proxy_variables(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``*_proxy`` variables, as ``urllib.request.getproxies`` reads them (which
    httpx uses): lower-case names win over upper-case ones, an empty lower-case one
    removes its scheme, and a CGI request (``REQUEST_METHOD``) ignores ``HTTP_PROXY``."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        lower = name.lower()
        if value and lower.endswith("_proxy"):
            found[lower[:-6]] = value
    if "REQUEST_METHOD" in environ:
        found.pop("http", None)
    for name, value in environ.items():
        if name.endswith("_proxy"):
            if value:
                found[name.lower()[:-6]] = value
            else:
                found.pop(name.lower()[:-6], None)
    return tuple(sorted(found.items()))


@lru_cache(maxsize=32)
def _patterns(variables: tuple[tuple[str, str], ...]) -> tuple[_Pattern, ...]:
    """The proxy mounts httpx builds from ``variables`` with ``trust_env``, most specific
    first (httpx's ``get_environment_proxies`` and the client's sort)."""
    info = dict(variables)
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if info.get(scheme):
            value = info[scheme]
            mounts[f"{scheme}://"] = value if "://" in value else f"http://{value}"
    for host in (entry.strip() for entry in info.get("no", "").split(",")):
        if host == "*":
            return ()  # NO_PROXY=*: no proxy for anything
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host, 4):
            mounts[f"all://{host}"] = None
        elif _is_ip(host, 6):
            mounts[f"all://[{host}]"] = None
        elif host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        else:
            mounts[f"all://*{host}"] = None
    patterns = []
    for key, proxy in mounts.items():
        try:
            patterns.append(_Pattern.of(key, proxy))
        except (httpx.InvalidURL, ValueError):
            continue  # httpx would refuse the whole client; a bad NO_PROXY entry only is skipped here
    return tuple(sorted(patterns, key=lambda p: p.priority))


def _is_ip(host: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(host.split("/")[0]).version == version
    except ValueError:
        return False


def proxy_for(url: str | httpx.URL, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy that a request to ``url`` goes through, or None: straight to it.

    The one rule of every HTTP client of the plugin. A loopback host
    (:func:`is_loopback`) is never proxied: a proxy runs elsewhere, and this
    machine's servers are not its to reach. Any other host gets what httpx's
    ``trust_env`` would give it from ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``
    and ``NO_PROXY`` (lower-case names too) in ``environ`` (default: this process's
    environment)."""
    target = url if isinstance(url, httpx.URL) else httpx.URL(url)
    if not target.host or is_loopback(target.host):
        return None
    for pattern in _patterns(_proxy_variables(os.environ if environ is None else environ)):
        if pattern.matches(target):
            return pattern.proxy
    return None


def proxy_phrase(proxy: str) -> str:
    """``through the proxy http://host:3128`` (credentials shown as ``***``), for messages."""
    return f"through the proxy {redact_url(proxy)}"


def _proxy_address(proxy: str) -> tuple[tuple[str, int], str | None]:
    """An ``http://`` proxy's address and its ``Proxy-Authorization`` value (None without user info)."""
    parts = urlsplit(proxy)
    if not parts.hostname:
        raise httpx.ProxyError(f"the proxy URL {redact_url(proxy)} names no host; fix the *_PROXY variable")
    auth = None
    if parts.username is not None:
        user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(user.encode("utf-8")).decode("ascii")
    return (parts.hostname, parts.port or 80), auth


class ProxyRouting(httpx.BaseTransport):
    """httpx's own transport, once per route: each request goes straight to its server
    or through the proxy :func:`proxy_for` names for its URL. ``options`` are
    ``httpx.HTTPTransport``'s (``verify``, ``retries``, ...)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._routes: dict[str | None, httpx.BaseTransport] = {}
        self._lock = threading.Lock()

    def route(self, url: httpx.URL) -> httpx.BaseTransport:
        proxy = proxy_for(url)
        with self._lock:
            if proxy not in self._routes:
                self._routes[proxy] = _made(httpx.HTTPTransport, proxy, self._options)
            return self._routes[proxy]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.route(request.url).handle_request(request)

    def close(self) -> None:
        with self._lock:
            routes, self._routes = list(self._routes.values()), {}
        for transport in routes:
            transport.close()


class AsyncProxyRouting(httpx.AsyncBaseTransport):
    """:class:`ProxyRouting` for ``httpx.AsyncClient``."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._routes: dict[str | None, httpx.AsyncBaseTransport] = {}

    def route(self, url: httpx.URL) -> httpx.AsyncBaseTransport:
        proxy = proxy_for(url)
        if proxy not in self._routes:
            self._routes[proxy] = _made(httpx.AsyncHTTPTransport, proxy, self._options)
        return self._routes[proxy]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.route(request.url).handle_async_request(request)

    async def aclose(self) -> None:
        routes, self._routes = list(self._routes.values()), {}
        for transport in routes:
            await transport.aclose()


def _made(kind: Any, proxy: str | None, options: Mapping[str, Any]) -> Any:
    if proxy is None:
        return kind(**options)
    try:
        return kind(proxy=proxy, **options)
    except ImportError as exc:  # socks5:// without socksio
        raise httpx.ProxyError(f"cannot use the proxy {redact_url(proxy)} (from the *_PROXY variables): "
                               f"{exc}") from exc


def http_client(**kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` (``kwargs`` as for it) whose requests follow :func:`proxy_for`."""
    return httpx.Client(transport=ProxyRouting(), **kwargs)


def async_http_client(**kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (``kwargs`` as for it) whose requests follow :func:`proxy_for`."""
    return httpx.AsyncClient(transport=AsyncProxyRouting(), **kwargs)


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
        #: httpx's transports, for https:// and for a proxy that is not http://
        self._other: AsyncProxyRouting | None = None
        #: the proxy of each (host, port) asked for so far (None: straight there)
        self._proxies: dict[tuple[str, int | None], str | None] = {}
        #: connections opened so far (tests and benchmarks read it)
        self.opened = 0

    def _proxy(self, url: httpx.URL) -> str | None:
        key = (url.host, url.port)
        if key not in self._proxies:
            self._proxies[key] = proxy_for(url)
        return self._proxies[key]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        proxy = self._proxy(url) if url.scheme == "http" else None
        if url.scheme != "http" or (proxy is not None and not proxy.startswith("http://")):
            if self._other is None:
                self._other = AsyncProxyRouting()
            return await self._other.handle_async_request(request)
        if proxy is None:
            address, target, extra = (url.host, url.port or 80), None, ()
        else:  # an http:// proxy: the whole URL as the request target (absolute form)
            address, auth = _proxy_address(proxy)
            target = f"http://{url.netloc.decode('ascii')}{url.raw_path.decode('ascii')}"
            extra = (("proxy-authorization", auth),) if auth else ()
        payload = self._encode(request, await request.aread(), target, extra)
        status, headers, body = await self.exchange(
            address, payload, request.method, *_timeouts(request), via=proxy)
        return httpx.Response(status, headers=headers, content=body,
                              extensions={"http_version": b"HTTP/1.1"})

    async def exchange(self, address: tuple[str, int], payload: bytes, method: str,
                       connect_timeout: float | None, read_timeout: float | None,
                       write_timeout: float | None,
                       via: str | None = None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send ``payload`` (a whole HTTP/1.1 request) to ``address`` over an idle
        connection, or a new one; the answer's status, headers and body. ``via``: the
        proxy that ``address`` is (for messages)."""
        conn = self._take(address)
        if conn is None:
            conn = await self._open(address, connect_timeout, via)
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
        if self._other is not None:
            await self._other.aclose()

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

    async def _open(self, address: tuple[str, int], timeout: float | None,
                    via: str | None = None) -> _Connection:
        where = f"{address[0]}:{address[1]}" + (f", {proxy_phrase(via)}" if via else "")
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(*address, limit=_HEAD_LIMIT * 16)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {where} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{exc.strerror or exc} ({where})") from exc
        self.opened += 1
        return _Connection(reader, writer)

    # -- the exchange -------------------------------------------------------------

    @staticmethod
    def _encode(request: httpx.Request, body: bytes, target: str | None = None,
                extra: tuple[tuple[str, str], ...] = ()) -> bytes:
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
    transport's httpx exceptions, as through ``httpx.AsyncClient``. Where
    :func:`proxy_for` names an ``http://`` proxy for ``base_url``, the requests go
    to it (absolute-form targets); a route through another kind of proxy cannot
    be made (:meth:`usable` says no).
    """

    def __init__(self, transport: KeepAliveTransport, base_url: str,
                 headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(f"a direct route needs a plain http:// URL, not {base_url!r}")
        #: the proxy the requests go through (None: straight to the server)
        self.proxy = proxy_for(base_url)
        if self.proxy is not None and not self.proxy.startswith("http://"):
            raise ValueError(f"a direct route cannot go {proxy_phrase(self.proxy)}: only http:// proxies")
        self.transport = transport
        self.prefix = parts.path.rstrip("/")
        fixed = {"host": parts.netloc, "accept": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}}
        if self.proxy is None:
            self.address = (parts.hostname, parts.port or 80)
        else:
            self.address, auth = _proxy_address(self.proxy)
            self.prefix = f"http://{parts.netloc.rpartition('@')[2]}{self.prefix}"
            if auth:
                fixed["proxy-authorization"] = auth
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())

    @classmethod
    def usable(cls, base_url: str) -> bool:
        """Whether ``base_url`` can be reached this way (plain http, no query, and no
        proxy or an http:// one)."""
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or parts.query or parts.fragment:
            return False
        proxy = proxy_for(base_url)
        return proxy is None or proxy.startswith("http://")

    async def request(self, method: str, path: str, body: bytes | None, timeout: float | None) -> RawAnswer:
        """``method`` ``path`` (under the prefix; may carry a query) with a JSON ``body``."""
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{self._fixed}"
        if body is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "content-length: 0\r\n"  # as httpx sends an empty POST
        payload = (head + "\r\n").encode("latin-1") + (body or b"")
        status, headers, content = await self.transport.exchange(
            self.address, payload, method, timeout, timeout, timeout, self.proxy)
        return RawAnswer(status, headers, content)
