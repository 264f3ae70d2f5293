"""The lean keep-alive HTTP/1.1 transport (pytest_agentgym/transport/) that the env and
model clients use on the hot path: many requests, few connections; and the one proxy
rule of every HTTP client (transport.proxies.proxy_for), checked through a real proxy on
loopback (tests/helpers/http_proxy.py)."""

from __future__ import annotations

import asyncio
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest

from helpers.chat_server import ChatHandler
from helpers.http_proxy import EchoServer, RecordingProxy, use_proxy_variables


def test_an_env_client_reuses_its_connections(tmp_path):
    """The lean transport keeps connections alive: many requests, few connections."""
    from pytest_agentgym.transport.keepalive import KeepAliveTransport

    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    transport = KeepAliveTransport()

    async def many() -> list[int]:
        async with httpx.AsyncClient(transport=transport) as client:
            url = f"http://127.0.0.1:{server.server_port}/v1/chat/completions"
            body = {"model": "m", "messages": []}
            answers = await asyncio.gather(*(client.post(url, json=body) for _ in range(4)))
            answers += [await client.post(url, json=body) for _ in range(20)]
            return [a.status_code for a in answers]

    try:
        statuses = asyncio.run(many())
    finally:
        server.shutdown()
    assert statuses == [200] * 24
    assert transport.opened == 4


# -- proxies: one rule (transport.proxies.proxy_for) for every route -------------------------------


@pytest.mark.parametrize("url, environ, expected", [
    # this machine: never a proxy, whatever the variables say
    ("http://127.0.0.1:8000/v1", {"HTTP_PROXY": "http://p:3128"}, None),
    ("http://127.4.5.6:8000/", {"ALL_PROXY": "http://p:3128"}, None),
    ("http://localhost:36001/", {"http_proxy": "http://p:3128", "NO_PROXY": ""}, None),
    ("http://agent.localhost:80/", {"HTTP_PROXY": "http://p:3128"}, None),
    ("http://[::1]:8000/", {"ALL_PROXY": "http://p:3128"}, None),
    ("http://[::ffff:127.0.0.1]:8000/", {"ALL_PROXY": "http://p:3128"}, None),
    ("https://127.0.0.1:8443/", {"HTTPS_PROXY": "http://p:3128"}, None),
    # other hosts: as httpx's trust_env
    ("http://gpu-box:8000/v1", {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
    ("http://gpu-box:8000/v1", {"HTTP_PROXY": "p:3128"}, "http://p:3128"),  # no scheme: http://
    ("https://api.example.com/v1", {"HTTP_PROXY": "http://p:3128"}, None),  # https wants HTTPS_PROXY
    ("https://api.example.com/v1", {"HTTPS_PROXY": "http://s:3128"}, "http://s:3128"),
    ("http://gpu-box/v1", {"ALL_PROXY": "socks5://a:1080"}, "socks5://a:1080"),
    ("http://gpu-box/v1", {"ALL_PROXY": "http://a:1", "HTTP_PROXY": "http://h:2"}, "http://h:2"),
    ("http://gpu-box/v1", {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2"}, "http://lower:2"),
    ("http://gpu-box/v1", {"HTTP_PROXY": "http://h:1", "REQUEST_METHOD": "GET"}, None),  # CGI
    ("http://gpu-box/v1", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "*"}, None),
    ("http://gpu-box/v1", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "other, gpu-box"}, None),
    ("http://a.corp.example/v1", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "corp.example"}, None),
    ("http://corp.example/v1", {"HTTP_PROXY": "http://h:1", "NO_PROXY": ".corp.example"}, "http://h:1"),
    ("http://xcorp.example/v1", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "corp.example"}, "http://h:1"),
    ("http://10.1.2.3:80/", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "10.1.2.3"}, None),
    ("http://gpu-box:8000/", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "http://gpu-box:8000"}, None),
    ("http://gpu-box:9000/", {"HTTP_PROXY": "http://h:1", "NO_PROXY": "http://gpu-box:8000"}, "http://h:1"),
    ("http://gpu-box/v1", {}, None),
])
def test_proxy_for_is_httpx_trust_env_except_that_loopback_is_never_proxied(url, environ, expected):
    from pytest_agentgym.transport.proxies import proxy_for

    assert proxy_for(url, environ) == expected


