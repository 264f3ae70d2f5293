"""The trajectory form as verl reads it: its agent loop's ``AgentLoopOutput``, and the
padded batch its agent loop hands the trainer.

Read from volcengine/verl ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd
(0.8.0.dev), ``AgentLoopOutput`` and ``AgentLoopWorker._postprocess``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from pytest_agentgym.integrations.trainers.selection import (Rollout, all_or_none_logprobs, label,
                                                             logprobs_or_zero, take)


def verl_agent_loop_outputs(rollouts: Iterable[Rollout], *, skip: bool = False) -> list[dict[str, Any]]:
    """One dict per rollout with the fields of verl's ``AgentLoopOutput`` (volcengine/verl
    ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd): ``prompt_ids``,
    ``response_ids`` (the policy's and the environment's tokens), ``response_mask`` (1 on the
    policy's, 0 on the environment's), ``response_logprobs`` (0.0 on the environment's
    tokens; None without logprobs), ``reward_score`` (the rollout's reward), ``num_turns``
    (the conversation's messages: user and assistant turns, as verl counts them) and
    ``extra_fields`` (``uid``, the GRPO group; turn rewards; ids). A custom ``AgentLoopBase``
    whose ``run`` asks the service returns ``AgentLoopOutput(**d, metrics=...)`` from one."""
    taken = take(rollouts, whole=True, skip=skip)
    with_logprobs = all_or_none_logprobs(taken)
    outputs = []
    for rollout, episode in taken:
        view = episode.view
        outputs.append({
            "prompt_ids": list(view.prompt_ids),
            "response_ids": list(view.completion_ids),
            "response_mask": list(view.completion_mask),
            "response_logprobs": logprobs_or_zero(view.completion_logprobs or ()) if with_logprobs else None,
            "reward_score": rollout.get("reward"),
            "num_turns": len(rollout.get("messages") or ()),
            "extra_fields": {"uid": _uid(rollout), "turn_rewards": list(rollout.get("turn_rewards") or ()),
                             "success": rollout.get("success"), "episode_id": rollout.get("episode_id"),
                             "batch": rollout.get("batch"), "sample": rollout.get("sample"),
                             "task_id": rollout.get("id")},
        })
    return outputs


def _uid(rollout: Rollout) -> str:
    """verl's GRPO group key (``non_tensor_batch["uid"]``): batch, environment and task id."""
    return f"{rollout.get('batch')}:{rollout.get('env')}:{rollout.get('id')}"


def for_verl(rollouts: Iterable[Rollout], *, pad_token_id: int, prompt_length: int | None = None,
             response_length: int | None = None, truncate: bool = False, turn_scores: bool = False,
             skip: bool = False) -> dict[str, list[Any]]:
    """The batch verl's agent loop hands its trainer (volcengine/verl
    ``verl/experimental/agent_loop/agent_loop.py`` at b178a3cd, ``_postprocess`` and
    ``generate_sequences``), as plain lists, one row per rollout (``torch.tensor`` each key
    that holds numbers to get verl's tensors):

    * ``prompts``: the prompt ids, left-padded with ``pad_token_id`` to ``prompt_length``;
    * ``responses``: the policy's and the environment's ids, right-padded to
      ``response_length``; ``response_mask``: 1 on the policy's tokens, 0 on the
      environment's and on padding (what AgentGym-RL's rollout calls ``response_mask`` too);
    * ``input_ids`` (prompts then responses), ``attention_mask`` (0 on padding),
      ``position_ids`` (counting from 0 at the first real token; 0 on the left padding, the
      last position on the right padding, as verl's ``compute_position_id_with_mask``);
    * ``rollout_log_probs``: the sampled logprobs, 0.0 elsewhere (only when every rollout
      has logprobs);
    * ``rm_scores``: token-level scores, the rollout's reward on its last response token (as
      verl does); with ``turn_scores`` each turn's own reward on that turn's last token
      instead (AgentGym's per-step rewards);
    * ``uid``: the GRPO group of each row (verl's ``non_tensor_batch["uid"]``);
      ``num_turns`` (its ``__num_turns__``).

    Lengths default to the longest in the batch. A prompt longer than ``prompt_length`` is a
    ``ValueError``; a response longer than ``response_length`` is one too unless
    ``truncate`` (then it is cut, as verl's agent loops cut theirs, and scores that fall
    after the cut move to its last kept token)."""
    taken = take(rollouts, whole=True, skip=skip)
    with_logprobs = all_or_none_logprobs(taken)
    longest_prompt = max((len(e.view.prompt_ids) for _, e in taken), default=0)
    longest_response = max((len(e.view.completion_ids) for _, e in taken), default=0)
    p_len = longest_prompt if prompt_length is None else prompt_length
    r_len = longest_response if response_length is None else response_length
    out: dict[str, list[Any]] = {key: [] for key in (
        "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
        "rm_scores", "uid", "num_turns")}
    if with_logprobs:
        out["rollout_log_probs"] = []
    for rollout, episode in taken:
        view = episode.view
        prompt = list(view.prompt_ids)
        if len(prompt) > p_len:
            raise ValueError(f"{label(rollout)} has a prompt of {len(prompt)} tokens, over prompt_length "
                             f"{p_len}: raise prompt_length (verl's data.max_prompt_length)")
        response, mask = list(view.completion_ids), list(view.completion_mask)
        logprobs = logprobs_or_zero(view.completion_logprobs or ()) if with_logprobs else []
        if len(response) > r_len:
            if not truncate:
                raise ValueError(f"{label(rollout)} has {len(response)} response tokens, over response_length "
                                 f"{r_len}: raise response_length, lower max_round, or pass truncate=True")
            response, mask, logprobs = response[:r_len], mask[:r_len], logprobs[:r_len]
        scores = [0.0] * len(response)
        if response:
            if turn_scores:
                rewards = list(rollout.get("turn_rewards") or ())
                for (start, end), reward in zip(view.turns, rewards):
                    scores[min(end, len(response)) - 1] += float(reward or 0.0)
            else:
                scores[-1] = float(rollout.get("reward") or 0.0)
        left, right = p_len - len(prompt), r_len - len(response)
        out["prompts"].append([pad_token_id] * left + prompt)
        out["responses"].append(response + [pad_token_id] * right)
        out["response_mask"].append(mask + [0] * right)
        out["input_ids"].append(out["prompts"][-1] + out["responses"][-1])
        attention = [0] * left + [1] * (len(prompt) + len(response)) + [0] * right
        out["attention_mask"].append(attention)
        out["position_ids"].append(_positions(attention))
        out["rm_scores"].append(scores + [0.0] * right)
        if with_logprobs:
            out["rollout_log_probs"].append(logprobs + [0.0] * right)
        out["uid"].append(_uid(rollout))
        out["num_turns"].append(len(rollout.get("messages") or ()))
    return out


def _positions(attention: Sequence[int]) -> list[int]:
    """verl's ``compute_position_id_with_mask``: the running count of real tokens minus one,
    never below 0."""
    positions, seen = [], 0
    for bit in attention:
        seen += bit
        positions.append(max(seen - 1, 0))
    return positions
