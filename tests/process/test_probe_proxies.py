"""Health probes and proxies (process/health.py, model/endpoints.py): a probe of this
machine's servers never goes through a proxy, whatever HTTP_PROXY or ALL_PROXY say;
a probe of another host goes through the proxy the variables name, and when it
fails there, the message says so. The proxy is a real one on loopback
(tests/helpers/http_proxy.py); ``example.invalid`` is a name only it can resolve."""

from __future__ import annotations

import sys

import pytest

from helpers.http_proxy import EchoServer, RecordingProxy, use_proxy_variables
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.process.health import ANY_ANSWER, HEALTH_ENDPOINT, probe
from pytest_agentgym.process.managed import ManagedServer


def closed_port() -> int:
    """A loopback port nothing listens on."""
    from pytest_agentgym.process.health import free_port

    return free_port()


def test_a_probe_of_this_machine_never_goes_through_the_proxy(monkeypatch):
    with RecordingProxy() as proxy, EchoServer() as server:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, ALL_PROXY=proxy.url,
                            NO_PROXY="")
        assert probe(f"http://127.0.0.1:{server.port}", 5.0, HEALTH_ENDPOINT) is None
        assert probe(f"http://localhost:{server.port}", 5.0, HEALTH_ENDPOINT) is None
    assert proxy.seen == []


def test_a_probe_of_another_host_goes_through_the_proxy(monkeypatch):
    with RecordingProxy(hosts={"example.invalid": "127.0.0.1"}) as proxy, EchoServer() as server:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url)
        assert probe(f"http://example.invalid:{server.port}", 5.0, HEALTH_ENDPOINT) is None
    assert proxy.targets() == [f"http://example.invalid:{server.port}/health"]


@pytest.mark.faults
def test_a_probe_through_a_proxy_that_refuses_says_so(monkeypatch):
    with RecordingProxy(refuse=True) as proxy:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url)
        reason = probe("http://example.invalid:8000", 5.0, HEALTH_ENDPOINT)
    assert reason == f"through the proxy {proxy.url}: GET /health answered HTTP 403"


@pytest.mark.faults
def test_a_probe_through_a_proxy_that_is_down_or_cannot_reach_the_server_says_so(monkeypatch):
    port = closed_port()
    use_proxy_variables(monkeypatch, HTTP_PROXY=f"http://user:secret@127.0.0.1:{port}")
    reason = probe("http://example.invalid:8000", 5.0)
    assert reason == f"through the proxy http://***@127.0.0.1:{port}: connection refused"

    with RecordingProxy() as proxy:  # it cannot resolve example.invalid: its 502 is no answer of the server
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url)
        reason = probe("http://example.invalid:8000", 5.0, ANY_ANSWER)
    assert reason == (f"through the proxy {proxy.url}: the proxy answered HTTP 502 "
                      "(it could not reach the server)")


@pytest.mark.faults
def test_an_attached_server_behind_a_refusing_proxy_names_the_proxy_when_given_up(monkeypatch):
    with RecordingProxy(refuse=True) as proxy:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url)
        server = ManagedServer("remote", url="http://example.invalid:8000", health=HEALTH_ENDPOINT,
                               startup_timeout=0.3)
        with pytest.raises(ServerStartError) as caught:
            server.start()
    message = str(caught.value)
    assert f"(through the proxy {proxy.url}: GET /health answered HTTP 403)" in message, message


@pytest.mark.faults
def test_a_spawned_server_starts_fine_with_every_proxy_variable_set(monkeypatch, tmp_path):
    """The bug of issue 22: with HTTP_PROXY set and loopback not in NO_PROXY, the probe
    went to the proxy, which cannot reach this machine, and a healthy server was given up."""
    script = tmp_path / "health.py"
    script.write_text("import sys\nsys.path.insert(0, sys.argv[2])\n"
                      "from helpers.http_proxy import EchoHandler\n"
                      "from http.server import HTTPServer\n"
                      "HTTPServer(('127.0.0.1', int(sys.argv[1])), EchoHandler).serve_forever()\n")
    from helpers import REPO

    with RecordingProxy() as proxy:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url, ALL_PROXY=proxy.url, http_proxy=proxy.url,
                            NO_PROXY="", no_proxy="")
        server = ManagedServer("echo", command=[sys.executable, str(script), "{port}", str(REPO / "tests")],
                               health=HEALTH_ENDPOINT, log_path=tmp_path / "echo.log", startup_timeout=30)
        with server:
            assert server.is_alive() and not server.refuses_connections()
    assert proxy.seen == []


def test_the_model_endpoint_probe_follows_the_same_rule(monkeypatch):
    from pytest_agentgym.model.endpoint_settings import EndpointConfig
    from pytest_agentgym.model.endpoints import probe as endpoint_probe

    with RecordingProxy(refuse=True) as proxy, EchoServer() as server:
        use_proxy_variables(monkeypatch, HTTP_PROXY=proxy.url, NO_PROXY="")
        local = EndpointConfig(kind="reference", url=f"http://127.0.0.1:{server.port}", model="reference")
        assert endpoint_probe(local).ok
        assert proxy.seen == []
        remote = EndpointConfig(kind="reference", url="http://example.invalid:8000", model="reference")
        health = endpoint_probe(remote)
    assert not health.ok
    assert health.reason == f"through the proxy {proxy.url}: GET /health answered HTTP 403"
    assert proxy.targets() == ["http://example.invalid:8000/health"]
