"""The failure taxonomy: what each fault is recorded as (``ErrorInfo.where`` / ``.type``),
how the episode stops, and whether it is retried.

Every episode here is played by ``episode.run_episode`` (or the ``Engine``)
against real processes on loopback: a misbehaving environment server
(tests/helpers/env_faults.py, its fault set per test over HTTP) and a misbehaving model
endpoint (tests/helpers/model_faults.py).
"""

from __future__ import annotations

import asyncio
import pickle

import httpx
import pytest
from helpers.env_faults import command as faulty_env_command
from helpers.model_faults import Act, FakeEndpoint, context_too_long, hang, ok, raw, status

from pytest_agentgym.engine.runner import Engine
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvBadResponse, EnvClient, EnvTimeout
from pytest_agentgym.envs.spec import EnvSpec, SuccessRule
from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest, run_episode
from pytest_agentgym.model.call_settings import RetryPolicy, Sampling
from pytest_agentgym.model.client import (
    ContextLengthExceeded,
    EndpointBadResponse,
    EndpointClient,
    EndpointTimeout,
    RequestRejected,
)
from pytest_agentgym.model.records import CallRecord
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.engine.model import ModelAdapter
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.process.managed import ManagedServer

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

FAST_RETRY = RetryPolicy(retries=2, backoff_base=0.01, backoff_max=0.05)
MESSAGES = [{"role": "user", "content": "Your goal: reach the end."}]


# -- the servers and one episode ----------------------------------------------------


def faulty_server(tmp_path_factory, dialect: str):
    server = ManagedServer(f"faulty-{dialect}", command=faulty_env_command(dialect),
                           log_path=tmp_path_factory.mktemp("env-faults") / f"{dialect}.log",
                           startup_timeout=60, label=f"faulty {dialect} server")
    server.start()
    return server


@pytest.fixture(scope="module")
def id_server(tmp_path_factory):
    server = faulty_server(tmp_path_factory, "id")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def idx_server(tmp_path_factory):
    server = faulty_server(tmp_path_factory, "env_idx")
    yield server
    server.stop()


def set_fault(server: ManagedServer, **fault) -> None:
    httpx.post(server.url + "/_fault", json=fault, timeout=10).raise_for_status()


def served(server: ManagedServer, request: str) -> int:
    """How many ``request`` (e.g. "POST /step") reached the server since its fault was set."""
    lines = server.log_path.read_text().splitlines()
    since = max(i for i, line in enumerate(lines) if line == "POST /_fault")
    return sum(1 for line in lines[since:] if line == request)


def env_spec(name: str, dialect: str = "id", **changes) -> EnvSpec:
    values = dict(name=name, category="lightweight", port=1, dialect=dialect, max_rounds=3,
                  success=SuccessRule("reward > 0"), request_timeout=30.0)
    values.update(changes)
    return EnvSpec(**values)


def model(fake: FakeEndpoint) -> ModelAdapter:
    client = EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY, request_timeout=60)
    return ModelAdapter(client, Sampling())


def request(spec: EnvSpec, *, timeout_s: float = 60, retries: int = 1) -> EpisodeRequest:
    return EpisodeRequest(run_id="faults", spec=spec, task_index=0, repeat=1,
                          limits=EpisodeLimits(max_rounds=spec.max_rounds, timeout_s=timeout_s,
                                               retries=retries))


def play(server: ManagedServer, fake: FakeEndpoint, spec: EnvSpec, before_retry=None,
         **limits) -> EpisodeRecord:
    """One episode through ``run_episode``, the env client timing out after
    ``spec.request_timeout`` seconds per request."""
    async def go() -> EpisodeRecord:
        chat = model(fake)
        try:
            async with EnvClient(server.url, env=spec.name, dialect=spec.dialect,
                                 timeout=spec.request_timeout) as client:
                return await run_episode(request(spec, **limits), adapter_class(spec.name)(),
                                         client, chat, before_retry)
        finally:
            await chat.aclose()

    return asyncio.run(go())


def one_paragraph(record: EpisodeRecord) -> bool:
    errors = [record.error, *record.retried] if record.error else list(record.retried)
    return all("\n" not in e.message for e in errors)


# -- 1. environment timeouts are the environment's ----------------------------------


