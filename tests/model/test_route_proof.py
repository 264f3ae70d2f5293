"""The chat that proves a route (model/endpoints.py ``_prove_chat``, through ``probe`` with
``chat_timeout``): after an attached endpoint's health check, one real chat with its model
and ``max_tokens: 1``; each answer a chat route can give, played by a real HTTP server on
loopback (helpers/model_faults.py)."""

from __future__ import annotations

import pytest

from helpers.model_faults import FakeEndpoint, drop, hang, ok, raw, status
from pytest_agentgym.model.endpoint_settings import parse_endpoint
from pytest_agentgym.model.endpoints import PROOF_MESSAGES, probe

ROUTE = "POST /v1/chat/completions (a one-token chat with fake-model)"


def proven(fake: FakeEndpoint, chat_timeout: float = 10, **keys):
    return probe(parse_endpoint({"kind": "openai", "url": fake.base_url, "model": "fake-model", **keys}),
                 chat_timeout=chat_timeout, **({"api_key": "k-123"} if keys else {}))


def test_a_route_that_chats_is_healthy_after_one_request_of_one_token():
    with FakeEndpoint(script=[ok("Ready")]) as fake:
        health = proven(fake)
        seen = [(r.method, r.path) for r in fake.requests]
        sent = fake.chat_requests()[0].body
    assert health.ok and health.checked_by == "GET /models, then a one-token chat" and health.note is None
    assert seen == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert sent == {"model": "fake-model", "messages": list(PROOF_MESSAGES), "max_tokens": 1, "stream": False}


def test_the_chat_carries_the_endpoints_key():
    with FakeEndpoint() as fake:
        assert proven(fake, api_key_env="UNUSED_HERE").ok
        assert {r.headers.get("authorization") for r in fake.requests} == {"Bearer k-123"}


def test_an_outage_probe_sends_no_chat():
    with FakeEndpoint(script=[status(404)]) as fake:
        health = probe(parse_endpoint({"kind": "openai", "url": fake.base_url, "model": "fake-model"}))
        assert health.ok and not fake.chat_requests()  # the health routes only, as before


@pytest.mark.parametrize("answer,reason", [
    (status(404), f"{ROUTE} answered HTTP 404 (Not Found); does {{url}}/v1 serve the model fake-model (GET "
                  f".../models lists what it serves), and is it the OpenAI base URL?"),
    (status(401), f"{ROUTE} answered HTTP 401 (error); set model.api_key_env to the variable holding the "
                  f"endpoint's key"),
    (status(400, "The model `fake-model` does not exist."),
     f"{ROUTE} answered HTTP 400 (The model `fake-model` does not exist.); does {{url}}/v1 serve the model "
     f"fake-model (GET .../models lists what it serves), and is it the OpenAI base URL?"),
    (status(502, "All model providers failed to infer with errors: qwen: Error sending request"),
     f"{ROUTE} answered HTTP 502 (All model providers failed to infer with errors: qwen: Error sending request); "
     f"the server failed the chat: its log says why (a gateway answers 502 when its upstream fails)"),
    (raw(b'{"choices": []}'), f"{ROUTE} answered HTTP 200 without a chat completion ({{\"choices\": []}}); is "
                              f"{{url}}/v1 an OpenAI-compatible server?"),
    (raw(b"<html>ok</html>", content_type="text/html"),
     f"{ROUTE} answered HTTP 200 without a chat completion (<html>ok</html>); is {{url}}/v1 an "
     f"OpenAI-compatible server?"),
])
def test_a_route_that_cannot_chat_is_unhealthy_naming_the_request_the_status_and_the_fix(answer, reason):
    with FakeEndpoint(script=[answer]) as fake:
        health = proven(fake)
    assert not health.ok
    assert health.reason == reason.replace("{url}", fake.url)


def test_no_answer_within_the_request_timeout_and_a_dropped_connection_are_unhealthy():
    with FakeEndpoint(script=[hang()]) as fake:
        health = proven(fake, chat_timeout=0.5)
    assert not health.ok and health.reason == f"{ROUTE}: no answer within 0.5 s"
    with FakeEndpoint(script=[drop()]) as fake:
        health = proven(fake)
    assert not health.ok and health.reason.startswith(f"{ROUTE}: RemoteProtocolError: "), health.reason


@pytest.mark.parametrize("answer,checked", [
    (status(400, "no reference policy recognises this conversation"),
     "a one-token chat, refused as HTTP 400 for its conversation, not its model"),
    (status(422, "messages: too short"), "a one-token chat, refused as HTTP 422 for its conversation, not its model"),
    (status(502, "All model providers failed to infer with errors: agent: Error 400 Bad Request from openai "
                 "client: no policy"),
     "a one-token chat, refused as HTTP 502 for its conversation, not its model"),
    (status(429, retry_after="1"), "a one-token chat, busy (HTTP 429)"),
])
def test_a_route_that_reached_the_model_is_healthy_and_says_how_it_answered(answer, checked):
    with FakeEndpoint(script=[answer]) as fake:
        health = proven(fake)
    assert health.ok, health.reason
    assert health.checked_by == f"GET /models, then {checked}"


def test_a_gateway_without_health_routes_is_checked_by_the_chat_alone():
    with FakeEndpoint(script=[ok()], health_status=404) as fake:
        health = probe(parse_endpoint({"kind": "tensorzero", "url": fake.url, "model_name": "q"}), chat_timeout=10)
        seen = [(r.method, r.path, r.body and r.body.get("max_tokens")) for r in fake.requests]
    assert health.ok and health.checked_by == "POST /openai/v1/chat/completions, a one-token chat"
    assert health.note is None  # the model was asked: nothing is left to the first episode
    assert seen == [("GET", "/status", None), ("GET", "/health", None), ("POST", "/openai/v1/chat/completions", 1)]
