"""aiohttp's client behind the hot path's interface, for ``transport_ab.py`` (issue 37).

The plugin's hot path uses two names of ``pytest_agentgym.transport``: a
``KeepAliveTransport()`` (given to an ``httpx.AsyncClient`` as its transport, and
to its routes) and ``Route(transport, base_url, headers)`` with
``Route.usable(base_url)`` and ``await route.request(method, path, body, timeout)``
returning a ``RawAnswer``. :class:`AiohttpTransport` and :class:`AiohttpRoute` are
the same surface over one ``aiohttp.ClientSession`` per transport (a
``TCPConnector`` with no cap on connections, idle connections closed after 4 s as
ours are, no cookie jar, no decompression, no User-Agent or Accept-Encoding of its own), and
they raise httpx's exceptions as ours do, so the callers do not know the difference.

``aiohttp_swap.py`` swaps them in for the run it measures. The package does not
depend on aiohttp: nothing here is shipped.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

import httpx

try:
    from pytest_agentgym.transport.keepalive import IDLE_EXPIRY_S
    from pytest_agentgym.transport.proxies import AsyncProxyRouting, proxy_for
    from pytest_agentgym.transport.route import RawAnswer, Route
except ImportError:  # a tree from before transport.py became a package
    from pytest_agentgym.transport import IDLE_EXPIRY_S, AsyncProxyRouting, RawAnswer, Route, proxy_for  # type: ignore[no-redef]

#: sessions made in this process (the swap plugin reports it, so a benchmark can tell which transport ran)
SESSIONS = 0


class AiohttpTransport(httpx.AsyncBaseTransport):
    """``KeepAliveTransport``'s surface over aiohttp. One per client; its session is made
    on the first request, in the event loop that sends it."""

    def __init__(self, *, idle_expiry: float = IDLE_EXPIRY_S, max_connections: int | None = None) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self.idle_expiry = idle_expiry
        self.max_connections = max_connections
        self._session: Any = None
        self._timeouts: dict[float | None, Any] = {}
        self._other: AsyncProxyRouting | None = None
        self.opened = 0  # not counted here (aiohttp's connector keeps its own)
        self.resent = 0

    def session(self) -> Any:
        if self._session is None:
            global SESSIONS
            SESSIONS += 1
            aiohttp = self._aiohttp
            connector = aiohttp.TCPConnector(limit=self.max_connections or 0, limit_per_host=0,
                                             keepalive_timeout=self.idle_expiry)
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"), trust_env=False)
        return self._session

    def timeout(self, seconds: float | None) -> Any:
        """Connect (a place in the pool included) and read within ``seconds`` each, as ours."""
        found = self._timeouts.get(seconds)
        if found is None:
            found = self._timeouts[seconds] = self._aiohttp.ClientTimeout(
                total=None, connect=seconds, sock_read=seconds)
        return found

    async def send(self, method: str, url: Any, body: bytes | None, headers: Any, timeout: float | None,
                   proxy: str | None = None) -> tuple[int, Any, bytes]:
        """The answer's status, raw headers and body; aiohttp's failures as httpx's."""
        aiohttp = self._aiohttp
        try:
            async with self.session().request(method, url, data=body, headers=headers,
                                              timeout=self.timeout(timeout), proxy=proxy,
                                              allow_redirects=False) as answer:
                content = await answer.read()
                return answer.status, answer.raw_headers, content
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(f"{exc}") from exc
        except aiohttp.ServerTimeoutError as exc:  # connect or read
            connect = getattr(aiohttp, "ConnectionTimeoutError", None)
            kind = httpx.ConnectTimeout if connect is not None and isinstance(exc, connect) else httpx.ReadTimeout
            raise kind(f"{exc or 'timed out'}") from exc
        except asyncio.TimeoutError as exc:
            raise httpx.ReadTimeout("no answer within the read timeout") from exc
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
            raise httpx.RemoteProtocolError(f"{exc}") from exc
        except aiohttp.ClientError as exc:  # ClientOSError and the rest
            raise httpx.ReadError(f"{exc}") from exc

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http" or proxy_for(url) is not None:
            if self._other is None:
                self._other = AsyncProxyRouting()
            return await self._other.handle_async_request(request)
        timeouts = request.extensions.get("timeout") or {}
        from yarl import URL

        status, headers, body = await self.send(
            request.method, URL(str(url), encoded=True), await request.aread() or None,
            list(request.headers.multi_items()), timeouts.get("read"))
        return httpx.Response(status, headers=list(headers), content=body, extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
        if self._other is not None:
            await self._other.aclose()


class AiohttpRoute:
    """``transport.Route``'s surface over :class:`AiohttpTransport`: requests to one
    ``http://`` base URL with fixed headers, answered as a ``RawAnswer``."""

    usable = staticmethod(Route.usable)

    def __init__(self, transport: AiohttpTransport, base_url: str,
                 headers: Mapping[str, str] | None = None) -> None:
        from yarl import URL

        #: the proxy the requests go through (None: straight there), by Route's own checks and rule
        self.proxy = Route(transport, base_url, headers).proxy  # type: ignore[arg-type]
        self.transport = transport
        self._url = URL
        self.prefix = base_url.rstrip("/")
        fixed = {"Accept": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}}
        self._plain = fixed
        self._json = {**fixed, "content-type": "application/json"}

    async def request(self, method: str, path: str, body: bytes | None, timeout: float | None) -> RawAnswer:
        status, headers, content = await self.transport.send(
            method, self._url(self.prefix + path, encoded=True), body,
            self._plain if body is None else self._json, timeout, self.proxy)
        return RawAnswer(status, headers, content)
