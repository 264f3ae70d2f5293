"""Token-in, token-out turns end to end (pytest_agentgym/model/token_turns.py).

Real parts: the rollout service (``pytest-agentgym rollout-server``, node local, its embedded
Maze and TextCraft servers), the reference agent (which answers vLLM's ``/tokenize`` and
``/v1/completions`` over its byte-level ChatML tokenizer, with uvicorn's access log on so that
the routes it was asked on can be counted) and the logprob test endpoint (chat only, no
``/tokenize``), each a process on loopback, batches posted over HTTP asking for token ids.

What the reference's ids let the test check on its own, from the conversation's text: every
turn after the first was sent to ``/v1/completions`` as the previous prompt, the ids sampled
for the previous reply, the part of the template's close (``<|im_end|>\\n``) not sampled, and
the next user message as the template renders it (with the generation prompt); so no rollout
is re-rendered, a reply cut by ``max_tokens`` gets the whole close, and an endpoint that
cannot take ids, or a batch that says ``token_in: false``, keeps every turn on the chat route."""

from __future__ import annotations

import sys

import pytest
from helpers.rollout_services import _server, logprob_model, post, rollout_server

import httpx

from pytest_agentgym.model.reference import tokens as ref

ASK = {"temperature": 1.0, "return_token_ids": True, "logprobs": True}
CLOSE = [ref.IM_END, *ref.encode("\n")]
#: the reference agent with uvicorn's access log, which names each request's route
LOGGED_AGENT = ("import sys; from pytest_agentgym.model.reference.server import run; "
                "run(port=int(sys.argv[1]), log_level='info')")


class Routes:
    """The routes the reference agent was asked on, counted from its access log."""

    def __init__(self, agent) -> None:
        self.log = agent.log_path

    def count(self) -> dict[str, int]:
        text = self.log.read_text(errors="replace")
        return {route: text.count(f'"POST {route} HTTP/1.1" 200') for route in
                ("/v1/chat/completions", "/v1/completions", "/tokenize")}


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """{batch name: (rollouts, the routes the reference agent was asked on for it)}."""
    base = tmp_path_factory.mktemp("token-turns")
    agent = _server("reference-agent", [sys.executable, "-c", LOGGED_AGENT, "{port}"], base)
    plain = logprob_model(base)
    service = rollout_server(base / "service", "--node", "local", "--concurrency", "4", "--allow-base-url",
                             agent.url, "--allow-base-url", plain.url)
    routes = Routes(agent)
    try:
        found = {}
        for name, body in {
            "maze": {"env": "maze", "model": "random", "ids": [0, 3], "n": 2, "seed": 7, "max_round": 5,
                     "sampling": ASK},
            "textcraft": {"env": "textcraft", "model": "reference", "ids": [0, 1], "max_round": 8,
                          "sampling": ASK},
            "cut": {"env": "maze", "model": "random", "ids": [1], "n": 2, "seed": 3, "max_round": 4,
                    "sampling": {**ASK, "max_tokens": 6}},
            "switched_off": {"env": "textcraft", "model": "reference", "ids": [0], "max_round": 8,
                             "sampling": {**ASK, "token_in": False}},
            "no_tokenize": {"env": "textcraft", "model": "logprob-model", "ids": [0], "max_round": 8,
                            "sampling": ASK, "base_url": f"{plain.url}/v1"},
        }.items():
            before = routes.count()
            answer = post(service, {"base_url": f"{agent.url}/v1", **body})
            assert answer.status_code == 200, answer.text
            after = routes.count()
            found[name] = (answer.json()["rollouts"], {k: after[k] - before[k] for k in after})
        found["plain_requests"] = httpx.get(f"{plain.url}/requests", timeout=10).json()
        yield found
    finally:
        service.stop()
        plain.stop()
        agent.stop()


def _start(rollout) -> int:
    """How many messages come before the first sampled reply."""
    return len(rollout["messages"]) - 2 * rollout["rounds"]


