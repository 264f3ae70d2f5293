"""Token-exact views of an episode, built from what the endpoint sampled.

An endpoint that can (vLLM with ``return_token_ids: true`` and ``logprobs: true``)
sends, per model turn, the ids of the prompt it rendered (``prompt_token_ids``),
the ids it sampled (``choices[0].token_ids``) and their log probabilities
(``choices[0].logprobs.content[i].logprob``). The turn keeps that as it came
(:attr:`~pytest_agentgym.results.records.Turn.token_data`); this module reads it.

Two views, for the two ways trainers take an agent's episode:

* :func:`turn_tokens`: one policy turn as its own sample (the prompt the
  endpoint rendered for that turn, the ids it sampled, their logprobs).
* :func:`trajectory`: the whole episode as one sample, what TRL's
  GRPOTrainer, verifiers/prime-rl and verl take for a multi-turn rollout:
  ``prompt_ids`` (the first turn's prompt), ``completion_ids`` (every token
  after it: the policy's and, between turns, the environment's), a
  ``completion_mask`` that is 1 exactly where the policy sampled the token, and
  ``completion_logprobs`` aligned with it (None where masked).

Nothing is re-tokenized. The environment's tokens between turns are the part of
turn *k*'s prompt that follows turn *k-1*'s prompt and completion, which holds
only when the endpoint's chat template renders the history as it was sampled.
Where it does not (a template that drops earlier reasoning, a reply whose text
tokenizes differently from how it was sampled, a server that rewrites earlier
turns), the view stops before that turn and says so in ``rerendered``: the turn
and where the ids part. docs/training.md says which endpoint settings avoid it.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["EpisodeTokens", "Rerendered", "TokenView", "TurnTokens", "episode_tokens", "trajectory", "turn_tokens"]

#: What a non-finite logprob is kept as (strict JSON has no -Infinity): the value vLLM itself
#: writes for a log probability of minus infinity.
FLOOR_LOGPROB = -9999.0

#: vLLM's ``return_tokens_as_token_ids`` writes a logprob's token as ``token_id:<id>``.
_TOKEN_ID = re.compile(r"token_id:(\d+)\Z")


@dataclass(frozen=True)
class TurnTokens:
    """One model turn in token ids, as the endpoint reported it."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    #: one per completion id; None when the endpoint sent no logprobs
    logprobs: tuple[float, ...] | None


@dataclass(frozen=True)
class Rerendered:
    """Where a turn's prompt stops extending the conversation sampled so far."""

    turn: int
    #: the first position (in that turn's prompt ids) that differs
    position: int
    reason: str


