"""The trajectory form as verl reads it: its agent loop's ``AgentLoopOutput``, and the
padded batch its agent loop worker hands the trainer.

Read from verl 0.9.1 (PyPI), ``verl/experimental/agent_loop/``: ``agent_loop.py``
(``AgentLoopOutput``, ``AgentLoopMetrics``, ``AgentLoopBase._cap_text_prompt_length``,
``AgentLoopWorker._agent_loop_postprocess`` and ``_postprocess``) and
``tool_agent_loop.py`` (``num_turns`` and the response cut). docs/trainer-formats.md has
the details.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pytest_agentgym.integrations.trainers.selection import (Rollout, all_or_none_logprobs, label,
                                                             logprobs_or_zero, take)
from pytest_agentgym.results.tokens import EpisodeTokens


@dataclass(frozen=True)
class _Row:
    """One rollout as verl's agent loop would have ended it: cut to the lengths."""

    prompt: list[int]
    response: list[int]
    mask: list[int]
    logprobs: list[float] | None
    num_turns: int
    turns: tuple[tuple[int, int], ...]


def _row(rollout: Rollout, episode: EpisodeTokens, *, with_logprobs: bool, prompt_length: int | None,
         response_length: int | None, strict: bool) -> _Row:
    """verl's cuts: a text prompt over ``prompt_length`` keeps its last ``prompt_length``
    ids (``_cap_text_prompt_length``, left-truncating with a warning); the response, mask
    and logprobs keep their first ``response_length`` (``response_ids[:response_length]``
    in tool_agent_loop.py and single_turn_agent_loop.py). ``strict`` raises instead."""
    view = episode.view
    prompt, response, mask = list(view.prompt_ids), list(view.completion_ids), list(view.completion_mask)
    logprobs = logprobs_or_zero(view.completion_logprobs or ()) if with_logprobs else None
    if prompt_length is not None and len(prompt) > prompt_length:
        if strict:
            raise ValueError(f"{label(rollout)} has a prompt of {len(prompt)} tokens, over prompt_length "
                             f"{prompt_length}: raise prompt_length (verl's data.max_prompt_length), or "
                             "leave strict off to keep its last prompt_length ids as verl does")
        prompt = prompt[-prompt_length:]
    num_turns = 2 * len(view.turns) + 1
    if response_length is not None and len(response) > response_length:
        if strict:
            raise ValueError(f"{label(rollout)} has {len(response)} response tokens, over response_length "
                             f"{response_length}: raise response_length or lower max_round, or leave strict "
                             "off to cut it as verl does")
        response, mask = response[:response_length], mask[:response_length]
        logprobs = None if logprobs is None else logprobs[:response_length]
        num_turns = 2 * sum(1 for start, _ in view.turns if start < response_length)
    return _Row(prompt, response, mask, logprobs, num_turns, view.turns)