def _environment(messages, upto):
    """The ids the template adds for message ``upto`` (the environment's) after the reply
    before it, with the generation prompt: rendered here from the text."""
    before = ref.render(messages[:upto], add_generation_prompt=False)
    after = ref.render(messages[:upto + 1])
    assert after[:len(before)] == before
    return after[len(before):]


def _check_bridged(rollout) -> int:
    """Every turn after the first: its prompt is the previous prompt + the ids sampled +
    the unsampled close + the environment's message. Returns how many were cut replies."""
    data, messages, start = rollout["token_data"], rollout["messages"], _start(rollout)
    assert data[0]["prompt_token_ids"] == ref.render(messages[:start])
    cut = 0
    for k in range(1, rollout["rounds"]):
        sampled = data[k - 1]["token_ids"]
        rest = CLOSE[1:] if sampled[-1:] == [ref.IM_END] else CLOSE
        cut += rest == CLOSE
        expected = data[k - 1]["prompt_token_ids"] + sampled + rest + _environment(messages, start + 2 * k - 1)
        assert data[k]["prompt_token_ids"] == expected, f"turn {k} of {rollout['id']}/{rollout['sample']}"
    return cut


@pytest.mark.parametrize("batch", ["maze", "textcraft"])
def test_turns_after_the_first_go_as_the_exact_ids(played, batch):
    rollouts, routes = played[batch]
    assert rollouts and all(r["error"] is None for r in rollouts)
    for rollout in rollouts:
        tokens = rollout["tokens"]
        assert tokens["rerendered"] is None
        assert tokens["token_in"] == [False] + [True] * (rollout["rounds"] - 1)
        assert [d["token_in"] for d in rollout["token_data"]] == tokens["token_in"]
        assert _check_bridged(rollout) == 0  # every reply stopped on its end-of-turn id
        # the sampled ids are the reply's text and the end-of-turn id, with their logprobs
        start = _start(rollout)
        for k, d in enumerate(rollout["token_data"]):
            assert d["token_ids"] == ref.completion(rollout["messages"][start + 2 * k]["content"])
            assert [e["logprob"] for e in d["logprobs"]["content"]] == [
                ref.logprob(t, i) for i, t in enumerate(d["token_ids"])]
    # the endpoint's side: one chat turn per rollout, the rest on /v1/completions
    assert routes["/v1/chat/completions"] == len(rollouts)
    assert routes["/v1/completions"] == sum(r["rounds"] - 1 for r in rollouts) > 0
    assert routes["/tokenize"] >= 2 * routes["/v1/completions"]
    if batch == "maze":
        assert all(r["rounds"] == 5 for r in rollouts)


def test_a_reply_cut_by_max_tokens_gets_the_whole_close(played):
    rollouts, routes = played["cut"]
    cut = 0
    for rollout in rollouts:
        assert rollout["error"] is None and rollout["tokens"]["rerendered"] is None
        cut += _check_bridged(rollout)
        for d in rollout["token_data"][1:]:  # /v1/completions honours max_tokens
            assert len(d["token_ids"]) <= 6
    assert cut >= 2 and routes["/v1/completions"] == sum(r["rounds"] - 1 for r in rollouts)


def test_token_in_false_keeps_every_turn_on_chat(played):
    rollouts, routes = played["switched_off"]
    assert routes == {"/v1/chat/completions": rollouts[0]["rounds"], "/v1/completions": 0, "/tokenize": 0}
    tokens = rollouts[0]["tokens"]
    assert tokens["token_in"] == [False] * rollouts[0]["rounds"]
    assert tokens["rerendered"] is None  # the reference renders history as sampled
    assert rollouts[0]["sampling"]["token_in"] is False


def test_an_endpoint_without_tokenize_falls_back_to_chat_and_says_so(played):
    rollouts, routes = played["no_tokenize"]
    rollout = rollouts[0]
    assert rollout["error"] is None and rollout["rounds"] >= 2
    assert routes == {"/v1/chat/completions": 0, "/v1/completions": 0, "/tokenize": 0}
    assert len(played["plain_requests"]) == rollout["rounds"]  # every turn asked on its chat route
    assert rollout["tokens"]["token_in"] == [False] * rollout["rounds"]
