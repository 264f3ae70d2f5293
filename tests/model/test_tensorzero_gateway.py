"""The TensorZero gateway that the ``tensorzero`` package runs in-process
(``tensorzero._start_http_gateway``), routing ``tensorzero::model_name::qwen35_9b`` to the
real reference agent: it serves only the ``/openai/v1`` routes, so its health is checked
by the chat route (model/endpoints.py ``_chat_route_health``), and the shipped 4090
profile plays Maze through it with ``--agentgym-endpoint tensorzero=<gateway>``.
Without the package (the ``test`` extra) those tests skip and say so; the other answers
of the fallback check are played by a scripted server (helpers/model_faults.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.model_faults import FakeEndpoint, status
from helpers.run_dirs import read_episodes
from pytest_agentgym.model.endpoint_settings import parse_endpoint
from pytest_agentgym.model.endpoints import probe
from pytest_agentgym.process.health import HEALTH_ENDPOINT, free_port
from pytest_agentgym.process.managed import ManagedServer

MODEL = "tensorzero::model_name::qwen35_9b"  # what the 4090 profile asks for
CONFIG = """\
[models.qwen35_9b]
routing = ["agent"]

[models.qwen35_9b.providers.agent]
type = "openai"
model_name = "reference"
api_base = "{agent}/v1/"
api_key_location = "none"
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """The in-process gateway's root URL (its ``base_url`` without ``/openai/v1``), in front
    of a reference agent process."""
    try:
        import tensorzero
    except ImportError as exc:
        pytest.skip(f"the tensorzero package is not importable ({exc}); pip install -e '.[test]'")
    tmp = tmp_path_factory.mktemp("tensorzero")
    agent = ManagedServer("reference agent", port=free_port(), health=HEALTH_ENDPOINT, startup_timeout=60,
                          command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}"],
                          log_path=tmp / "agent.log", label="reference agent")
    agent.start()
    (tmp / "tensorzero.toml").write_text(CONFIG.format(agent=agent.url))
    try:
        gateway = tensorzero._start_http_gateway(config_file=str(tmp / "tensorzero.toml"), clickhouse_url=None,
                                                 postgres_url=None, valkey_url=None, async_setup=False)
    except BaseException:
        agent.stop()
        raise
    assert gateway.base_url.endswith("/openai/v1"), gateway.base_url
    yield gateway.base_url.removesuffix("/openai/v1")
    gateway.close()
    agent.stop()


def tensorzero_at(url: str):
    return parse_endpoint({"kind": "tensorzero", "url": url, "model_name": "qwen35_9b"})


# --------------------------------------------------------------------- the real gateway


def test_the_embedded_gateway_is_healthy_by_its_chat_route_and_says_so(gateway):
    health = probe(tensorzero_at(gateway))
    assert health.ok, health.reason
    assert health.checked_by == "POST /openai/v1/chat/completions with an empty request"
    assert health.note == (
        f"tensorzero at {gateway}: GET /status and GET /health answered HTTP 404; checked instead that "
        f"POST /openai/v1/chat/completions with an empty request is refused as incomplete (HTTP 400): the "
        f"route is served and no model was asked, so the model name {MODEL} is first tried by the first episode")


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


def test_the_4090_profile_plays_maze_through_the_gateway(gateway, tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "maze.yaml").write_text((REPO / "suites" / "lightweight" / "maze.yaml").read_text())
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=4090",
         f"--agentgym-endpoint=tensorzero={gateway}", "--agentgym-tasks=0-3", "--agentgym-no-nats",
         "--agentgym-run-id=through-tensorzero"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output
    lines = output.splitlines()
    assert f"agentgym: endpoint tensorzero overridden: {gateway} (--agentgym-endpoint)" in lines
    assert (f"agentgym: model {MODEL} via tensorzero at {gateway}/openai/v1 (healthy: POST "
            f"/openai/v1/chat/completions with an empty request)") in lines
    assert any(line.startswith(f"agentgym: endpoint: tensorzero at {gateway}: GET /status and GET /health "
                               f"answered HTTP 404; checked instead") for line in lines), output
    assert "GATE PASSED: Maze success_rate >= 0.04: success_rate = 1.000 (meets >= 0.04)" in lines  # 4090's floor
    run_dir = tmp_path / "reports" / "through-tensorzero"
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["node"], info["model"], info["endpoint"], info["endpoint_kind"]) == (
        "4090", MODEL, f"{gateway}/openai/v1", "tensorzero")
    assert info["settings"]["endpoint_overrides"][0]["url"] == gateway
    assert any("checked instead that POST /openai/v1/chat/completions" in note for note in info["notes"])
    records = read_episodes(run_dir)
    assert sorted(r["task_index"] for r in records) == [0, 1, 2, 3]
    assert all(r["error"] is None and r["success"] for r in records), records


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
