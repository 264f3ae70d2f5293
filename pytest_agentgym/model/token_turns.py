"""Token-in, token-out turns: every turn after the first sent as the exact ids of the
conversation so far, where the endpoint can take ids (vLLM's ``/tokenize`` and
``/v1/completions``), so that the trajectory a trainer gets is what was sampled.

Through the chat route the endpoint renders and tokenises the whole conversation again
on every turn, and an earlier reply may come out as other ids than were sampled (a reply
cut by ``max_tokens``, a template that drops reasoning): the token view then stops at a
"re-rendered" turn (results/tokens.py). Here turn k+1's prompt is built from ids only:

    turn k's prompt ids + the ids sampled for turn k's reply, as sampled
    + the rest of the assistant message's close (``<|im_end|>\\n`` for ChatML) that was not sampled
    + the environment's message(s) as the chat template renders them, and the generation prompt

and sent to ``/v1/completions`` as a token-id prompt. The two template parts come from the
endpoint's ``/tokenize`` (never from re-tokenising a reply): the close once per client, from a
placeholder reply (:func:`assistant_close`); the environment's part each turn, as the ids the
conversation with the new messages adds to it without them (:func:`environment_part`).

:class:`TokenTurns` decides once per client whether the endpoint takes ids (it answers
``/tokenize`` at its root; 404 or 405 there means no: TensorZero, Ollama) and plays a turn
either way; a turn that cannot go as ids (the first, an endpoint that cannot, a server that
rewrote the history) goes through the chat route. Each turn's token data says which way it
went (``token_in``: model/token_data.py). Every call goes through the client's one loop of
retries, budget and errors (:meth:`~pytest_agentgym.model.client.EndpointClient.post_json`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence

from pytest_agentgym.model.errors import EndpointBadResponse, RequestRejected
from pytest_agentgym.model.records import CallRecord, ModelReply
from pytest_agentgym.model.token_data import TOKEN_IN, completion_token_data

__all__ = ["NoBridge", "TokenTurns", "assistant_close", "environment_part", "next_prompt", "unsampled_close"]

log = logging.getLogger("pytest_agentgym.model.token_turns")

#: ``tokenize(messages=..., add_generation_prompt=...)`` or ``tokenize(prompt=...)``: ids.
Tokenize = Callable[..., Awaitable[list[int]]]

#: The reply whose rendering shows an assistant message's close.
PLACEHOLDER = "PLACEHOLDER"
#: The conversation the environment's part is rendered after when the real one's
#: rendering changes once more messages follow (a template that rewrites history).
STAND_IN = ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})


class NoBridge(ValueError):
    """The endpoint's template gives no ids to build a turn from; the turn goes through chat."""


def _last_index(ids: Sequence[int], part: Sequence[int]) -> int | None:
    """Where ``part`` last starts in ``ids``; None when it is not there."""
    n = len(part)
    for start in range(len(ids) - n, -1, -1):
        if list(ids[start:start + n]) == list(part):
            return start
    return None


async def assistant_close(tokenize: Tokenize) -> tuple[int, ...]:
    """The ids the chat template puts after an assistant message's content: what follows the
    last occurrence of a placeholder reply's ids in a conversation ending with it."""
    rendered = await tokenize(messages=[{"role": "user", "content": "x"},
                                        {"role": "assistant", "content": PLACEHOLDER}],
                              add_generation_prompt=False)
    placeholder = await tokenize(prompt=PLACEHOLDER)
    at = _last_index(rendered, placeholder) if placeholder else None
    if at is None:
        raise NoBridge(f"the placeholder reply's ids {placeholder} are not in the template's rendering "
                       f"of a conversation ending with it ({len(rendered)} ids)")
    return tuple(rendered[at + len(placeholder):])


async def environment_part(tokenize: Tokenize, through_reply: Sequence[Mapping[str, Any]],
                           new: Sequence[Mapping[str, Any]]) -> list[int]:
    """The ids the template adds for ``new`` messages (and the generation prompt) after a
    conversation ending with an assistant reply. Rendered after ``through_reply`` itself
    when that rendering is a prefix of the longer one, else after :data:`STAND_IN` (a
    template that renders earlier replies differently, e.g. Qwen3 dropping reasoning)."""
    for before in (list(through_reply), list(STAND_IN)):
        ended = await tokenize(messages=before, add_generation_prompt=False)
        asked = await tokenize(messages=[*before, *new], add_generation_prompt=True)
        if asked[:len(ended)] == ended:
            return asked[len(ended):]
    raise NoBridge("the template's rendering of the new messages does not extend the conversation "
                   "before them, even after a stand-in conversation")


def unsampled_close(sampled: Sequence[int], close: Sequence[int], finish_reason: str | None) -> list[int]:
    """The part of ``close`` to append to a reply's sampled ids: all of it for a reply cut by
    ``max_tokens`` (``finish_reason`` "length"), else what follows the longest start of
    ``close`` the reply already ends with (it usually ends with the end-of-turn id, close[0])."""
    if finish_reason == "length":
        return list(close)
    for k in range(min(len(close), len(sampled)), 0, -1):
        if list(sampled[-k:]) == list(close[:k]):
            return list(close[k:])
    return list(close)