def test_loopback_traffic_of_every_route_never_reaches_the_proxy(monkeypatch):
    """HTTP_PROXY and ALL_PROXY set, loopback not in NO_PROXY: the lean transport under
    httpx, its direct route and the httpx clients of transport.proxies all go straight to
    127.0.0.1 and localhost; the proxy sees nothing."""
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.proxies import async_http_client, http_client
    from pytest_agentgym.transport.route import Route

    with RecordingProxy(reach_loopback=True) as proxy, EchoServer() as server:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url, ALL_PROXY=proxy.url, NO_PROXY="")

        async def lean() -> list[dict]:
            transport = KeepAliveTransport()
            async with httpx.AsyncClient(transport=transport) as client:
                first = (await client.get(f"http://127.0.0.1:{server.port}/a")).json()
                second = (await client.post(f"http://localhost:{server.port}/b", json={})).json()
            route = Route(KeepAliveTransport(), f"http://127.0.0.1:{server.port}/v1")
            third = (await route.request("POST", "/c", b"{}", 5.0)).json()
            async with async_http_client() as plain:
                fourth = (await plain.get(f"http://127.0.0.1:{server.port}/d")).json()
            return [first, second, third, fourth]

        answers = asyncio.run(lean())
        with http_client() as sync:
            answers.append(sync.get(f"http://localhost:{server.port}/e").json())
    assert [a["path"] for a in answers] == ["/a", "/b", "/v1/c", "/d", "/e"]
    assert proxy.seen == []


def test_other_hosts_go_through_the_proxy_on_every_route(monkeypatch):
    """``example.invalid`` is a name only the proxy can resolve (to the loopback echo
    server): a request for it arrives only if the route honoured HTTP_PROXY, and the
    proxy is sent the whole URL (absolute form) with the credentials of its URL."""
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.proxies import async_http_client, http_client
    from pytest_agentgym.transport.route import Route

    with RecordingProxy(hosts={"example.invalid": "127.0.0.1"}) as proxy, EchoServer() as server:
        proxy_url = proxy.url.replace("http://", "http://user:s%40cret@")
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy_url, NO_PROXY="localhost")
        base = f"http://example.invalid:{server.port}"

        async def routes() -> list[dict]:
            transport = KeepAliveTransport()
            async with httpx.AsyncClient(transport=transport) as client:
                answers = [(await client.get(f"{base}/lean?x=1")).json()]
                answers.append((await client.post(f"{base}/lean-again", json={"a": 1})).json())
            route = Route(KeepAliveTransport(), f"{base}/v1")
            assert route.proxy == proxy_url
            answers.append((await route.request("POST", "/chat/completions", b"{}", 5.0)).json())
            async with async_http_client() as plain:
                answers.append((await plain.get(f"{base}/async")).json())
            return answers

        answers = asyncio.run(routes())
        with http_client() as sync:
            answers.append(sync.get(f"{base}/sync").json())
    assert [a["path"] for a in answers] == ["/lean?x=1", "/lean-again", "/v1/chat/completions", "/async", "/sync"]
    assert {a["host"] for a in answers} == {f"example.invalid:{server.port}"}
    assert [target for _, target, _ in proxy.seen] == [
        f"{base}/lean?x=1", f"{base}/lean-again", f"{base}/v1/chat/completions", f"{base}/async", f"{base}/sync"]
    assert {auth for _, _, auth in proxy.seen} == {"Basic dXNlcjpzQGNyZXQ="}  # user:s@cret


def test_https_goes_through_https_proxy_with_connect(monkeypatch):
    """An https:// URL takes HTTPS_PROXY (a CONNECT tunnel) on the lean transport and on
    the httpx clients; a proxy that refuses the tunnel is httpx's ProxyError."""
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.proxies import http_client

    with RecordingProxy(refuse=True) as proxy:
        use_proxy_variables(monkeypatch, HTTPS_PROXY=proxy.url)

        async def lean() -> None:
            async with httpx.AsyncClient(transport=KeepAliveTransport()) as client:
                await client.get("https://example.invalid/v1/models")

        with pytest.raises(httpx.ProxyError):
            asyncio.run(lean())
        with http_client() as sync, pytest.raises(httpx.ProxyError):
            sync.get("https://example.invalid:8443/v1/models")
    assert [(method, target) for method, target, _ in proxy.seen] == [
        ("CONNECT", "example.invalid:443"), ("CONNECT", "example.invalid:8443")]


def test_a_proxy_that_is_down_is_named_in_the_connection_error(monkeypatch):
    from pytest_agentgym.process.health import free_port
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.route import Route

    port = free_port()  # nothing listens there
    use_proxy_variables(monkeypatch, HTTP_PROXY=f"http://me:pw@127.0.0.1:{port}")

    async def call() -> None:
        await Route(KeepAliveTransport(), "http://example.invalid:8000/v1").request("GET", "/models", None, 5.0)

    with pytest.raises(httpx.ConnectError) as caught:
        asyncio.run(call())
    assert f"through the proxy http://***@127.0.0.1:{port}" in str(caught.value)
    assert "pw" not in str(caught.value)
