"""Preflight and a run prove the model route with one real chat (max_tokens 1) before any
episode: an endpoint that answers its health routes but not chat completions is named with
the request and its HTTP status, preflight exits 3, and a run is NOT PLAYED with exit 3
without playing an episode; a fallback that chats is used and the header says so. The
endpoint is a real HTTP server on loopback (tests/helpers/model_faults.py), the fallback the
real reference agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.model_faults import FakeEndpoint, status
from helpers.projects import episodes, make_project, run, suite
from pytest_agentgym.process.managed import free_port

pytestmark = pytest.mark.heavy


def health_only() -> FakeEndpoint:
    """Answers GET /health and GET /v1/models (listing fake-model), 404 on chat completions."""
    return FakeEndpoint(script=[status(404)])


def node_with(pytester: pytest.Pytester, endpoints: str) -> Path:
    path = pytester.path / "route.yaml"
    path.write_text(f"name: route\nmodel:\n  endpoints:\n{endpoints}"
                    "limits: {max_rounds: 15, episode_timeout: 60, concurrency: 2}\nenvs: {servers: spawn}\n")
    return path


def refused_route(url: str) -> str:
    return (f"POST /v1/chat/completions (a one-token chat with fake-model) answered HTTP 404 (Not Found); "
            f"does {url}/v1 serve the model fake-model (GET .../models lists what it serves), and is it the "
            f"OpenAI base URL?")


def test_preflight_names_a_route_that_answers_health_but_cannot_chat_and_exits_3(pytester):
    make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    with health_only() as fake:
        node = node_with(pytester, f"    - {{kind: openai, url: '{fake.base_url}', model: fake-model}}\n")
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
        seen = [(r.method, r.path) for r in fake.requests]
    assert result.ret == 3, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"  model primary: openai fake-model at {fake.base_url}: unhealthy: {refused_route(fake.url)}",
        "  would use: nothing, no endpoint of the chain is usable: a run would play no episode (NOT PLAYED, exit 3)",
        "preflight: 1 problem(s)",
    ])
    assert seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    proof = fake.chat_requests()[0].body
    assert (proof["model"], proof["max_tokens"]) == ("fake-model", 1)


def test_a_run_whose_only_route_cannot_chat_is_not_played_with_exit_3_and_one_short_message(pytester):
    make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")  # the 25 episodes
    with health_only() as fake:
        node = node_with(pytester, f"    - {{kind: openai, url: '{fake.base_url}', model: fake-model}}\n")
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-no-nats", "--agentgym-run-id=routed")
        chats = len(fake.chat_requests())
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 3, output
    assert chats == 1  # the proof; no episode asked the model
    result.stdout.fnmatch_lines([
        f"agentgym: NOT PLAYED: Maze: no model endpoint: no model endpoint is available: primary openai at "
        f"{fake.base_url} unhealthy ({refused_route(fake.url)}). Start one of them, or change model.endpoints "
        f"in the node profile.",
        "agentgym: their episodes are recorded as errors without contacting anything; the run exits 3*",
    ])
    assert "Traceback" not in output and output.count("404") <= 4, output
    assert len(output.splitlines()) < 40, output  # one message, not a traceback per episode
    records = episodes(pytester, "routed")
    assert len(records) == 25 and all(r["error"]["type"] == "NoEndpointAvailable" for r in records)
    assert all(r["turns"] == [] for r in records)


def test_a_fallback_that_chats_is_used_when_the_first_route_cannot_and_the_run_says_so(pytester):
    make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    with health_only() as fake:
        node = node_with(pytester, f"    - {{kind: openai, url: '{fake.base_url}', model: fake-model}}\n"
                                   "    - {kind: reference}\n")
        preflight = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-no-nats", "--agentgym-run-id=fell")
        chats = len(fake.chat_requests())
    assert preflight.ret == 0, preflight.stdout.str()
    preflight.stdout.fnmatch_lines([f"  model primary: openai fake-model at {fake.base_url}: unhealthy: POST *404*",
                                    "  would use: fallback 1 reference reference", "preflight: ready"])
    output = result.stdout.str()
    assert result.ret == 0, output
    assert chats == 2  # one proof each: preflight's and the run's
    result.stdout.fnmatch_lines([
        f"agentgym: endpoint: primary openai at {fake.base_url} unhealthy ({refused_route(fake.url)})",
        "agentgym: endpoint: using fallback reference reference*",
    ])
    records = episodes(pytester, "fell")
    assert len(records) == 4 and all(r["error"] is None and r["model"] == "reference" for r in records)


def test_a_route_that_refuses_the_connection_is_named_and_preflight_exits_3(pytester):
    make_project(pytester)
    port = free_port()
    node = node_with(pytester, f"    - {{kind: openai, url: 'http://127.0.0.1:{port}/v1', model: m}}\n")
    result = run(pytester, f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 3, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"  model primary: openai m at http://127.0.0.1:{port}/v1: unhealthy: connection refused",
        "  would use: nothing*"])