def _rows(rollouts: Iterable[Rollout], *, skip: bool, prompt_length: int | None, response_length: int | None,
          strict: bool, rerendered: str) -> tuple[list[tuple[Rollout, _Row]], bool]:
    for name, value in (("prompt_length", prompt_length), ("response_length", response_length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a whole number of tokens, 1 or more (got {value!r})")
    taken = take(rollouts, whole=True, skip=skip, rerendered=rerendered)
    with_logprobs = all_or_none_logprobs(taken)
    return [(rollout, _row(rollout, episode, with_logprobs=with_logprobs, prompt_length=prompt_length,
                           response_length=response_length, strict=strict))
            for rollout, episode in taken], with_logprobs


def _metrics(rollout: Rollout) -> dict[str, Any]:
    """``AgentLoopMetrics``: the service answers one duration for the whole rollout (model
    and environment together), so it all goes to ``generate_sequences``; ``tool_calls`` and
    ``compute_score`` are 0.0 and ``num_preempted`` -1 (verl's "not available")."""
    duration = rollout.get("duration_s")
    return {"generate_sequences": float(duration) if isinstance(duration, (int, float)) else 0.0,
            "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": -1}


def verl_agent_loop_outputs(rollouts: Iterable[Rollout], *, prompt_length: int | None = None,
                            response_length: int | None = None, strict: bool = False,
                            skip: bool = False, rerendered: str = "cut") -> list[dict[str, Any]]:
    """One dict per rollout from which verl 0.9.1's ``AgentLoopOutput(**d)`` constructs as
    is: ``prompt_ids``, ``response_ids`` (the policy's and the environment's tokens),
    ``response_mask`` (1 on the policy's), ``response_logprobs`` (0.0 on the environment's
    tokens; None without logprobs), ``reward_score`` (the rollout's reward), ``num_turns``
    (as ``ToolAgentLoop`` counts: user turns + assistant turns + 1), ``metrics`` (see
    :func:`_metrics`) and ``extra_fields`` (``uid``, the GRPO group; ``turn_scores``, the
    environment's reward of each step; ``tool_rewards`` empty; ids). With
    ``prompt_length``/``response_length`` (verl's ``rollout.prompt_length`` and
    ``rollout.response_length``) the ids are cut as verl's agent loops cut them;
    ``strict=True`` raises instead. A rollout whose history was re-rendered follows
    ``rerendered`` (selection.take: "cut", the default, keeps the turns before the
    re-render; "group" leaves its group out; "raise")."""
    rows, _ = _rows(rollouts, skip=skip, prompt_length=prompt_length, response_length=response_length,
                    strict=strict, rerendered=rerendered)
    return [{
        "prompt_ids": row.prompt,
        "response_ids": row.response,
        "response_mask": row.mask,
        "response_logprobs": row.logprobs,
        "reward_score": rollout.get("reward"),
        "num_turns": row.num_turns,
        "metrics": _metrics(rollout),
        "extra_fields": {"uid": _uid(rollout), "turn_scores": list(rollout.get("turn_rewards") or ()),
                         "tool_rewards": [], "success": rollout.get("success"),
                         "episode_id": rollout.get("episode_id"), "batch": rollout.get("batch"),
                         "sample": rollout.get("sample"), "task_id": rollout.get("id")},
    } for rollout, row in rows]


def _uid(rollout: Rollout) -> str:
    """verl's GRPO group key (``non_tensor_batch["uid"]``): batch, environment and task id."""
    return f"{rollout.get('batch')}:{rollout.get('env')}:{rollout.get('id')}"


def for_verl(rollouts: Iterable[Rollout], *, pad_token_id: int, prompt_length: int | None = None,
             response_length: int | None = None, strict: bool = False, turn_scores: bool = False,
             skip: bool = False, rerendered: str = "cut") -> dict[str, list[Any]]:
    """The batch verl 0.9.1's agent loop worker hands its trainer (``_agent_loop_postprocess``
    then ``_postprocess`` in verl/experimental/agent_loop/agent_loop.py), as plain lists, one
    row per rollout (``torch.tensor`` each key that holds numbers to get verl's tensors):

    * ``prompts``: the prompt ids, left-padded with ``pad_token_id`` to ``prompt_length``;
    * ``responses``: the policy's and the environment's ids, right-padded to
      ``response_length``; ``response_mask``: 1 on the policy's tokens, 0 on the
      environment's and on padding;
    * ``input_ids`` (prompts then responses), ``attention_mask`` (0 on padding),
      ``position_ids`` (verl's ``compute_position_id_with_mask``: 0 on the left padding,
      the last position on the right padding);
    * ``rollout_log_probs``: the sampled logprobs, 0.0 elsewhere (only when every rollout
      has logprobs);
    * ``rm_scores``: the rollout's reward on its last response token, 0.0 elsewhere (only
      when every rollout has a reward, as verl); with ``turn_scores`` each step's own reward
      on that turn's last token instead (AgentGym's per-step rewards);
    * ``uid``: the GRPO group of each row (verl's ``non_tensor_batch["uid"]``);
      ``num_turns`` (its ``__num_turns__``).

    Lengths default to the longest in the batch. Longer prompts and responses are cut as
    verl's agent loops cut them (:func:`verl_agent_loop_outputs`); ``strict=True`` raises
    instead. A turn score that falls after the cut moves to the last kept token. A re-rendered
    rollout follows ``rerendered``, as in :func:`verl_agent_loop_outputs`."""
    rows, with_logprobs = _rows(rollouts, skip=skip, prompt_length=prompt_length,
                                response_length=response_length, strict=strict, rerendered=rerendered)
    p_len = max((len(r.prompt) for _, r in rows), default=0) if prompt_length is None else prompt_length
    r_len = max((len(r.response) for _, r in rows), default=0) if response_length is None else response_length
    rewards = [rollout.get("reward") for rollout, _ in rows]
    scored = turn_scores or all(reward is not None for reward in rewards)
    out: dict[str, list[Any]] = {key: [] for key in (
        "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
        *(("rm_scores",) if scored else ()), "uid", "num_turns")}
    if with_logprobs:
        out["rollout_log_probs"] = []
    for (rollout, row), reward in zip(rows, rewards):
        left, right = p_len - len(row.prompt), r_len - len(row.response)
        out["prompts"].append([pad_token_id] * left + row.prompt)
        out["responses"].append(row.response + [pad_token_id] * right)
        out["response_mask"].append(row.mask + [0] * right)
        out["input_ids"].append(out["prompts"][-1] + out["responses"][-1])
        attention = [0] * left + [1] * (len(row.prompt) + len(row.response)) + [0] * right
        out["attention_mask"].append(attention)
        out["position_ids"].append(_positions(attention))
        if scored:
            out["rm_scores"].append(_scores(rollout, row, reward, r_len, turn_scores))
        if with_logprobs:
            out["rollout_log_probs"].append((row.logprobs or []) + [0.0] * right)
        out["uid"].append(_uid(rollout))
        out["num_turns"].append(row.num_turns)
    return out


def _scores(rollout: Rollout, row: _Row, reward: Any, width: int, turn_scores: bool) -> list[float]:
    """One row of ``rm_scores``. verl writes the reward at index (real response tokens - 1),
    which for an empty response is -1: the row's last column."""
    scores = [0.0] * width
    if not width:
        return scores
    if turn_scores:
        kept = len(row.response)
        for (_, end), step in zip(row.turns, rollout.get("turn_rewards") or ()):
            scores[min(end, kept) - 1] += float(step or 0.0)
    else:
        scores[len(row.response) - 1] = float(reward)
    return scores


def _positions(attention: Sequence[int]) -> list[int]:
    """verl's ``compute_position_id_with_mask``: the running count of real tokens minus one,
    never below 0."""
    positions, seen = [], 0
    for bit in attention:
        seen += bit
        positions.append(max(seen - 1, 0))
    return positions