@dataclass(frozen=True)
class TokenView:
    """One episode as a single sample of prompt and completion ids (see the module's docstring).

    ``turns`` holds each policy turn's ``[start, end)`` within ``completion_ids``;
    ``turn_count`` is how many of the episode's turns the view covers (all of them
    unless ``rerendered``)."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    completion_mask: tuple[int, ...]
    completion_logprobs: tuple[float | None, ...] | None
    turns: tuple[tuple[int, int], ...]
    rerendered: Rerendered | None = None

    @property
    def complete(self) -> bool:
        return self.rerendered is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "completion_mask": list(self.completion_mask),
            "completion_logprobs": (None if self.completion_logprobs is None
                                    else list(self.completion_logprobs)),
            "turns": [list(span) for span in self.turns],
            "rerendered": None if self.rerendered is None else {
                "turn": self.rerendered.turn, "position": self.rerendered.position,
                "reason": self.rerendered.reason},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TokenView":
        """The view :meth:`to_dict` wrote; ``ValueError`` when it is not one."""
        try:
            mark = data.get("rerendered")
            logprobs = data.get("completion_logprobs")
            view = cls(
                prompt_ids=_ids(data["prompt_ids"]),
                completion_ids=_ids(data["completion_ids"]),
                completion_mask=_ids(data["completion_mask"]),
                completion_logprobs=None if logprobs is None else tuple(
                    None if v is None else float(v) for v in logprobs),
                turns=tuple((int(a), int(b)) for a, b in data["turns"]),
                rerendered=None if mark is None else Rerendered(
                    int(mark["turn"]), int(mark["position"]), str(mark["reason"])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a token view: {type(exc).__name__}: {exc}") from None
        if len(view.completion_mask) != len(view.completion_ids) or (
                view.completion_logprobs is not None
                and len(view.completion_logprobs) != len(view.completion_ids)):
            raise ValueError("not a token view: completion_ids, completion_mask and "
                             "completion_logprobs differ in length")
        return view


def _ids(values: Any) -> tuple[int, ...]:
    """``values`` as a tuple of token ids; ``ValueError`` unless it is a list of whole numbers.
    (Checked by ``array``, in C: a rollout's prompts hold tens of thousands of ids.)"""
    try:
        if not isinstance(values, (list, tuple)):
            raise TypeError
        array("q", values)
    except (TypeError, OverflowError):
        raise ValueError(f"expected a list of token ids, got {str(values)[:80]}") from None
    return tuple(values)


def _logprob_entries(token_data: Mapping[str, Any]) -> list[Any] | None:
    logprobs = token_data.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    return content if isinstance(content, list) else None


def turn_tokens(token_data: Mapping[str, Any] | None) -> TurnTokens | None:
    """One turn's ids and logprobs from the endpoint's token data; None when it has no
    prompt ids or no completion ids (an endpoint that sends only logprobs, or nothing).

    Completion ids come from ``token_ids``, else from logprob entries written as
    ``token_id:<id>`` (vLLM's ``return_tokens_as_token_ids``). ``ValueError`` when
    the data is there but malformed, or the logprobs do not align with the ids."""
    if not token_data:
        return None
    prompt = token_data.get("prompt_token_ids")
    entries = _logprob_entries(token_data)
    completion = token_data.get("token_ids")
    if completion is None and entries is not None:
        found = [_TOKEN_ID.match(str(e.get("token", ""))) if isinstance(e, Mapping) else None
                 for e in entries]
        if entries and all(found):
            completion = [int(m.group(1)) for m in found]  # type: ignore[union-attr]
    if prompt is None or completion is None:
        return None
    prompt_ids, completion_ids = _ids(prompt), _ids(completion)
    logprobs: tuple[float, ...] | None = None
    if entries is not None:
        values = [e.get("logprob") if type(e) is dict else None for e in entries]
        if not all(type(v) is float or type(v) is int for v in values):
            raise ValueError("a logprobs.content entry has no numeric 'logprob'")
        if len(values) != len(completion_ids):
            raise ValueError(f"{len(values)} logprobs for {len(completion_ids)} sampled tokens: "
                             "they do not align")
        logprobs = tuple(float(v) if math.isfinite(v) else FLOOR_LOGPROB for v in values)
    return TurnTokens(prompt_ids, completion_ids, logprobs)


def _why(turn: int, position: int, spans: Sequence[tuple[int, int, int]], prompt_len: int,
         sampled_len: int, got_len: int) -> str:
    """Say what part of the conversation sampled so far turn ``turn``'s prompt does not repeat."""
    if position == got_len:
        return (f"turn {turn}'s prompt has {got_len} tokens, fewer than the {sampled_len} sampled "
                "so far, and repeats them up to its end: earlier turns were left out")
    if position < prompt_len:
        return (f"turn {turn}'s prompt differs from the first prompt at token {position}: "
                "the opening messages were rendered differently")
    for index, start, end in spans:
        if start <= position < end:
            return (f"turn {turn}'s prompt renders turn {index}'s reply differently from the "
                    f"tokens sampled for it (token {position - start} of {end - start}): the chat "
                    "template re-renders earlier replies (e.g. drops their reasoning) or the "
                    "reply's text tokenizes differently")
    return (f"turn {turn}'s prompt differs at token {position}, in the environment's text "
            "between turns: earlier turns were rewritten (a server that keeps the conversation, "
            "or a template that renders history differently)")


def trajectory(token_data: Iterable[Mapping[str, Any] | None]) -> TokenView | None:
    """The whole-episode view of the turns' token data, in order (see the module's
    docstring); None when a turn has no ids (the endpoint was not asked, or cannot)."""
    turns = [turn_tokens(data) for data in token_data]
    if not turns or any(t is None for t in turns):
        return None
    first = turns[0]
    assert first is not None
    prompt = first.prompt_ids
    sampled: list[int] = list(prompt)  # the conversation so far, in ids
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float | None] | None = [] if all(t.logprobs is not None for t in turns) else None
    spans: list[tuple[int, int]] = []
    where: list[tuple[int, int, int]] = []  # (turn, start, end) in the sampled ids
    rerendered = None
    for index, turn in enumerate(turns):
        assert turn is not None
        if index > 0:
            ids = turn.prompt_ids
            common = _common_prefix(ids, sampled)
            if common < len(sampled):
                reason = _why(index, common, where, len(prompt), len(sampled), len(ids))
                rerendered = Rerendered(index, common, reason)
                break
            between = ids[len(sampled):]
            completion.extend(between)
            mask.extend([0] * len(between))
            if logprobs is not None:
                logprobs.extend([None] * len(between))
            sampled.extend(between)
        start = len(completion)
        completion.extend(turn.completion_ids)
        mask.extend([1] * len(turn.completion_ids))
        if logprobs is not None:
            logprobs.extend(turn.logprobs or ())
        spans.append((start, len(completion)))
        where.append((index, len(sampled), len(sampled) + len(turn.completion_ids)))
        sampled.extend(turn.completion_ids)
    return TokenView(prompt_ids=prompt, completion_ids=tuple(completion), completion_mask=tuple(mask),
                     completion_logprobs=None if logprobs is None else tuple(logprobs),
                     turns=tuple(spans), rerendered=rerendered)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` share."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit] if type(a) is type(b) else list(a[:limit]) == list(b[:limit]):
        return limit
    return next(i for i in range(limit) if a[i] != b[i])


@dataclass(frozen=True)
class EpisodeTokens:
    """Every turn of an episode in token ids: the :class:`TokenView` and, when the view
    stops at a re-rendered turn, each later turn on its own (``rest``), so that every
    turn's own prompt and completion can still be had (:meth:`turn`)."""

    view: TokenView
    rest: tuple[TurnTokens, ...] = ()
    #: per turn, whether its prompt was sent as token ids (model/token_turns.py) rather than
    #: through the chat route; None when the turns' data does not say (``token_in``)
    token_in: tuple[bool, ...] | None = None

    @property
    def turn_count(self) -> int:
        return len(self.view.turns) + len(self.rest)

    def turn(self, index: int) -> TurnTokens:
        """Turn ``index`` as its own sample: the prompt the endpoint rendered for it (the
        conversation so far), the ids it sampled and their logprobs."""
        view = self.view
        if index < len(view.turns):
            start, end = view.turns[index]
            logprobs = view.completion_logprobs
            return TurnTokens(prompt_ids=view.prompt_ids + view.completion_ids[:start],
                              completion_ids=view.completion_ids[start:end],
                              logprobs=None if logprobs is None else tuple(logprobs[start:end]))  # type: ignore[arg-type]
        return self.rest[index - len(view.turns)]

    def to_dict(self) -> dict[str, Any]:
        token_in = None if self.token_in is None else list(self.token_in)
        return {**self.view.to_dict(), "token_in": token_in, "rest": [
            {"prompt_ids": list(t.prompt_ids), "completion_ids": list(t.completion_ids),
             "logprobs": None if t.logprobs is None else list(t.logprobs)} for t in self.rest]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EpisodeTokens":
        """What :meth:`to_dict` wrote; ``ValueError`` when it is not that."""
        view = TokenView.from_dict(data)
        try:
            rest = tuple(TurnTokens(_ids(t["prompt_ids"]), _ids(t["completion_ids"]),
                                    None if t.get("logprobs") is None else tuple(float(v) for v in t["logprobs"]))
                         for t in data.get("rest") or ())
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a token view: its 'rest' is malformed ({exc})") from None
        token_in = data.get("token_in")
        return cls(view, rest, None if token_in is None else tuple(bool(t) for t in token_in))


def episode_tokens(token_data: Sequence[Mapping[str, Any] | None]) -> EpisodeTokens | None:
    """:func:`trajectory` of the turns' token data, with the turns it does not cover kept
    whole; None when a turn has no ids."""
    view = trajectory(token_data)
    if view is None:
        return None
    covered = len(view.turns)
    rest = tuple(turn_tokens(data) for data in token_data[covered:])
    marks = [data.get("token_in") if data else None for data in token_data]
    token_in = tuple(mark is True for mark in marks) if any(m is not None for m in marks) else None
    return EpisodeTokens(view, rest, token_in)  # type: ignore[arg-type]  (every turn has ids: trajectory said so)
