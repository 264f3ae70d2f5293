"""The endpoint client: parsing and error mapping (injected transport), then
retries, budgets and typed errors against a real misbehaving HTTP server."""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
import time
from http.server import ThreadingHTTPServer

import httpx
import pytest

from pytest_agentgym.process.managed import free_port
from helpers.chat_server import ChatHandler
from helpers.mock_model import MESSAGES, ask, completion, mock_client
from helpers.model_faults import FakeEndpoint, context_too_long, drop, hang, ok, status
from pytest_agentgym.model.client import (
    EndpointBadResponse,
    EndpointClient,
    EndpointDown,
    EndpointTimeout,
    ModelError,
    RequestRejected,
)
from pytest_agentgym.model.call_settings import RetryPolicy, Sampling
from pytest_agentgym.model.errors import retry_after_seconds as _retry_after_seconds

FAST_RETRY = RetryPolicy(retries=3, backoff_base=0.05, backoff_max=0.2)


# --------------------------------------------------------------------- parsing (mock transport)


def test_reply_text_usage_and_request_body():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json=completion())

    sampling = Sampling(temperature=0.7, top_p=0.9, max_tokens=64, seed=5, stop=("Observation:",))
    reply = ask(mock_client(handler, sampling=sampling))
    assert reply.text == "Thought:\nx\n\nAction:\nturn left"
    assert (reply.prompt_tokens, reply.completion_tokens) == (21, 5)
    assert reply.record.attempts == 1 and reply.record.retry_reasons == ()
    assert reply.finish_reason == "stop"
    assert reply.latency_s >= 0
    body = json.loads(seen[0].content)
    assert seen[0].url.path == "/v1/chat/completions"
    assert body["model"] == "m" and body["messages"] == MESSAGES
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.9, 64, 5)
    assert body["stop"] == ["Observation:"]


def test_unset_sampling_fields_are_not_sent():
    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=completion())

    ask(mock_client(handler))
    assert set(seen[0]) == {"model", "messages"}


def test_missing_usage_gives_none_tokens():
    reply = ask(mock_client(lambda r: httpx.Response(200, json=completion(usage=False))))
    assert reply.prompt_tokens is None and reply.completion_tokens is None


def test_api_key_comes_from_the_named_variable_and_stays_hidden(monkeypatch):
    monkeypatch.setenv("AGENTGYM_TEST_KEY", "sk-secret-123")
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=completion())

    client = mock_client(handler, api_key_env="AGENTGYM_TEST_KEY")
    assert "sk-secret-123" not in repr(client) and "sk-secret-123" not in str(vars(client))
    ask(client)
    assert seen == ["Bearer sk-secret-123"]


def test_placeholder_key_when_none_is_named():
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=completion())

    ask(mock_client(handler))
    assert seen == ["Bearer EMPTY"]


def test_named_but_unset_key_variable_is_an_error(monkeypatch):
    monkeypatch.delenv("AGENTGYM_NO_SUCH_KEY", raising=False)
    with pytest.raises(ValueError, match="AGENTGYM_NO_SUCH_KEY"):
        EndpointClient("http://model.test/v1", "m", api_key_env="AGENTGYM_NO_SUCH_KEY")


@pytest.mark.parametrize("code,body,expected", [
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens"}},
     "This model's maximum context length is 8192 tokens"),
    (404, {"error": {"message": "The model `x` does not exist.", "code": 404}}, "The model `x` does not exist."),
    (401, {"detail": "bad key"}, "bad key"),
    (422, {"error": "unprocessable"}, "unprocessable"),
])
def test_4xx_maps_to_request_rejected_without_retry(code, body, expected):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(code, json=body)

    with pytest.raises(RequestRejected) as caught:
        ask(mock_client(handler, retry=FAST_RETRY))
    err = caught.value
    assert len(calls) == 1
    assert err.status_code == code and err.server_message == expected
    assert "http://model.test/v1" in str(err) and "model m" in str(err)
    assert err.record.attempts == 1


def test_no_choices_is_a_bad_response():
    with pytest.raises(EndpointBadResponse, match="no choices"):
        ask(mock_client(lambda r: httpx.Response(200, json=completion(choices=False))))


