"""The plugin's one proxy rule (:func:`proxy_for`) and the httpx clients that follow it.

A loopback host is never proxied; any other host gets what httpx's ``trust_env``
would give it from the ``*_PROXY`` variables. :func:`http_client` and
:func:`async_http_client` (httpx clients over :class:`ProxyRouting` and
:class:`AsyncProxyRouting`) serve every HTTP client of the plugin off the hot path;
the hot path's own transport (``transport.keepalive``) and its direct routes
(``transport.route``) ask :func:`proxy_for` too.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

import httpx

from pytest_agentgym.results.redact import redact_url


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


def proxy_address(proxy: str) -> tuple[tuple[str, int], str | None]:
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
