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
``WriteTimeout``, ``PoolTimeout``, ``RemoteProtocolError``, ``ReadError``), so
callers map them as they would httpx's.

Keep-alive has a race: a server closes a connection that has been idle too long
(uvicorn: 5 s) while this side, whose event loop has not yet seen the close, sends
the next request on it. The request then meets a closed or reset socket, and no
byte of an answer comes. Three things deal with it:

* a connection idle longer than ``idle_expiry`` seconds (4 s) is closed rather
  than reused. That alone leaves a window: the idle time is counted from when this
  process read the last answer, which a busy loop does late. It is not made
  shorter, since the two checks below make the race harmless, while every
  connection retired early costs a new one whenever a model turn outlasts it;
* before reuse, the socket is polled: a peer's close makes it readable (EOF or
  reset) before the loop has run the callback that would mark it at EOF;
* a request sent on a *reused* connection that ends before a single byte of the
  answer is sent once more (once), on a new connection, and the idle connections
  older than that one are closed. That is safe for any method, ``POST /step``
  included: a keep-alive server closes only a connection it is not serving (uvicorn
  cancels the idle timer as soon as a request's bytes arrive), and a server that
  closes with our request unread resets the connection; it never read the request,
  so it never ran it. A new connection that drops is never retried: there the
  server may have run the request before failing.

Back-pressure: when this process runs out of file descriptors or ports
(``EMFILE``: ``ulimit -n`` is often 1,024, and hundreds of episodes hold a
connection to the model and one to their environment server each), a request
that cannot connect waits for one of the server's other connections to come free
(FIFO, within its read timeout: ``httpx.PoolTimeout`` after that) instead of
failing. ``max_connections`` caps the connections per server outright (default
None: no cap). A cap below the episodes in flight costs throughput when this
process is the bottleneck: the server idles while the client refills its few
connections (at 512 in flight, a cap of 128 halved the episodes per second).
"""

from __future__ import annotations

import asyncio
import base64
import errno
import ipaddress
import json
import os
import re
import select
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

import httpx

from pytest_agentgym.results.jsonl import json_utf8
from pytest_agentgym.results.redact import redact_url

#: seconds a connection may sit idle before it is closed rather than reused (uvicorn closes at 5 s)
IDLE_EXPIRY_S = 4.0
#: what a connection that fails with one of these waits for another one to come free
#: (this process is out of descriptors or ports, not the server unreachable)
_SHORT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS})
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


#: file descriptors an episode in flight may hold: a connection to the model, one to its
#: environment server, and room for the replicas' and the health probes' own
FILES_PER_EPISODE = 3
#: descriptors the process needs besides (logs, pipes, the servers it spawned, imports)
FILES_BESIDES = 256


def ensure_file_room(in_flight: int) -> int:
    """Raise this process's soft limit on open files (``ulimit -n``, often 1,024) toward its
    hard limit, so that ``in_flight`` episodes each holding their connections do not run
    out (the transport's back-pressure would then hold them up); never lowers it.
    Returns the soft limit in force afterwards (-1: unlimited, or no such limit here)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FILES_PER_EPISODE * in_flight + FILES_BESIDES
    if soft == resource.RLIM_INFINITY or soft >= want:
        return -1 if soft == resource.RLIM_INFINITY else soft
    raised = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if raised > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        except (ValueError, OSError):  # a platform that refuses: the back-pressure still holds
            return soft
        return raised
    return soft


class _Connection:
    __slots__ = ("reader", "writer", "fd", "idle_since", "used", "expired")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        sock = writer.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        self.idle_since = 0.0
        #: whether it carried an exchange before (only then is a request on it sent again)
        self.used = False
        #: whether its read timed out (and it was aborted)
        self.expired = False

    def usable(self, now: float, expiry: float, poller: "select.poll") -> bool:
        if self.reader.at_eof() or self.writer.is_closing() or now - self.idle_since >= expiry:
            return False
        return self.fd < 0 or not _readable(poller, self.fd)

    def close(self) -> None:
        self.writer.close()

    def expire(self) -> None:
        """The read timeout: abort the connection, so that the read waiting on it ends."""
        self.expired = True
        self.writer.transport.abort()


def _readable(poller: "select.poll", fd: int) -> bool:
    """Whether ``fd`` has something to read now. An idle keep-alive connection has
    nothing to read unless the server closed it (EOF) or reset it; poll, not select,
    which cannot take descriptors above 1,023."""
    poller.register(fd, select.POLLIN)
    try:
        return bool(poller.poll(0))
    finally:
        poller.unregister(fd)


def _no_answer(kind: type[httpx.TransportError], message: str) -> httpx.TransportError:
    """``kind(message)``, marked as ending before a single byte of the answer: on a reused
    connection, the server closed it while idle and never ran the request. A mark, not a
    subclass: callers and records name httpx's own class (``RemoteProtocolError``, ``ReadError``)."""
    exc = kind(message)
    exc.agentgym_no_answer = True  # type: ignore[attr-defined]
    return exc


class _Pool:
    """One transport's connections to one server: the idle ones (a stack: the last put
    back is taken first, so the others age and expire when fewer are needed), how many
    are open (idle or busy), and the requests waiting for one (see :meth:`KeepAliveTransport._wait`)."""

    __slots__ = ("idle", "open", "waiters")

    def __init__(self) -> None:
        self.idle: list[_Connection] = []
        self.open = 0
        self.waiters: deque[asyncio.Future[_Connection | None]] = deque()

    def hand_over(self, conn: _Connection | None) -> bool:
        """Give ``conn`` (None: the right to open one) to the first request still waiting."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False


def _timeouts(request: httpx.Request) -> tuple[float | None, float | None, float | None]:
    timeout = request.extensions.get("timeout") or {}
    return timeout.get("connect"), timeout.get("read"), timeout.get("write")


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """See the module's docstring. One per client; not shared across event loops.

    ``max_connections``: per server (None: no cap; the engine's concurrency bounds the
    requests in flight already)."""

    def __init__(self, *, idle_expiry: float = IDLE_EXPIRY_S, max_connections: int | None = None) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be at least 1 (or None: no limit), got {max_connections}")
        self.idle_expiry = idle_expiry
        self.max_connections = max_connections
        self._pools: dict[tuple[str, int], _Pool] = {}
        self._poller = select.poll()
        #: httpx's transports, for https:// and for a proxy that is not http://
        self._other: AsyncProxyRouting | None = None
        #: the proxy of each (host, port) asked for so far (None: straight there)
        self._proxies: dict[tuple[str, int | None], str | None] = {}
        #: connections opened so far, and requests sent again after a reused connection
        #: ended unanswered (tests and benchmarks read them)
        self.opened = 0
        self.resent = 0

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
        connection, a new one, or the first to come free; the answer's status, headers
        and body. ``via``: the proxy that ``address`` is (for messages)."""
        pool = self._pools.get(address)
        if pool is None:
            pool = self._pools[address] = _Pool()
        conn = self._take(pool) or await self._connection(pool, address, connect_timeout, read_timeout, via)
        try:
            return await self._exchange_on(pool, conn, payload, method, read_timeout, write_timeout)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            if not conn.used or not (isinstance(exc, httpx.WriteError) or getattr(exc, "agentgym_no_answer", False)):
                raise
        # the server closed a connection it held idle, unaware of the request: send it once more, on
        # a new connection, after closing the idle ones older than that one (closed by now, most likely)
        self.resent += 1
        self._expire(pool, conn.idle_since)
        conn = await self._connection(pool, address, connect_timeout, read_timeout, via)
        return await self._exchange_on(pool, conn, payload, method, read_timeout, write_timeout)

    async def _exchange_on(self, pool: _Pool, conn: _Connection, payload: bytes, method: str,
                           read_timeout: float | None,
                           write_timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        try:
            await self._write(conn, payload, write_timeout)
            status, headers, body, keep = await self._read(conn, method, read_timeout)
        except BaseException:
            self._discard(pool, conn)
            raise
        if keep and not conn.expired:
            conn.used = True
            conn.idle_since = time.monotonic()
            if not pool.hand_over(conn):
                pool.idle.append(conn)
        else:
            self._discard(pool, conn)
        return status, headers, body

    async def aclose(self) -> None:
        for pool in self._pools.values():
            for conn in pool.idle:
                conn.close()
            pool.open -= len(pool.idle)
            pool.idle.clear()
        self._pools.clear()
        if self._other is not None:
            await self._other.aclose()

    # -- connections -------------------------------------------------------------

    def _take(self, pool: _Pool) -> _Connection | None:
        """The idle connection put back last that is still usable; the unusable ones met on the way are closed."""
        stack = pool.idle
        if not stack:
            return None
        now = time.monotonic()
        while stack:
            conn = stack.pop()
            if conn.usable(now, self.idle_expiry, self._poller):
                return conn
            self._discard(pool, conn)
        return None

    def _expire(self, pool: _Pool, since: float) -> None:
        """Close the idle connections idle since ``since`` or longer (the bottom of the stack)."""
        keep = [conn for conn in pool.idle if conn.idle_since > since]
        for conn in pool.idle:
            if conn.idle_since <= since:
                conn.close()
                pool.open -= 1
        pool.idle[:] = keep

    def _discard(self, pool: _Pool, conn: _Connection) -> None:
        """Close ``conn``; its place goes to the first waiting request (which opens a new one), if any."""
        conn.close()
        self._free(pool)

    @staticmethod
    def _free(pool: _Pool) -> None:
        if not pool.hand_over(None):
            pool.open -= 1

    async def _connection(self, pool: _Pool, address: tuple[str, int], connect_timeout: float | None,
                          wait_timeout: float | None, via: str | None) -> _Connection:
        """A new connection, or the first of the server's others that comes free: when
        ``max_connections`` are open, or when this process is short of descriptors or ports."""
        if self.max_connections is None or pool.open < self.max_connections:
            pool.open += 1
        else:
            conn = await self._wait(pool, address, wait_timeout)
            if conn is not None:
                return conn
        while True:  # this request holds a place in the pool: open a connection in it
            try:
                return await self._open(address, connect_timeout, via)
            except httpx.ConnectError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, OSError) and cause.errno in _SHORT_OF and pool.open > 1):
                    self._free(pool)
                    raise
                pool.open -= 1  # not handed on: a waiter would be short of the same
                conn = await self._wait(pool, address, wait_timeout)
                if conn is not None:
                    return conn
            except BaseException:
                self._free(pool)
                raise

    async def _wait(self, pool: _Pool, address: tuple[str, int], timeout: float | None) -> _Connection | None:
        """Wait (FIFO) for a connection put back (returned) or a place freed by one closed (None)."""
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        pool.waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():  # given one just as it stopped waiting
                given = waiter.result()
                if given is None:
                    self._free(pool)
                elif not pool.hand_over(given):
                    pool.idle.append(given)
            else:
                waiter.cancel()
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout(
                    f"waited {timeout:g} s for one of the {pool.open} busy connections to {address[0]}:{address[1]}"
                    " to come free; is the server overloaded or stuck?") from None
            raise

    async def _open(self, address: tuple[str, int], timeout: float | None,
                    via: str | None = None) -> _Connection:
        where = f"{address[0]}:{address[1]}" + (f", {proxy_phrase(via)}" if via else "")
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(*address, limit=_HEAD_LIMIT * 16)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {where} timed out") from None
        except OSError as exc:
            hint = "; raise this process's limit (ulimit -n)" if exc.errno in (errno.EMFILE, errno.ENFILE) else ""
            raise httpx.ConnectError(f"{exc.strerror or exc} ({where}){hint}") from exc
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
        """The answer on ``conn``. The read timeout is a plain timer that aborts the connection
        (marking it expired), not ``asyncio.timeout``, which cost twice as much per request:
        a tenth of the episode loop's CPU at 512 in flight."""
        timer = None
        if timeout is not None:
            loop = asyncio.get_running_loop()
            timer = loop.call_at(loop.time() + timeout, conn.expire)
        try:
            return await self._response(conn.reader, method)
        except (httpx.TransportError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
            if conn.expired:
                raise httpx.ReadTimeout("no answer within the read timeout") from None
            if isinstance(exc, httpx.TransportError):
                raise
            if isinstance(exc, asyncio.IncompleteReadError):
                raise httpx.RemoteProtocolError("the server closed the connection before a complete answer") from exc
            if isinstance(exc, asyncio.LimitOverrunError):
                raise httpx.RemoteProtocolError("the answer's head is too long") from exc
            raise httpx.ReadError(f"reading the answer failed: {exc}") from exc
        finally:
            if timer is not None:
                timer.cancel()

    @staticmethod
    async def _response(reader: asyncio.StreamReader,
                        method: str) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            raise _no_answer(httpx.RemoteProtocolError, "the server closed the connection without an answer") from exc
        except ConnectionError as exc:  # a reset: the server closed with the request unread
            raise _no_answer(httpx.ReadError, f"the server reset the connection without an answer: {exc}") from exc
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
