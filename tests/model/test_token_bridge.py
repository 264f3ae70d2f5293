"""Token-in turns (pytest_agentgym/model/token_turns.py): the bridge between turns with an
injected tokenize (the reference agent's byte-level ChatML, with and without a template
that rewrites history), then the client's calls to ``/tokenize`` and ``/v1/completions``
over an injected transport (paths, bodies, the shared retry loop, the errors)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from helpers.mock_model import MESSAGES, mock_client
from pytest_agentgym.model.call_settings import RetryPolicy, Sampling
from pytest_agentgym.model.client import ContextLengthExceeded, EndpointDown
from pytest_agentgym.model.reference import tokens as ref
from pytest_agentgym.model.token_turns import (
    STAND_IN,
    NoBridge,
    TokenTurns,
    assistant_close,
    environment_part,
    next_prompt,
    unsampled_close,
)

CLOSE = (ref.IM_END, *ref.encode("\n"))
OPENING = [{"role": "system", "content": "You play."}, {"role": "user", "content": "Go."}]


def tokenizer(*, drop_reasoning=False, calls=None):
    """A tokenize function over the reference's ChatML, as /tokenize answers it."""
    async def tokenize(messages=None, prompt=None, add_generation_prompt=True):
        if calls is not None:
            calls.append(messages if prompt is None else prompt)
        if prompt is not None:
            return ref.encode(prompt)
        return ref.render(messages, drop_reasoning=drop_reasoning, add_generation_prompt=add_generation_prompt)
    return tokenize


# --------------------------------------------------------------------------- the bridge


def test_the_close_is_what_follows_a_placeholder_reply():
    assert asyncio.run(assistant_close(tokenizer())) == CLOSE


def test_no_close_when_the_placeholder_is_not_in_the_rendering():
    async def tokenize(messages=None, prompt=None, add_generation_prompt=True):
        return [1, 2, 3] if prompt is None else [9]

    with pytest.raises(NoBridge, match="placeholder"):
        asyncio.run(assistant_close(tokenize))


def test_the_environment_part_when_the_rendering_extends_the_conversation():
    through = [*OPENING, {"role": "assistant", "content": "Action: up"}]
    new = [{"role": "user", "content": "You moved up."}]
    calls = []
    part = asyncio.run(environment_part(tokenizer(calls=calls), through, new))
    assert part == ref.render([*through, *new])[len(ref.render(through, add_generation_prompt=False)):]
    assert ref.decode(part) == "<|im_start|>user\nYou moved up.<|im_end|>\n<|im_start|>assistant\n"
    assert len(calls) == 2  # no stand-in needed


def test_a_template_that_rewrites_history_gets_the_part_from_a_stand_in():
    through = [*OPENING, {"role": "assistant", "content": "<think>hmm</think>Action: up"}]
    new = [{"role": "user", "content": "You moved up."}]
    calls = []
    part = asyncio.run(environment_part(tokenizer(drop_reasoning=True, calls=calls), through, new))
    assert ref.decode(part) == "<|im_start|>user\nYou moved up.<|im_end|>\n<|im_start|>assistant\n"
    assert calls[2] == list(STAND_IN) and len(calls) == 4
    # the real rendering would have dropped the sampled reasoning: no prefix there
    rendered = ref.render([*through, *new], drop_reasoning=True)
    assert rendered[:len(ref.render(through, add_generation_prompt=False))] != ref.render(
        through, add_generation_prompt=False)


def test_no_environment_part_when_no_rendering_extends_the_one_before():
    async def tokenize(messages=None, prompt=None, add_generation_prompt=True):
        return [len(messages), 7] if add_generation_prompt else [0, len(messages)]

    with pytest.raises(NoBridge, match="does not extend"):
        asyncio.run(environment_part(tokenize, OPENING, [{"role": "user", "content": "x"}]))


@pytest.mark.parametrize("sampled,finish,rest", [
    ([104, 105, ref.IM_END], "stop", [10]),  # stopped on the end-of-turn id: only the newline is added
    ([104, 105], "length", list(CLOSE)),  # cut by max_tokens: the whole close
    ([104, 105], "stop", list(CLOSE)),  # stopped on a stop string: nothing of the close was sampled
    ([104, ref.IM_END, 10], "stop", []),  # the whole close sampled
    ([104, ref.IM_END], "length", list(CLOSE)),  # a cut reply never counts its last id as the close
])
def test_the_part_of_the_close_not_sampled(sampled, finish, rest):
    assert unsampled_close(sampled, CLOSE, finish) == rest


