"""Rollouts as verifiers (and prime-rl) read them: the trajectory form as its
``ProcessedOutputs``, the per-turn form as its ``TrajectoryStep`` list.

Read from PrimeIntellect-ai/verifiers ``verifiers/types.py`` at v0.1.9 (b81cfd33). (Not to
be confused with :mod:`pytest_agentgym.integrations.verifiers`, which serves AgentGym
environments to verifiers.)
"""

from __future__ import annotations

from typing import Any, Iterable

from pytest_agentgym.integrations.trainers.selection import (Rollout, all_or_none_logprobs, label,
                                                             logprobs_or_zero, take)
from pytest_agentgym.integrations.trainers.turns import per_turn


def for_verifiers(rollouts: Iterable[Rollout], *, skip: bool = False) -> dict[str, list[Any]]:
    """verifiers' ``ProcessedOutputs`` (PrimeIntellect-ai/verifiers ``verifiers/types.py`` at
    v0.1.9, b81cfd33; built the same way by ``Environment.process_env_results_vllm`` in
    ``verifiers/envs/environment.py`` at v0.1.3 with ``mask_env_responses=True``): one entry
    per rollout of ``prompt_ids``, ``prompt_mask`` (all 0: the prompt is not trained on),
    ``completion_ids``, ``completion_mask`` (1 on sampled tokens, 0 on the environment's),
    ``completion_logprobs`` (0.0 on the environment's tokens; ``ValueError`` when the batch
    did not ask for logprobs), ``rewards`` and ``is_truncated`` (the conversation outgrew
    the model's context: stop reason ``context_length``)."""
    taken = take(rollouts, whole=True, skip=skip)
    if taken and not all_or_none_logprobs(taken):
        raise ValueError(f"{label(taken[0][0])} has no logprobs and verifiers needs them: "
                         "post the batch with \"logprobs\": true")
    out: dict[str, list[Any]] = {"prompt_ids": [], "prompt_mask": [], "completion_ids": [], "completion_mask": [],
                                 "completion_logprobs": [], "rewards": [], "is_truncated": []}
    for rollout, episode in taken:
        view = episode.view
        out["prompt_ids"].append(list(view.prompt_ids))
        out["prompt_mask"].append([0] * len(view.prompt_ids))
        out["completion_ids"].append(list(view.completion_ids))
        out["completion_mask"].append(list(view.completion_mask))
        out["completion_logprobs"].append(logprobs_or_zero(view.completion_logprobs or ()))
        out["rewards"].append(rollout.get("reward"))
        out["is_truncated"].append(rollout.get("stop_reason") == "context_length")
    return out


def verifiers_steps(rollout: Rollout) -> list[dict[str, Any]]:
    """One rollout as verifiers' trajectory: a list of ``TrajectoryStep`` dicts
    (PrimeIntellect-ai/verifiers ``verifiers/types.py`` at v0.1.9), one per policy turn, as
    its trainer reads them (``verifiers/rl/trainer/orchestrator.py`` at v0.1.9 trains each
    step's ``tokens`` as its own sample): ``prompt`` and ``completion`` (messages),
    ``tokens`` (``prompt_ids``, ``prompt_mask`` all 0, ``completion_ids``,
    ``completion_mask`` all 1, ``completion_logprobs``, ``overlong_prompt``,
    ``is_truncated``), ``reward`` (the rollout's, as verifiers' rubric fills a step's reward
    it was not given), ``advantage`` (None: the trainer computes it), ``is_truncated``,
    ``trajectory_id`` (the episode id) and ``extras`` (this turn's own reward, the turn,
    batch, sample and task id). ``response`` is left out: it is the endpoint's response
    object, which the service does not keep. Re-rendered rollouts work (each turn has its
    own prompt)."""
    steps = []
    for sample in per_turn(rollout):
        if sample["logprobs"] is None:
            raise ValueError(f"{label(rollout)} has no logprobs and verifiers needs them: "
                             "post the batch with \"logprobs\": true")
        truncated = rollout.get("stop_reason") == "context_length" and sample["turn"] == rollout.get("rounds", 0) - 1
        steps.append({
            "prompt": sample["prompt_messages"],
            "completion": [sample["completion_message"]],
            "tokens": {"prompt_ids": sample["prompt_ids"], "prompt_mask": [0] * len(sample["prompt_ids"]),
                       "completion_ids": sample["completion_ids"],
                       "completion_mask": [1] * len(sample["completion_ids"]),
                       "completion_logprobs": sample["logprobs"], "overlong_prompt": False,
                       "is_truncated": truncated},
            "reward": sample["reward"],
            "advantage": None,
            "is_truncated": truncated,
            "trajectory_id": sample["episode_id"],
            "extras": {"turn_reward": sample["turn_reward"], "turn": sample["turn"], "batch": sample["batch"],
                       "sample": sample["sample"], "task_id": sample["task_id"]},
        })
    return steps
