"""A lean keep-alive HTTP/1.1 transport for the hot path: for ``httpx.AsyncClient``,
and, through ``transport.route.Route``, without httpx's request and response objects at all.

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
import errno
import select
import time
from collections import deque

import httpx

from pytest_agentgym.transport.http11 import encode_request, read_response
from pytest_agentgym.transport.proxies import AsyncProxyRouting, proxy_address, proxy_for, proxy_phrase

#: seconds a connection may sit idle before it is closed rather than reused (uvicorn closes at 5 s)
IDLE_EXPIRY_S = 4.0
#: what a connection that fails with one of these waits for another one to come free
#: (this process is out of descriptors or ports, not the server unreachable)
_SHORT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.ENOBUFS})
_HEAD_LIMIT = 64 * 1024
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
            address, auth = proxy_address(proxy)
            target = f"http://{url.netloc.decode('ascii')}{url.raw_path.decode('ascii')}"
            extra = (("proxy-authorization", auth),) if auth else ()
        payload = encode_request(request, await request.aread(), target, extra)
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

    # -- the exchange (the framing is http11's) -------------------------------------

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
            return await read_response(conn.reader, method)
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
