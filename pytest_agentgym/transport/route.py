"""The direct route of the hot path: requests to one ``http://`` server straight over a
:class:`~pytest_agentgym.transport.keepalive.KeepAliveTransport`, without httpx's
request and response objects: a head prepared once per server, a JSON body
(:func:`encode_json`), the answer as a :class:`RawAnswer`.
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from urllib.parse import urlsplit

from pytest_agentgym.results.jsonl import json_utf8
from pytest_agentgym.transport.keepalive import KeepAliveTransport
from pytest_agentgym.transport.proxies import proxy_address, proxy_for, proxy_phrase


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
            self.address, auth = proxy_address(self.proxy)
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