def test_the_next_prompt_is_the_previous_one_the_reply_the_close_and_the_environment():
    assert next_prompt([1, 2], [3, ref.IM_END], CLOSE, [7, 8], "stop") == [1, 2, 3, ref.IM_END, 10, 7, 8]
    assert next_prompt([1, 2], [3, 4], CLOSE, [7, 8], "length") == [1, 2, 3, 4, *CLOSE, 7, 8]


# --------------------------------------------------------------------------- the client's calls


class Endpoint:
    """A vLLM-shaped endpoint over the reference tokenizer, answering from the test."""

    def __init__(self, *, tokenize_status=200, completions=None):
        self.seen: list[tuple[str, dict]] = []
        self.tokenize_status = tokenize_status
        self.completions = list(completions or [])

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.seen.append((request.url.path, body))
        if request.url.path == "/tokenize":
            if self.tokenize_status != 200:
                return httpx.Response(self.tokenize_status, json={"detail": "Not Found"})
            ids = (ref.encode(body["prompt"]) if "prompt" in body else
                   ref.render(body["messages"], add_generation_prompt=body["add_generation_prompt"]))
            return httpx.Response(200, json={"count": len(ids), "max_model_len": 4096, "tokens": ids})
        if request.url.path == "/v1/completions":
            return self.completions.pop(0)
        return httpx.Response(200, json={
            "model": "m", "prompt_token_ids": ref.render(body["messages"]),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Action: up"},
                         "finish_reason": "stop", "token_ids": ref.completion("Action: up")}]})

    def paths(self):
        return [path for path, _ in self.seen]


def answer(text="Action: down", finish="stop", prompt=None):
    ids = ref.completion(text) if finish == "stop" else ref.encode(text)
    return httpx.Response(200, json={
        "model": "m", "usage": {"prompt_tokens": 30, "completion_tokens": 2},
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "token_ids": ids,
                     "prompt_token_ids": prompt,
                     "logprobs": {"tokens": [ref.decode([t]) for t in ids],
                                  "token_logprobs": [-0.5] * len(ids),
                                  "top_logprobs": [{ref.decode([t]): -0.5} for t in ids]}}]})


class Previous:
    """What the episode hands back as the previous turn (engine/episode.py's Completion)."""

    def __init__(self, prompt, sampled, finish="stop"):
        self.token_data = {"prompt_token_ids": prompt, "token_ids": sampled}
        self.finish_reason = finish


def play(endpoint, messages, previous, sampling, **kwargs):
    client = mock_client(endpoint, **kwargs)
    turns = TokenTurns(client)

    async def go():
        try:
            return await turns.turn(messages, previous, sampling, 30.0), turns
        finally:
            await client.aclose()
    return asyncio.run(go())


ASKED = Sampling(temperature=1.0, logprobs=True, return_token_ids=True, seed=3)


def conversation(reply="Action: up"):
    return [*MESSAGES, {"role": "assistant", "content": reply}, {"role": "user", "content": "You moved."}]


def test_a_turn_after_the_first_goes_to_completions_as_the_exact_ids():
    first = ref.render(MESSAGES)
    sampled = ref.completion("Action: up")
    endpoint = Endpoint(completions=[answer()])
    reply, turns = play(endpoint, conversation(), Previous(first, sampled), ASKED)
    assert turns.close == CLOSE
    assert endpoint.paths()[-1] == "/v1/completions" and "/v1/chat/completions" not in endpoint.paths()
    assert set(endpoint.paths()) == {"/tokenize", "/v1/completions"}  # /tokenize at the root, not under /v1
    body = endpoint.seen[-1][1]
    after = len(ref.render(conversation()[:-1], add_generation_prompt=False))
    environment = ref.encode("\n") + ref.render(conversation())[after:]
    assert body["prompt"] == first + sampled + environment
    assert body["prompt"] == ref.render(conversation())  # the reference renders history as sampled
    assert body["logprobs"] == 1 and "top_logprobs" not in body and body["return_token_ids"] is True
    assert body["max_tokens"] == 4096 - len(body["prompt"])  # vLLM's default there would be 16
    assert (body["temperature"], body["seed"], body["model"]) == (1.0, 3, "m") and "token_in" not in body
    # the answer in a chat turn's shape, marked token_in
    assert reply.text == "Action: down" and reply.finish_reason == "stop"
    assert reply.token_data["prompt_token_ids"] == body["prompt"]  # not echoed: the ids sent
    assert reply.token_data["token_ids"] == ref.completion("Action: down")
    assert reply.token_data["token_in"] is True
    content = reply.token_data["logprobs"]["content"]
    assert [e["logprob"] for e in content] == [-0.5] * len(ref.completion("Action: down"))
    assert content[-1]["token"] == "<|im_end|>" and content[-1]["top_logprobs"] == [
        {"token": "<|im_end|>", "logprob": -0.5}]
    assert (reply.prompt_tokens, reply.completion_tokens) == (30, 2)


