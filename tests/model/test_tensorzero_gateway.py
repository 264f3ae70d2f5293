"""The TensorZero gateway that the ``tensorzero`` package runs in-process
(``tensorzero._start_http_gateway``), started from the shipped config
(configs/tensorzero/4090.toml) with its ``reference`` model routed to the real reference
agent and its ``qwen35_9b`` model to a port where nothing listens: it serves only the
``/openai/v1`` routes, so its health is checked by the chat route (model/endpoints.py
``_chat_route_health``), or by a one-token chat when a run or preflight proves the route;
the shipped 4090 profile plays Maze through it with ``--agentgym-endpoint
tensorzero=<gateway> --agentgym-model=reference``, and is NOT PLAYED when the model behind
it does not answer. Without the package (the ``test`` extra) those tests skip and say so;
the other answers of the fallback check are played by a scripted server
(helpers/model_faults.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest
import yaml

from helpers import REPO
from helpers.model_faults import FakeEndpoint, status
from helpers.run_dirs import read_episodes
from pytest_agentgym.model.endpoint_settings import parse_endpoint
from pytest_agentgym.model.endpoints import probe
from pytest_agentgym.process.health import HEALTH_ENDPOINT, free_port
from pytest_agentgym.process.managed import ManagedServer

pytestmark = pytest.mark.heavy  # two whole runs through the gateway

MODEL = "tensorzero::model_name::qwen35_9b"  # what the 4090 profile asks for
SHIPPED = REPO / "pytest_agentgym" / "configs" / "tensorzero" / "4090.toml"
AGENT_BASE = "http://127.0.0.1:8100/v1/"  # where the shipped config expects the reference agent
QWEN_BASE = "http://127.0.0.1:8000/v1/"  # and the Qwen server


def shipped_config(agent: str, qwen: str) -> str:
    """The shipped file with its two upstream addresses pointed at ``agent`` and ``qwen``."""
    text = SHIPPED.read_text()
    assert text.count(AGENT_BASE) == 1 and text.count(QWEN_BASE) == 1, "the documented addresses moved"
    return text.replace(AGENT_BASE, f"{agent}/v1/").replace(QWEN_BASE, f"{qwen}/v1/")


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """A reference agent process; its root URL."""
    server = ManagedServer("reference agent", port=free_port(), health=HEALTH_ENDPOINT, startup_timeout=60,
                           command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}"],
                           log_path=tmp_path_factory.mktemp("agent") / "agent.log", label="reference agent")
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def gateway(agent, tmp_path_factory):
    """The in-process gateway's root URL (its ``base_url`` without ``/openai/v1``), started from
    the shipped config in front of the reference agent (and of no Qwen server)."""
    try:
        import tensorzero
    except ImportError as exc:
        pytest.skip(f"the tensorzero package is not importable ({exc}); pip install -e '.[test]'")
    config = tmp_path_factory.mktemp("tensorzero") / "4090.toml"
    config.write_text(shipped_config(agent, f"http://127.0.0.1:{free_port()}"))
    gateway = tensorzero._start_http_gateway(config_file=str(config), clickhouse_url=None,
                                             postgres_url=None, valkey_url=None, async_setup=False)
    assert gateway.base_url.endswith("/openai/v1"), gateway.base_url
    yield gateway.base_url.removesuffix("/openai/v1")
    gateway.close()


def tensorzero_at(url: str, model_name: str = "qwen35_9b"):
    return parse_endpoint({"kind": "tensorzero", "url": url, "model_name": model_name})


def play_4090(tmp_path, gateway: str, *more: str) -> tuple[subprocess.CompletedProcess, str]:
    """The shipped 4090 profile on the shipped Maze suite (tasks 0-3), its gateway at ``gateway``
    and its Ollama fallback on a port where nothing listens."""
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "maze.yaml").write_text((REPO / "suites" / "lightweight" / "maze.yaml").read_text())
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=4090",
         f"--agentgym-endpoint=tensorzero={gateway},ollama=http://127.0.0.1:{free_port()}", "--agentgym-tasks=0-3",
         "--agentgym-no-nats", *more],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return ran, ran.stdout + ran.stderr


# --------------------------------------------------------------------- the shipped config


def test_the_shipped_config_serves_the_4090_profiles_model_where_the_profile_looks():
    config = tomllib.loads(SHIPPED.read_text())
    profile = yaml.safe_load((REPO / "pytest_agentgym" / "configs" / "nodes" / "4090.yaml").read_text())
    primary = profile["model"]["endpoints"][0]
    assert primary["kind"] == "tensorzero" and primary["model_name"] in config["models"]
    port = primary["url"].rsplit(":", 1)[1]
    assert config["gateway"]["bind_address"] == f"127.0.0.1:{port}"
    for name, upstream in (("qwen35_9b", QWEN_BASE), ("reference", AGENT_BASE)):
        model = config["models"][name]
        assert len(model["routing"]) == 1  # no fallback inside the gateway: one model, or nothing
        provider = model["providers"][model["routing"][0]]
        assert (provider["type"], provider["api_base"]) == ("openai", upstream)
    assert config["models"]["reference"]["providers"]["agent"]["model_name"] == "reference"


# --------------------------------------------------------------------- the real gateway


def test_the_embedded_gateway_is_healthy_by_its_chat_route_and_says_so(gateway):
    health = probe(tensorzero_at(gateway))  # an outage probe: no chat
    assert health.ok, health.reason
    assert health.checked_by == "POST /openai/v1/chat/completions with an empty request"
    assert health.note == (
        f"tensorzero at {gateway}: GET /status and GET /health answered HTTP 404; checked instead that "
        f"POST /openai/v1/chat/completions with an empty request is refused as incomplete (HTTP 400): the "
        f"route is served and no model was asked, so the model name {MODEL} is first tried by the first episode")


def test_a_one_token_chat_through_the_gateway_reaches_the_reference_agent(gateway):
    health = probe(tensorzero_at(gateway, "reference"), chat_timeout=30)
    assert health.ok, health.reason
    assert health.checked_by == "POST /openai/v1/chat/completions, a one-token chat"  # the agent answers it
    assert health.note is None


def test_a_gateway_whose_model_does_not_answer_behind_it_cannot_chat(gateway):
    health = probe(tensorzero_at(gateway), chat_timeout=30)
    assert not health.ok
    assert health.reason.startswith(f"POST /openai/v1/chat/completions (a one-token chat with {MODEL}) answered "
                                    f"HTTP 502 (All variants failed with errors: qwen35_9b:"), health.reason
    assert health.reason.endswith("the server failed the chat: its log says why (a gateway answers 502 when its "
                                  "upstream fails)")
    unknown = probe(tensorzero_at(gateway, "qwen3_8b"), chat_timeout=30)
    assert not unknown.ok and "answered HTTP 400 (Invalid inference target: Invalid model name: Model name " \
        "'qwen3_8b' not found in model table); does " in unknown.reason, unknown.reason


def test_an_openai_server_named_as_the_gateway_cannot_chat_on_the_gateways_route(agent):
    """The issue's case: the tensorzero entry at an OpenAI-compatible server without the gateway.
    Its health route answers, so only the chat shows it."""
    assert probe(tensorzero_at(agent)).ok  # GET /health answers 200
    health = probe(tensorzero_at(agent), chat_timeout=30)
    assert not health.ok
    assert health.reason.startswith(f"POST /openai/v1/chat/completions (a one-token chat with {MODEL}) answered "
                                    f"HTTP 404 (no route /openai/v1/chat/completions here; the reference agent "
                                    f"serves GET /"), health.reason  # the server's own words, cut at 160 characters with ...
    assert health.reason.endswith(
        f"...); is {agent} a TensorZero gateway whose config has the model qwen35_9b (configs/tensorzero/4090.toml "
        f"is one)? An OpenAI-compatible server without the gateway is kind: openai")


def test_the_gateway_as_an_openai_base_url_has_no_model_list_but_its_route_answers(gateway):
    health = probe(parse_endpoint({"kind": "openai", "url": gateway + "/openai/v1", "model": MODEL}))
    assert health.ok and health.checked_by == "POST /openai/v1/chat/completions with an empty request"
    assert health.note.startswith(f"openai at {gateway}/openai/v1: GET /models answered HTTP 404; checked instead")


def test_the_gateway_named_by_its_openai_url_is_unhealthy_with_the_fix(gateway):
    health = probe(tensorzero_at(gateway + "/openai/v1"))
    assert not health.ok
    assert health.reason == (
        "GET /status and GET /health answered HTTP 404, and POST /openai/v1/openai/v1/chat/completions with an "
        f"empty request answered HTTP 404; nothing there serves OpenAI's chat completions: is "
        f"{gateway}/openai/v1 the gateway?")


def test_the_4090_profile_plays_maze_through_the_shipped_gateway_config(gateway, tmp_path):
    ran, output = play_4090(tmp_path, gateway, "--agentgym-model=reference", "--agentgym-run-id=through-tensorzero")
    assert ran.returncode == 0, output
    lines = output.splitlines()
    assert f"agentgym: endpoint tensorzero overridden: {gateway} (--agentgym-endpoint)" in lines
    assert (f"agentgym: model tensorzero::model_name::reference via tensorzero at {gateway}/openai/v1 (healthy: "
            f"POST /openai/v1/chat/completions, a one-token chat)") in lines
    assert "GATE PASSED: Maze success_rate >= 0.04: success_rate = 1.000 (meets >= 0.04)" in lines  # 4090's floor
    run_dir = tmp_path / "reports" / "through-tensorzero"
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["node"], info["model"], info["endpoint"], info["endpoint_kind"]) == (
        "4090", "tensorzero::model_name::reference", f"{gateway}/openai/v1", "tensorzero")
    assert info["settings"]["endpoint_overrides"][0]["url"] == gateway
    records = read_episodes(run_dir)
    assert sorted(r["task_index"] for r in records) == [0, 1, 2, 3]
    assert all(r["error"] is None and r["success"] for r in records), records


def test_the_4090_profile_is_not_played_when_its_model_does_not_answer_behind_the_gateway(gateway, tmp_path):
    ran, output = play_4090(tmp_path, gateway, "--agentgym-run-id=qwen-down")
    assert ran.returncode == 3, output
    lines = output.splitlines()
    played = [line for line in lines if line.startswith("agentgym: NOT PLAYED: Maze: no model endpoint: ")]
    assert len(played) == 1 and (
        f"primary tensorzero at {gateway} unhealthy (POST /openai/v1/chat/completions (a one-token chat with "
        f"{MODEL}) answered HTTP 502 (All variants failed") in played[0], output
    assert "Traceback" not in output and len(lines) < 40, output
    records = read_episodes(tmp_path / "reports" / "qwen-down")
    assert len(records) == 4 and all(r["error"]["type"] == "NoEndpointAvailable" and not r["turns"]
                                     for r in records)


# --------------------------------------------------------------------- the check's other answers


@pytest.mark.parametrize("answer,reason", [
    (status(500), "GET /status and GET /health answered HTTP 404, and POST /openai/v1/chat/completions with an "
                  "empty request answered HTTP 500"),
    (status(401), "GET /status and GET /health answered HTTP 404, and POST /openai/v1/chat/completions answered "
                  "HTTP 401; set model.api_key_env to the variable holding the key"),
])
def test_a_gateway_without_health_routes_whose_chat_route_fails_is_unhealthy(answer, reason):
    with FakeEndpoint(script=[answer], health_status=404) as fake:
        health = probe(tensorzero_at(fake.url))
        seen = [(r.method, r.path, r.body) for r in fake.requests]
    assert not health.ok and health.reason == reason
    assert seen == [("GET", "/status", None), ("GET", "/health", None),
                    ("POST", "/openai/v1/chat/completions", {})]


def test_a_status_route_that_fails_is_not_passed_over_for_health():
    with FakeEndpoint(health_status=503) as fake:
        health = probe(tensorzero_at(fake.url))
        paths = [r.path for r in fake.requests]
    assert not health.ok and health.reason == "GET /status answered HTTP 503" and paths == ["/status"]


def test_an_openai_url_without_a_model_list_is_checked_by_its_chat_route():
    with FakeEndpoint(script=[status(422)]) as fake:
        health = probe(parse_endpoint({"kind": "openai", "url": fake.url + "/serve/v1", "model": "m"}))
        seen = [(r.method, r.path) for r in fake.requests]
    assert health.ok and health.checked_by == "POST /serve/v1/chat/completions with an empty request"
    assert "(HTTP 422)" in health.note and "the model name m is first tried by the first episode" in health.note
    assert seen == [("GET", "/serve/v1/models"), ("POST", "/serve/v1/chat/completions")]