def test_retry_after_forms():
    assert _retry_after_seconds({"retry-after": "3"}) == 3.0
    assert _retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert _retry_after_seconds({}) is None
    assert _retry_after_seconds({"retry-after": "soon"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= _retry_after_seconds({"retry-after": future}) <= 31


def test_sampling_from_mapping():
    sampling = Sampling.from_mapping({"temperature": 0.7, "max_tokens": "1024", "stop": "END"})
    assert sampling == Sampling(temperature=0.7, max_tokens=1024, stop=("END",))
    with pytest.raises(ValueError, match="model.sampling: unknown key.*temprature"):
        Sampling.from_mapping({"temprature": 0.7})
    with pytest.raises(ValueError, match="max_tokens must be a int"):
        Sampling.from_mapping({"max_tokens": "many"})


# --------------------------------------------------------------------- faults (real server)


def test_5xx_is_retried_then_succeeds_and_usage_is_recorded():
    with FakeEndpoint(script=[status(500), status(503), ok("Action:\ngo")]) as fake:
        reply = ask(EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY))
    assert len(fake.chat_requests()) == 3
    assert reply.text == "Action:\ngo"
    assert reply.record.attempts == 3
    assert reply.record.retry_reasons == ("HTTP 500: Internal Server Error", "HTTP 503: Service Unavailable")
    assert (reply.prompt_tokens, reply.completion_tokens) == (11, 7)


def test_persistent_5xx_gives_endpoint_down_after_the_retries():
    with FakeEndpoint(script=[status(500, "CUDA out of memory")]) as fake:
        client = EndpointClient(fake.base_url, "fake-model", retry=RetryPolicy(2, 0.05, 0.1))
        with pytest.raises(EndpointDown) as caught:
            ask(client)
    assert len(fake.chat_requests()) == 3  # 1 + 2 retries
    err = caught.value
    assert err.record.attempts == 3 and err.record.retry_reasons == ("HTTP 500: CUDA out of memory",) * 3
    assert fake.base_url in str(err) and "fake-model" in str(err) and "CUDA out of memory" in str(err)


def test_429_retry_after_is_honoured():
    with FakeEndpoint(script=[status(429, "rate limited", retry_after="1"), ok()]) as fake:
        started = time.monotonic()
        reply = ask(EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY, request_timeout=10))
        elapsed = time.monotonic() - started
    first, second = fake.chat_requests()
    assert second.at - first.at >= 0.95  # the server saw the retry only after Retry-After
    assert reply.record.retry_reasons == ("HTTP 429 (Retry-After 1.0 s)",)
    assert elapsed < 6


def test_429_retry_after_beyond_the_budget_ends_the_turn_at_once():
    with FakeEndpoint(script=[status(429, retry_after="30")]) as fake:
        started = time.monotonic()
        with pytest.raises(EndpointTimeout, match="Retry-After 30.0 s.*budget of 2.0 s") as caught:
            ask(EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY), budget=2.0)
        elapsed = time.monotonic() - started
    assert len(fake.chat_requests()) == 1
    assert caught.value.record.attempts == 1
    assert elapsed < 2.0


def test_context_too_long_is_rejected_not_retried():
    with FakeEndpoint(script=[context_too_long(), ok()]) as fake:
        with pytest.raises(RequestRejected) as caught:
            ask(EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY))
    assert len(fake.chat_requests()) == 1
    assert caught.value.status_code == 400
    assert "maximum context length is 256 tokens" in caught.value.server_message
    assert isinstance(caught.value, ModelError)


def test_slow_answer_within_the_timeout_is_waited_for():
    with FakeEndpoint(script=[ok("Action:\nslow", delay=1.0)]) as fake:
        reply = ask(EndpointClient(fake.base_url, "fake-model", request_timeout=10))
    assert reply.text == "Action:\nslow"
    assert reply.latency_s >= 1.0
    assert reply.record.attempts == 1


def test_answer_slower_than_the_request_timeout_times_out():
    with FakeEndpoint(script=[ok(delay=30)]) as fake:
        started = time.monotonic()
        with pytest.raises(EndpointTimeout, match="request timeout"):
            ask(EndpointClient(fake.base_url, "fake-model", request_timeout=1.0, retry=FAST_RETRY))
        elapsed = time.monotonic() - started
    assert len(fake.chat_requests()) == 1  # a timed-out call is not repeated
    assert 0.9 <= elapsed < 4


def test_hanging_endpoint_is_bounded_by_the_turn_budget():
    with FakeEndpoint(script=[hang()]) as fake:
        started = time.monotonic()
        with pytest.raises(EndpointTimeout, match="per-turn budget") as caught:
            ask(EndpointClient(fake.base_url, "fake-model", request_timeout=60), budget=2.0)
        elapsed = time.monotonic() - started
    assert 1.9 <= elapsed < 6
    assert caught.value.record.attempts == 1