def test_a_hung_env_step_is_env_timeout_from_its_own_request_timeout_through_the_engine(id_server):
    set_fault(id_server, on="/step", hang=True)
    spec = env_spec("Maze", request_timeout=1.0)
    with FakeEndpoint(script=[ok("Action: move up")]) as fake:
        engine = Engine(concurrency=1, model_factory=lambda: model(fake),
                        adapters={"Maze": adapter_class("Maze")()}, env_urls={"Maze": id_server.url})
        try:
            record = engine.submit("hung", request(spec, timeout_s=120, retries=1)).result(timeout=120)
        finally:
            engine.close()
    assert (record.error.where, record.error.type) == ("env", "EnvTimeout")
    assert "/step" in record.error.message and "no answer within 1 s" in record.error.message
    assert "per-request timeout" in record.error.message and "episode budget" not in record.error.message
    assert [(e.where, e.type) for e in record.retried] == [("env", "EnvTimeout")]
    assert (record.stop_reason, record.outcome, record.reward) == ("error", "error", None)
    assert served(id_server, "POST /step") == 2  # the first attempt and its retry
    assert one_paragraph(record)


def test_the_episode_budget_running_out_while_the_env_answers_is_env_timeout_not_a_policy_timeout(id_server):
    set_fault(id_server, on="/step", after=1, hang=True, step_reward=0.25)
    with FakeEndpoint(script=[ok("Action: move up")]) as fake:
        record = play(id_server, fake, env_spec("Maze", request_timeout=60.0), timeout_s=5, retries=0)
    assert record.rounds == 1  # a round was played: still not a policy outcome
    assert (record.stop_reason, record.error.where, record.error.type) == ("error", "env", "EnvTimeout")
    message = record.error.message
    assert f"environment server Maze at {id_server.url}: /step" in message
    assert "no answer after" in message and "episode budget of 5 s ran out" in message
    assert record.reward is None and record.outcome == "error"


def test_the_budget_running_out_on_the_first_model_turn_is_a_model_error(id_server):
    set_fault(id_server)
    with FakeEndpoint(script=[hang()]) as fake:
        record = play(id_server, fake, env_spec("Maze"), timeout_s=2, retries=1)
        asked = len(fake.chat_requests())
    assert (record.error.where, record.error.type) == ("model", "EndpointTimeout")
    assert "first round" in record.error.message and "episode budget of 2 s" in record.error.message
    assert [(e.where, e.type) for e in record.retried] == [("model", "EndpointTimeout")]
    assert asked == 2 and record.stop_reason == "error"


def test_the_budget_running_out_on_a_later_model_turn_is_the_policy_outcome_timeout(id_server):
    set_fault(id_server, step_reward=0.25)
    with FakeEndpoint(script=[ok("Action: move up"), hang()]) as fake:
        record = play(id_server, fake, env_spec("Maze"), timeout_s=4, retries=1)
    assert (record.stop_reason, record.error, record.retried) == ("timeout", None, ())
    assert record.rounds == 1 and record.reward == 0.25 and record.success


# -- 2. malformed model answers are the model's --------------------------------------


@pytest.mark.parametrize("body, problem", [
    (b'{"choices": [{"message": ', "body is not JSON"),
    (b"", "body is not JSON"),
    (b"\xff\xfe not utf-8", "body is not JSON"),
    (b'{"id": "chatcmpl-1", "object": "chat.completion"}', "answer has no choices"),
    (b"[1, 2]", "answer has no choices"),
    (b'{"choices": [{"message": null}]}', "no choices[0].message with text"),
    (b'{"choices": [{"message": {"content": 5}}]}', "no choices[0].message with text"),
])
def test_a_2xx_that_is_not_a_chat_completion_is_endpoint_bad_response(body, problem):
    async def ask(fake):
        async with EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY) as client:
            return await client.chat(MESSAGES)

    with FakeEndpoint(script=[raw(body)]) as fake:
        with pytest.raises(EndpointBadResponse) as caught:
            asyncio.run(ask(fake))
    assert problem in str(caught.value) and "(application/json)" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_malformed_model_json_in_an_episode_is_model_endpoint_bad_response(id_server):
    set_fault(id_server)
    with FakeEndpoint(script=[raw(b"{not json")]) as fake:
        record = play(id_server, fake, env_spec("Maze"), retries=1)
        asked = len(fake.chat_requests())
    assert (record.error.where, record.error.type) == ("model", "EndpointBadResponse")
    assert "not JSON" in record.error.message and "{not json" in record.error.message
    assert [(e.where, e.type) for e in record.retried] == [("model", "EndpointBadResponse")]
    assert asked == 2 and record.stop_reason == "error"


# -- 3. a context that is too long ends the episode as a policy outcome ---------------

TENSORZERO_502 = Act("status", status=502, body={"error": {"message": (
    "All variants failed with errors: qwen: All model providers failed to infer with errors: "
    "vllm: Error 400 Bad Request from vllm client: {\"error\":{\"message\":\"This model's "
    "maximum context length is 16384 tokens. However, you requested 17002 tokens (16002 in the "
    "messages, 1000 in the completion).\",\"type\":\"BadRequestError\",\"code\":400}}\n"
    "qwen-fallback: timed out")}})
