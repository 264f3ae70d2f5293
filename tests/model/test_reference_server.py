"""The reference agent as a real process (``python -m pytest_agentgym
reference-agent``), called through the endpoint client.

A test-only policy, :data:`COUNTDOWN`, is registered in the server process via
``AGENTGYM_REFERENCE_POLICIES=test_reference_server:COUNTDOWN``; it draws a
number from the server's rng into every reply, so determinism is observable.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

import httpx
import pytest

from pytest_agentgym.model.client import EndpointClient, RequestRejected
from pytest_agentgym.model.reference.base import react
from pytest_agentgym.model.reference.server import POLICY_MODULES
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port
from pytest_agentgym.process.managed import ManagedServer

TESTS = Path(__file__).resolve().parent
_COUNTDOWN = re.compile(r"^Countdown from (\d+)$")


class CountdownPolicy:
    """Plays a toy game: the user says "Countdown from N", the agent says N-1."""

    name = "Countdown"

    def _start(self, messages):
        for message in messages:
            found = _COUNTDOWN.match(message.get("content", "")) if message.get("role") == "user" else None
            if found:
                return int(found[1])
        return None

    def recognizes(self, messages):
        return self._start(messages) is not None

    def reply(self, messages, rng):
        if self._start(messages) == 0:
            raise ValueError("nothing below zero")
        return react("One less than what was said.", f"say {self._start(messages) - 1} #{rng.randrange(10**9)}")

    def random_reply(self, messages, rng):
        return react("Any number will do.", f"say {rng.randrange(100)} (random)")


COUNTDOWN = CountdownPolicy()


def conversation(start: int = 5, system: str = "You count down.") -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Countdown from {start}"}]


class Agent:
    """One reference agent process on a free port."""

    def __init__(self, tmp: Path, *args: str) -> None:
        env = {"AGENTGYM_REFERENCE_POLICIES": "test_reference_server:COUNTDOWN",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
        port = free_port()
        self.server = ManagedServer(
            "reference agent",
            command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}", *args],
            port=port, health=HEALTH_ENDPOINT, log_path=tmp / f"agent-{port}.log", env=env,
            startup_timeout=60, label="reference agent", advice=Advice())
        self.port, self.url = port, self.server.url
        self.server.start()

    def client(self, model: str = "reference") -> EndpointClient:
        return EndpointClient(self.url + "/v1", model, request_timeout=10)

    def ask(self, messages, model: str = "reference"):
        async def go():
            async with self.client(model) as client:
                return await client.chat(messages)
        return asyncio.run(go())

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    running = Agent(tmp_path_factory.mktemp("reference-agent"), "--seed", "0")
    yield running
    running.stop()


def test_models_and_about_say_it_is_not_an_llm(agent):
    models = httpx.get(agent.url + "/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == ["reference", "random"]
    assert all("scripted reference agent, not an LLM" in m["owned_by"] for m in models["data"])
    about = httpx.get(agent.url + "/", timeout=5).json()
    assert about["what"] == "scripted reference agent, not an LLM"
    assert about["policies"][0] == "Countdown"
    assert httpx.get(agent.url + "/health", timeout=5).json() == {"status": "ok"}


def test_unknown_paths_and_methods_get_openai_style_errors(agent):
    missing = httpx.get(agent.url + "/v1/embeddings", timeout=5)
    assert missing.status_code == 404
    assert "POST /v1/chat/completions" in missing.json()["error"]["message"]
    wrong = httpx.get(agent.url + "/v1/chat/completions", timeout=5)
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "invalid_request_error"
    not_json = httpx.post(agent.url + "/v1/chat/completions", content=b"{", timeout=5)
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
    assert not_json.headers["content-type"] == "application/json"


def test_every_builtin_policy_module_is_loaded_or_reported_missing(agent):
    about = httpx.get(agent.url + "/", timeout=5).json()
    for module in POLICY_MODULES:
        if importlib.util.find_spec(module) is not None:
            name = importlib.import_module(module).POLICY.name
            assert name in about["policies"], f"{module} exists but the server did not load it"
        else:
            assert module in about["missing"]


def test_reply_through_the_endpoint_client_with_word_count_usage(agent):
    reply = agent.ask(conversation(5))
    assert re.fullmatch(r"Thought:\nOne less than what was said\.\n\nAction:\nsay 4 #\d+", reply.text)
    assert reply.prompt_tokens == 6  # "You count down." + "Countdown from 5"
    assert reply.completion_tokens == len(reply.text.split())
    assert reply.finish_reason == "stop" and reply.model == "reference"


def test_response_has_the_openai_shape(agent):
    body = httpx.post(agent.url + "/v1/chat/completions", timeout=5,
                      json={"model": "reference", "messages": conversation(3)}).json()
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert isinstance(body["created"], int) and body["model"] == "reference"
    (choice,) = body["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant" and "say 2" in choice["message"]["content"]
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_same_conversation_same_reply(agent):
    first = agent.ask(conversation(9)).text
    assert all(agent.ask(conversation(9)).text == first for _ in range(3))
    others = {agent.ask(conversation(9, system=f"You count down, variant {i}.")).text for i in range(5)}
    assert len(others) > 1  # the conversation text feeds the rng


def test_random_model_uses_random_replies(agent):
    reply = agent.ask(conversation(5), model="random")
    assert reply.text.endswith("(random)") and reply.model == "random"


def test_seed_is_stable_across_processes_and_changes_replies(agent, tmp_path):
    expected = agent.ask(conversation(7)).text
    same_seed, other_seed = Agent(tmp_path, "--seed", "0"), Agent(tmp_path, "--seed", "1")
    try:
        assert same_seed.ask(conversation(7)).text == expected  # no salted hash()
        assert other_seed.ask(conversation(7)).text != expected
    finally:
        same_seed.stop()
        other_seed.stop()


def test_random_policy_mode(tmp_path):
    random_agent = Agent(tmp_path, "--policy", "random")
    try:
        assert random_agent.ask(conversation(5)).text.endswith("(random)")
    finally:
        random_agent.stop()


def test_latency_option_delays_each_reply_and_requests_overlap(tmp_path):
    slow = Agent(tmp_path, "--latency-ms", "500")
    try:
        assert slow.ask(conversation(5)).latency_s >= 0.5

        async def eight_at_once():
            async with slow.client() as client:
                return await asyncio.gather(*(client.chat(conversation(n)) for n in range(10, 18)))

        started = time.monotonic()
        replies = asyncio.run(eight_at_once())
        elapsed = time.monotonic() - started
    finally:
        slow.stop()
    assert [r.text.split("\n")[-1].split(" #")[0] for r in replies] == [f"say {n - 1}" for n in range(10, 18)]
    assert elapsed < 2.5  # one after the other would take at least 4 s


def test_unrecognised_conversation_is_a_loud_400(agent):
    with pytest.raises(RequestRejected) as caught:
        agent.ask([{"role": "user", "content": "What is the capital of France?"}])
    assert caught.value.status_code == 400
    assert "no reference policy recognises this conversation" in caught.value.server_message
    raw = httpx.post(agent.url + "/v1/chat/completions", timeout=5,
                     json={"model": "reference", "messages": [{"role": "user", "content": "hello"}]})
    assert raw.status_code == 400
    assert raw.json()["error"]["type"] == "invalid_request_error" and raw.json()["error"]["code"] == "no_policy"


def test_a_failing_policy_is_a_500_that_names_it(agent):
    raw = httpx.post(agent.url + "/v1/chat/completions", timeout=5,
                     json={"model": "reference", "messages": conversation(0)})
    assert raw.status_code == 500
    message = raw.json()["error"]["message"]
    assert "Countdown reference policy failed" in message and "ValueError: nothing below zero" in message
    assert agent.ask(conversation(2)).text.startswith("Thought:")  # still serving


def test_unknown_model_and_streaming_are_refused(agent):
    with pytest.raises(RequestRejected) as caught:
        agent.ask(conversation(5), model="gpt-4o")
    assert caught.value.status_code == 404 and "serves reference, random" in caught.value.server_message
    raw = httpx.post(agent.url + "/v1/chat/completions", timeout=5,
                     json={"model": "reference", "messages": conversation(5), "stream": True})
    assert raw.status_code == 400 and "streaming" in raw.json()["error"]["message"]


def test_maze_policy_answers_through_the_server(agent):
    # Protocol sheet 14.1.3/14.1.4: from (7, 6), with walls left and right, the goal
    # (8, 6) is one step down.
    observation = ("The goal is at position 8, 6. Your current position is at position 7, 6. "
                   "There are walls to your right, to your left.")
    reply = agent.ask([{"role": "user", "content": "Find the goal of the maze."},
                       {"role": "assistant", "content": "OK."},
                       {"role": "user", "content": observation}])
    assert reply.text.rstrip().endswith("move down")