def test_refused_connection_is_retried_then_endpoint_down():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(EndpointDown, match="connection error") as caught:
        ask(EndpointClient(url, "fake-model", retry=RetryPolicy(2, 0.05, 0.1)))
    assert time.monotonic() - started < 5
    record = caught.value.record
    assert record.attempts == 3
    assert all(r.startswith("connection error: ") for r in record.retry_reasons)
    assert url in str(caught.value)


def test_refused_connection_with_a_small_budget_ends_within_it():
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    with pytest.raises(EndpointTimeout):
        ask(EndpointClient(url, "fake-model", retry=RetryPolicy(10, 0.5, 8.0)), budget=1.5)
    assert time.monotonic() - started < 4


def test_dropped_connection_is_retried():
    with FakeEndpoint(script=[drop(), ok("Action:\nafter drop")]) as fake:
        reply = ask(EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY))
    assert reply.text == "Action:\nafter drop"
    assert len(fake.chat_requests()) == 2
    assert reply.record.retry_reasons[0].startswith("connection error")


# ------------------------------------------------ the direct route and the SDK read answers alike


def _through(kind: str, base_url: str, **kwargs) -> EndpointClient:
    """A client on the direct route (``direct``) or through the SDK's own post() (``sdk``:
    an injected httpx client makes the SDK send)."""
    if kind == "direct":
        return EndpointClient(base_url, "fake-model", **kwargs)
    return EndpointClient(base_url, "fake-model", http_client=httpx.AsyncClient(), **kwargs)


def _outcome(act, **kwargs):
    with FakeEndpoint(script=[act]) as fake:
        seen = []
        for kind in ("direct", "sdk"):
            try:
                reply = ask(_through(kind, fake.base_url, retry=RetryPolicy(1, 0.01, 0.02), **kwargs))
                seen.append(("reply", reply.text, reply.record.attempts))
            except ModelError as err:
                seen.append((type(err).__name__, getattr(err, "status_code", None),
                             getattr(err, "server_message", None), err.record.attempts, err.record.retry_reasons))
        requests = fake.chat_requests()
    return seen, requests


@pytest.mark.parametrize("act", [
    ok("Action:\ngo"), status(400, "bad request"), status(404, "The model `x` does not exist."),
    status(401, "bad key"), status(500, "CUDA out of memory"), status(429, "slow down", retry_after="0"),
    context_too_long(), drop(),
], ids=["ok", "400", "404", "401", "500", "429", "context", "drop"])
def test_the_direct_route_and_the_sdk_classify_every_answer_alike(act):
    (direct, sdk), requests = _outcome(act)
    assert direct == sdk
    retried = act.kind == "drop" or act.status in (429, 500)
    assert len(requests) == 2 * (2 if retried else 1)


def test_the_direct_route_sends_the_sdks_headers_and_key(monkeypatch):
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-direct")
    with FakeEndpoint(script=[ok()]) as fake:
        client = _through("direct", fake.base_url, api_key_env="FAKE_MODEL_KEY")

        async def refuse(*args, **kwargs):  # the SDK's post() must not be what sends
            raise AssertionError("the chat call went through the SDK's post()")

        monkeypatch.setattr(client._sdk, "post", refuse)
        ask(client)
        ask(_through("sdk", fake.base_url, api_key_env="FAKE_MODEL_KEY"))
        direct, sdk = fake.chat_requests()
    assert direct.body == sdk.body
    assert direct.headers["authorization"] == sdk.headers["authorization"] == "Bearer sk-direct"
    for name in ("user-agent", "content-type", "accept"):
        assert direct.headers[name] == sdk.headers[name], name


def test_asking_the_model_skips_the_sdks_per_call_typed_dict_transform(monkeypatch):
    import openai._utils._transform as transform
    from openai.resources.chat.completions import completions

    calls = []
    real = transform.async_maybe_transform

    async def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(transform, "async_maybe_transform", counting)
    monkeypatch.setattr(completions, "async_maybe_transform", counting)
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    messages = [{"role": "user", "content": f"observation {n}"} for n in range(40)]

    async def ask() -> list[str]:
        async with EndpointClient(f"http://127.0.0.1:{server.server_port}/v1", "m") as client:
            return [(await client.chat(messages[: n + 1])).text for n in range(0, 40, 8)]

    try:
        replies = asyncio.run(ask())
    finally:
        server.shutdown()
    assert replies == ["Action:\nmove up"] * 5
    assert calls == []
    assert [len(body["messages"]) for body in ChatHandler.bodies[-5:]] == [1, 9, 17, 25, 33]
    assert ChatHandler.bodies[-1]["messages"][-1] == {"role": "user", "content": "observation 32"}