OPENAI_CODE = Act("status", status=400, body={"error": {
    "message": "Your input is over the limit.", "type": "invalid_request_error",
    "param": "messages", "code": "context_length_exceeded"}})


@pytest.mark.parametrize("act", [
    context_too_long(),  # vLLM
    OPENAI_CODE,
    status(400, "prompt is too long: 210000 tokens > 200000 maximum"),
    status(400, "the input length exceeds the context length"),  # Ollama
    status(400, "request (8889 tokens) exceeds the available context size (4096 tokens), "
                "try increasing it"),  # Ollama with truncate: false (llama.cpp runner)
    status(400, "the prompt is longer than the context length currently available"),  # shift: false
    status(400, "The decoder prompt (length 9000) is longer than the maximum model length of 8192."),
    TENSORZERO_502,
], ids=["vllm", "openai-code", "anthropic", "ollama", "ollama-truncate-false", "ollama-shift-false",
        "vllm-max-model-len", "tensorzero-502"])
def test_every_way_endpoints_say_the_context_is_too_long_is_context_length_exceeded(act):
    async def ask(fake):
        async with EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY) as client:
            return await client.chat(MESSAGES)

    with FakeEndpoint(script=[act, ok()]) as fake:
        with pytest.raises(ContextLengthExceeded) as caught:
            asyncio.run(ask(fake))
        asked = len(fake.chat_requests())
    assert asked == 1  # never retried, not even the 502
    assert isinstance(caught.value, RequestRejected)
    assert caught.value.status_code == act.status and "\n" not in str(caught.value)


def test_other_4xx_are_request_rejected_not_context_length():
    async def ask(fake):
        async with EndpointClient(fake.base_url, "fake-model", retry=FAST_RETRY) as client:
            return await client.chat(MESSAGES)

    with FakeEndpoint(script=[status(400, "The model `qwen` does not exist.")]) as fake:
        with pytest.raises(RequestRejected) as caught:
            asyncio.run(ask(fake))
    assert type(caught.value) is RequestRejected


def test_context_too_long_after_a_round_stops_with_the_last_reward_and_no_retry(id_server):
    set_fault(id_server, step_reward=0.25)
    with FakeEndpoint(script=[ok("Action: move up"), context_too_long()]) as fake:
        record = play(id_server, fake, env_spec("Maze"), retries=1)
        asked = len(fake.chat_requests())
    assert (record.stop_reason, record.error, record.retried) == ("context_length", None, ())
    assert record.rounds == 1 and record.reward == 0.25 and record.success
    assert record.outcome == "passed" and asked == 2


def test_context_too_long_on_the_first_turn_is_reward_zero_not_an_error(id_server):
    set_fault(id_server)
    with FakeEndpoint(script=[context_too_long()]) as fake:
        record = play(id_server, fake, env_spec("Maze"), retries=1)
        asked = len(fake.chat_requests())
    assert (record.stop_reason, record.error, record.retried) == ("context_length", None, ())
    assert (record.rounds, record.reward, record.success, asked) == (0, 0.0, False, 1)


def test_a_rejected_request_is_an_error_that_is_not_retried(id_server):
    set_fault(id_server)
    with FakeEndpoint(script=[status(400, "The model `fake-model` does not exist.")]) as fake:
        record = play(id_server, fake, env_spec("Maze"), retries=2)
        asked = len(fake.chat_requests())
    assert (record.error.where, record.error.type) == ("model", "RequestRejected")
    assert record.retried == () and asked == 1 and record.stop_reason == "error"


# -- 4. environment answers are validated ------------------------------------------


@pytest.mark.parametrize("env, dialect, endpoint, field, value", [
    ("Maze", "id", "/step", "reward", "NaN"),
    ("Maze", "id", "/step", "reward", "Infinity"),
    ("Maze", "id", "/step", "reward", "-Infinity"),
    ("Maze", "id", "/step", "reward", '"1"'),
    ("Maze", "id", "/step", "reward", "true"),
    ("Maze", "id", "/step", "reward", "null"),
    ("Maze", "id", "/step", "done", '"yes"'),
    ("Maze", "id", "/step", "done", "1"),
    ("BabyAI", "id", "/step", "score", "NaN"),
    ("BabyAI", "id", "/reset", "score", "NaN"),
    ("SciWorld", "id", "/reset", "reward", "Infinity"),
    ("SciWorld", "id", "/reset", "done", '"yes"'),
    ("WebShop", "env_idx", "/step", "reward", "NaN"),
    ("WebShop", "env_idx", "/step", "done", '"yes"'),
    ("SQLGym", "env_idx", "/step", "reward", '"1"'),
    ("SQLGym", "env_idx", "/step", "reward", "true"),
])
def test_a_reward_score_or_done_of_the_wrong_kind_is_env_bad_response(
        env, dialect, endpoint, field, value, id_server, idx_server):
    server = id_server if dialect == "id" else idx_server
    set_fault(server, on=endpoint, field=field, raw=value)
    with FakeEndpoint(script=[ok("Action: move up")]) as fake:
        record = play(server, fake, env_spec(env, dialect), retries=1)
    assert (record.error.where, record.error.type) == ("env", "EnvBadResponse")
    message = record.error.message
    assert f"{server.url}: {endpoint}" in message and f"{field!r}: {value}" in message
    assert [(e.where, e.type) for e in record.retried] == [("env", "EnvBadResponse")]
    assert (record.stop_reason, record.reward, record.rounds) == ("error", None, 0)
    assert one_paragraph(record)