def next_prompt(prompt: Sequence[int], sampled: Sequence[int], close: Sequence[int],
                environment: Sequence[int], finish_reason: str | None) -> list[int]:
    """Turn k+1's prompt: turn k's prompt, its reply as sampled, the rest of the close, the
    environment's part."""
    return [*prompt, *sampled, *unsampled_close(sampled, close, finish_reason), *environment]


def _ids(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise NoBridge(f"{what} is not a list of token ids: {str(value)[:80]}")
    return value


class TokenTurns:
    """One endpoint client's turns, as token ids where it can take them (see the module's
    docstring). ``client``: an :class:`~pytest_agentgym.model.client.EndpointClient`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        #: the ids after an assistant message's content, once the endpoint was found to take ids
        self.close: tuple[int, ...] | None = None
        #: why the endpoint does not take ids, once found (None: it does, or not asked yet)
        self.why_not: str | None = None
        self.max_model_len: int | None = None
        self._lock: asyncio.Lock | None = None

    async def _tokenize(self, deadline: float, **body: Any) -> list[int]:
        answer, _ = await self.client.post_json(
            "/tokenize", {"model": self.client.model, **body, "add_special_tokens": False},
            budget=deadline - time.monotonic(), at_root=True)
        if type(answer.get("max_model_len")) is int:
            self.max_model_len = answer["max_model_len"]
        return _ids(answer.get("tokens"), "/tokenize's 'tokens'")

    def _tokenizer(self, deadline: float) -> Tokenize:
        return lambda **body: self._tokenize(deadline, **body)

    async def takes_ids(self, deadline: float) -> bool:
        """Whether the endpoint takes token-id prompts: asked once (the close of an assistant
        message, from ``/tokenize``). A 4xx answer there (404, 405: no such route), an answer
        that is not vLLM's, or a template that shows no close means no, for good; a failure
        that may pass (5xx, timeout) is raised, as a chat call's would be."""
        if self.close is not None or self.why_not is not None:
            return self.close is not None
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self.close is None and self.why_not is None:
                try:
                    self.close = await assistant_close(self._tokenizer(deadline))
                except (RequestRejected, EndpointBadResponse, NoBridge) as exc:
                    self.why_not = f"{type(exc).__name__}: {exc}"
                    log.info("%r takes no token-id prompts; its turns go through the chat route (%s)",
                             self.client, self.why_not)
        return self.close is not None

    async def turn(self, messages: Sequence[Mapping[str, str]], previous: Any, sampling: Any,
                   budget: float) -> ModelReply:
        """One turn of an episode whose batch asked for token ids. ``previous``: the episode's
        previous Completion (engine/episode.py) when ``messages`` are its conversation, its
        reply and the new message(s) after it; None for the first turn, or when the server
        rewrote the history (the turn then goes through chat)."""
        started = time.monotonic()
        deadline = started + budget
        data = getattr(previous, "token_data", None) or {}
        prompt, sampled = data.get("prompt_token_ids"), data.get("token_ids")
        if isinstance(prompt, list) and isinstance(sampled, list) and await self.takes_ids(deadline):
            try:
                return await self._as_ids(messages, prompt, sampled, previous.finish_reason, sampling,
                                          started, deadline)
            except NoBridge as exc:
                log.warning("%r: a turn went through the chat route: %s", self.client, exc)
        reply = await self.client.chat(messages, sampling=sampling, budget=deadline - time.monotonic())
        if reply.token_data is None:
            return reply
        return dataclasses.replace(reply, token_data={**reply.token_data, TOKEN_IN: False})

    async def _as_ids(self, messages: Sequence[Mapping[str, str]], prompt: list[int], sampled: list[int],
                      finish_reason: str | None, sampling: Any, started: float, deadline: float) -> ModelReply:
        through_reply, new = messages[:-1], messages[-1:]  # the episode adds one message per step
        environment = await environment_part(self._tokenizer(deadline), through_reply, new)
        ids = next_prompt(prompt, sampled, self.close or (), environment, finish_reason)
        body = {"model": self.client.model, "prompt": ids, **self._params(sampling, len(ids))}
        answer, record = await self.client.post_json("/completions", body, budget=deadline - time.monotonic())
        choices = answer.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None or not isinstance(choice.get("text"), str):
            raise EndpointBadResponse(f"the /completions answer has no choices[0].text: {str(answer)[:200]!r}",
                                      url=self.client.base_url, model=self.client.model, record=record)
        finish, model = choice.get("finish_reason"), answer.get("model")
        return ModelReply(
            text=choice["text"],
            record=CallRecord(time.monotonic() - started, record.attempts, record.retry_reasons,
                              record.prompt_tokens, record.completion_tokens),
            finish_reason=finish if isinstance(finish, str) else None,
            model=model if isinstance(model, str) else None,
            token_data=completion_token_data(answer, choice, ids))

    def _params(self, sampling: Any, prompt_length: int) -> dict[str, Any]:
        """The sampling as ``/v1/completions`` takes it: ``logprobs`` a number (of top
        alternatives) instead of a flag, and ``max_tokens`` always sent (vLLM's default there
        is 16; the chat route's is the rest of the context, so that is sent when unset)."""
        params = {k: v for k, v in sampling.request_params().items() if k not in ("logprobs", "top_logprobs")}
        if sampling.logprobs:
            params["logprobs"] = sampling.top_logprobs or 1
        if "max_tokens" not in params and self.max_model_len is not None:
            params["max_tokens"] = max(1, self.max_model_len - prompt_length)
        return params
