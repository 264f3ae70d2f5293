"""The rollout service's guards in-process: which base URLs its key may go to, which
hosts bind loopback only, the caller token, and how an error shows what was sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.rollouts.access import KeyAllowList, binds_loopback_only, read_token
from pytest_agentgym.rollouts.node import RolloutNode
from pytest_agentgym.rollouts.request import openai_base, shown, shown_list


@pytest.fixture(scope="module")
def allowed():
    return KeyAllowList.build(allowed=["http://Gpu-Box:8001", "https://gateway.example/openai/v1/"],
                              base_url="http://127.0.0.1:8000/v1", node_urls=[])


@pytest.mark.parametrize(("url", "allows"), [
    ("http://127.0.0.1:8000", True),  # --base-url
    ("http://gpu-box:8001/v1", True),  # host names compare without case
    ("http://gpu-box:8001/v1/", True),
    ("http://gpu-box:8001/v1?api_key=caller", True),  # the caller's own query goes along
    ("https://gateway.example/openai/v1", True),  # 443 is https' port, written or not
    ("https://gateway.example:443/openai/v1", True),
    ("http://gateway.example/openai/v1", False),  # another scheme
    ("https://gateway.example/other/v1", False),  # another path on the same host
    ("https://gateway.example/openai/v1x", False),  # a prefix of a segment is not a path below it
    ("https://gateway.example/openai/v1/../../other/v1", False),  # dot segments climb out
    ("https://gateway.example/openai/v1/%2E%2E/%2e%2e/other/v1", False),
    ("http://gpu-box:8002/v1", False),  # another port
    ("http://gpu-box:8001@evil.example:8001/v1", False),  # a user part that looks like the host
    ("http://evil.example\\@gpu-box:8001/v1", False),  # characters URL parsers read differently
    ("http://gpu-box:8001\\@evil.example/v1", False),
    ("http://evil.example\t@gpu-box:8001/v1", False),
    ("http://evil.example/v1?host=gpu-box:8001", False),
    ("http://gpu-box.evil.example:8001/v1", False),
    ("http://localhost:8000/v1", False),  # hosts as written: no DNS, so no alias
])
def test_the_allow_list_is_a_prefix_on_scheme_host_port_and_path(allowed, url, allows):
    assert allowed.allows(openai_base(url)) is allows


def test_by_default_the_key_goes_to_the_nodes_model_endpoints_only():
    node = RolloutNode.load("4090", Path.cwd())  # TensorZero and Ollama on localhost
    default = KeyAllowList.build(allowed=[], base_url=None, node_urls=node.model_urls)
    assert default.describe() == ["http://localhost:3030/openai/v1", "http://localhost:11434/v1"]
    assert default.allows(openai_base("http://localhost:11434")) and not default.allows(openai_base("http://x:1"))
    local = RolloutNode.load("local", Path.cwd())  # a launched reference agent: no URL to allow
    assert local.model_urls == () and KeyAllowList(local.model_urls).said().startswith("sends it nowhere")


def test_a_bad_allow_base_url_says_what_to_give():
    with pytest.raises(ValueError, match=r"--allow-base-url 'gpu-box:8001' is not a URL a key could go to: "
                                         r"give an http:// or https:// URL with a host"):
        KeyAllowList.build(allowed=["gpu-box:8001"], base_url=None, node_urls=[])


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.5", False), ("gpu-box", False),
])
def test_which_hosts_bind_loopback_only(host, loopback):
    assert binds_loopback_only(host) is loopback


def test_the_caller_token_must_be_set_and_long_enough(monkeypatch):
    monkeypatch.delenv("ROLLOUT_TOKEN_UNSET", raising=False)
    with pytest.raises(ValueError, match="--auth-token-env ROLLOUT_TOKEN_UNSET: the variable is not set or empty; "
                                         "export ROLLOUT_TOKEN_UNSET="):
        read_token("ROLLOUT_TOKEN_UNSET")
    monkeypatch.setenv("ROLLOUT_TOKEN_SHORT", "hunter2")
    with pytest.raises(ValueError, match="the token has 7 characters, fewer than 16") as caught:
        read_token("ROLLOUT_TOKEN_SHORT")
    assert "hunter2" not in str(caught.value)
    monkeypatch.setenv("ROLLOUT_TOKEN_GOOD", "  " + "k" * 20 + "\n")
    assert read_token("ROLLOUT_TOKEN_GOOD") == "k" * 20


def test_what_an_error_shows_of_a_sent_value_is_short():
    assert shown("x" * 10_000) == repr("x" * 80) + "... (10000 characters)"
    assert shown("short") == "'short'" and shown(7) == "7" and shown(None) == "None"
    assert len(shown(list(range(100_000)))) < 100 and len(shown({"k" * 500: ["v" * 500] * 50})) < 100
    assert len(shown(10 ** 4000)) < 100
    assert shown_list(["a", "b", "c", "d", "e", "f", "g"]) == "a, b, c, d, e and 2 more"
    assert shown_list(["z" * 1000]) == repr("z" * 80) + "... (1000 characters)"