def test_valid_answers_of_the_same_servers_play_through(id_server, idx_server):
    for server, env, dialect in ((id_server, "Maze", "id"), (idx_server, "WebShop", "env_idx")):
        set_fault(server, step_reward=1)
        with FakeEndpoint(script=[ok("Action: move up")]) as fake:
            record = play(server, fake, env_spec(env, dialect, max_rounds=2))
        assert (record.error, record.stop_reason, record.reward) == (None, "max_rounds", 1.0)


# -- every new error survives pickling (pytest-xdist sends exceptions between processes)


@pytest.mark.parametrize("error", [
    ContextLengthExceeded("too long", status_code=400, server_message="maximum context length",
                          url="http://127.0.0.1:1/v1", model="m",
                          record=CallRecord(latency_s=0.1, attempts=1)),
    RequestRejected("no", status_code=404, server_message="no such model",
                    url="http://127.0.0.1:1/v1", model="m"),
    EndpointBadResponse("body is not JSON", url="http://127.0.0.1:1/v1", model="m"),
    EndpointTimeout("no answer", url="http://127.0.0.1:1/v1", model="m"),
    EnvTimeout("no answer within 1 s", url="http://127.0.0.1:1", endpoint="/step", env="Maze", env_id=3),
    EnvBadResponse("'reward': NaN", url="http://127.0.0.1:1", endpoint="/step", env="Maze", env_id=3),
    ServerStartError("did not start after 3 attempts", exit_code=3, log_tail="boom", attempts=3),
], ids=lambda e: type(e).__name__)
def test_errors_cross_a_process_boundary_whole(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


# -- half a surrogate pair: a reply cut inside an emoji ------------------------------


def test_a_reply_with_half_a_surrogate_pair_plays_on_and_is_recorded_as_given(id_server, tmp_path):
    """A server that cuts a reply inside an emoji sends ``"\\ud83d"``: a Python string with
    no UTF-8 form. The next request (which carries the reply back) and the record must still
    be written; the reply reads back from episodes.jsonl as the model gave it."""
    from pytest_agentgym.results.store import RunDir

    reply = "Thought: almost 😀 then \ud83d\nAction: move up"
    set_fault(id_server, step_reward=1)
    with FakeEndpoint(script=[ok(reply)]) as fake:
        record = play(id_server, fake, env_spec("Maze", max_rounds=2))
        second = fake.chat_requests()[1].body
    assert (record.error, record.stop_reason, record.rounds) == (None, "max_rounds", 2)
    assert [t.reply for t in record.turns] == [reply, reply]
    assert second["messages"][-2] == {"role": "assistant", "content": reply}  # sent back whole
    run = RunDir.create(tmp_path, "surrogate")
    run.append_episode(record)
    (stored,) = run.read_episodes()
    assert [t.reply for t in stored.turns] == [reply, reply] and not run.skipped


def test_through_the_sdk_half_a_surrogate_pair_is_sent_as_a_replacement_character():
    """An injected HTTP client (as for https:// endpoints) sends through the SDK, which encodes
    bodies as strict UTF-8: the request carries U+FFFD for the half, the call succeeds."""
    reply = "Thought: almost 😀 then \ud83d\nAction: move up"
    conversation = [*MESSAGES, {"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]

    async def ask(url: str):
        client = EndpointClient(url, "fake-model", retry=FAST_RETRY, request_timeout=60,
                                http_client=httpx.AsyncClient())
        try:
            assert client._route is None  # the SDK sends
            return await client.chat(conversation)
        finally:
            await client.aclose()

    with FakeEndpoint(script=[ok(reply)]) as fake:
        answer = asyncio.run(ask(fake.base_url))
        sent = fake.chat_requests()[-1].body["messages"]
    assert answer.text == reply  # the answer as given
    assert sent[1]["content"] == reply.replace("\ud83d", "\ufffd") and len(fake.chat_requests()) == 1
