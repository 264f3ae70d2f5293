"""Proxies and the model side (issue 22, point 5): with HTTP_PROXY, HTTPS_PROXY and
ALL_PROXY pointing at a proxy that cannot reach this machine, and loopback not in
NO_PROXY, a run still starts the reference agent and its servers and plays every
episode, and nothing of it goes through the proxy; a model endpoint on another host
is called through the proxy, on the hot path too. The proxy is a real one on loopback
(tests/helpers/http_proxy.py); ``example.invalid`` is a name only it can resolve."""

from __future__ import annotations

import asyncio
import threading
from http.server import ThreadingHTTPServer

import pytest

from helpers.chat_server import ChatHandler
from helpers.http_proxy import RecordingProxy, use_proxy_variables
from helpers.projects import episodes, make_project, run, suite


@pytest.mark.faults
def test_a_run_with_every_proxy_variable_set_never_uses_the_proxy_for_its_own_processes(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-2\n")
    with RecordingProxy() as proxy:  # like a proxy on another machine: this one's loopback is not its
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, ALL_PROXY=proxy.url,
                            http_proxy=proxy.url, NO_PROXY="", no_proxy="")
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=proxied", timeout=120)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["agentgym: model reference via reference at http://127.0.0.1:*/v1"])
    records = episodes(pytester, "proxied")
    assert len(records) == 3 and all(r["error"] is None and r["success"] for r in records)
    assert proxy.seen == []


def test_the_model_client_calls_an_endpoint_on_another_host_through_the_proxy(monkeypatch):
    from pytest_agentgym.model.client import EndpointClient

    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://example.invalid:{server.server_port}/v1"
    try:
        with RecordingProxy(hosts={"example.invalid": "127.0.0.1"}) as proxy:
            use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url)

            async def two_turns() -> list[str]:
                async with EndpointClient(base, "m") as client:
                    assert client._route is not None  # the hot path, not the SDK
                    return [(await client.chat([{"role": "user", "content": "go"}])).text for _ in range(2)]

            replies = asyncio.run(two_turns())
    finally:
        server.shutdown()
    assert replies == ["Action:\nmove up"] * 2
    assert proxy.targets() == [f"{base}/chat/completions"] * 2