def test_a_reply_cut_by_max_tokens_gets_the_whole_close():
    first = ref.render(MESSAGES)
    cut = ref.encode("Action: u")
    endpoint = Endpoint(completions=[answer()])
    play(endpoint, conversation("Action: u"), Previous(first, cut, "length"), ASKED)
    prompt = endpoint.seen[-1][1]["prompt"]
    assert prompt[:len(first) + len(cut) + 2] == first + cut + list(CLOSE)


def test_the_first_turn_and_a_turn_without_previous_ids_go_through_chat():
    endpoint = Endpoint()
    reply, turns = play(endpoint, MESSAGES, None, ASKED)
    assert endpoint.paths() == ["/v1/chat/completions"] and turns.close is None and turns.why_not is None
    assert reply.token_data["token_in"] is False and reply.token_data["token_ids"] == ref.completion("Action: up")
    endpoint = Endpoint()
    play(endpoint, conversation(), Previous(None, None), ASKED)
    assert endpoint.paths() == ["/v1/chat/completions"]


def test_an_endpoint_without_tokenize_is_asked_once_and_plays_chat():
    endpoint = Endpoint(tokenize_status=404)
    client = mock_client(endpoint)
    turns = TokenTurns(client)
    previous = Previous(ref.render(MESSAGES), ref.completion("Action: up"))

    async def go():
        try:
            for _ in range(3):
                reply = await turns.turn(conversation(), previous, ASKED, 30.0)
                assert reply.token_data["token_in"] is False
        finally:
            await client.aclose()
    asyncio.run(go())
    assert endpoint.paths() == ["/tokenize"] + ["/v1/chat/completions"] * 3
    assert "HTTP 404" in turns.why_not and turns.close is None


def test_completions_go_through_the_same_retries():
    first, sampled = ref.render(MESSAGES), ref.completion("Action: up")
    busy = httpx.Response(503, json={"error": {"message": "busy"}})
    endpoint = Endpoint(completions=[busy, answer()])
    reply, _ = play(endpoint, conversation(), Previous(first, sampled), ASKED,
                    retry=RetryPolicy(retries=2, backoff_base=0.01, backoff_max=0.01))
    assert reply.record.attempts == 2 and reply.record.retry_reasons == ("HTTP 503: busy",)
    assert endpoint.paths().count("/v1/completions") == 2
    endpoint = Endpoint(completions=[busy, busy])
    with pytest.raises(EndpointDown, match="gave up after 2 attempt"):
        play(endpoint, conversation(), Previous(first, sampled), ASKED,
             retry=RetryPolicy(retries=1, backoff_base=0.01, backoff_max=0.01))


def test_a_prompt_over_the_context_is_context_length_exceeded():
    too_long = httpx.Response(400, json={"error": {"message": "This model's maximum context length is 4096 "
                                                              "tokens. However, you requested 5000 tokens"}})
    endpoint = Endpoint(completions=[too_long])
    with pytest.raises(ContextLengthExceeded, match="maximum context length"):
        play(endpoint, conversation(), Previous(ref.render(MESSAGES), ref.completion("Action: up")), ASKED)


def test_the_switch_keeps_every_turn_on_chat():
    from pytest_agentgym.engine.model import ModelAdapter

    endpoint = Endpoint()
    client = mock_client(endpoint)
    adapter = ModelAdapter(client, Sampling())
    previous = Previous(ref.render(MESSAGES), ref.completion("Action: up"))
    asked = {"return_token_ids": True, "token_in": False}

    async def go():
        try:
            return await adapter.complete(conversation(), budget_s=30.0, sampling=asked, previous=previous)
        finally:
            await client.aclose()
    completion = asyncio.run(go())
    assert endpoint.paths() == ["/v1/chat/completions"] and "token_in" not in endpoint.seen[0][1]
    assert completion.token_data["token_in"] is False
    with pytest.raises(ValueError, match="sampling.token_in must be true or false"):
        Sampling.from_mapping({"token_in": "no"}, where="sampling")
