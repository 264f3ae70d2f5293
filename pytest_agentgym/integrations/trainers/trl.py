"""The trajectory form as TRL's ``GRPOTrainer`` takes it from a ``rollout_func``.

Read from huggingface/trl ``trl/trainer/grpo_trainer.py`` at f2cd5771 (1.10.0.dev0),
``GRPOTrainer._generate``.
"""

from __future__ import annotations

from typing import Any, Iterable

from pytest_agentgym.integrations.trainers.selection import Rollout, all_or_none_logprobs, logprobs_or_zero, take


def for_trl(rollouts: Iterable[Rollout]) -> dict[str, Any]:
    """What TRL's ``GRPOTrainer`` takes from a ``rollout_func`` (huggingface/trl
    ``trl/trainer/grpo_trainer.py`` at f2cd5771, ``_generate``): one entry per rollout, in
    order, of

    * ``prompt_ids``, ``completion_ids``: lists of token ids (the trajectory form);
    * ``logprobs``: the sampled tokens' logprobs, 0.0 on the environment's tokens (TRL
      makes a float tensor of each list); None when the batch did not ask for logprobs;
    * ``env_mask``: 1 on the tokens the policy sampled, 0 on the environment's (TRL pops it
      as its ``tool_mask`` and multiplies it into the loss mask);
    * extra fields, which TRL hands to the reward functions one value per sample:
      ``env_reward``, ``turn_rewards``, ``success``, ``episode_id``, ``batch``, ``sample``,
      ``task_id``.

    TRL wants exactly ``num_generations`` completions per prompt, in the order of its
    prompts: post one rollout batch with the prompts' task ids and ``n = num_generations``
    (the service answers each id's samples together). So there is no ``skip`` here: a
    rollout that cannot be had is a ``ValueError``; post its id again."""
    taken = take(rollouts, whole=True, skip=False)
    with_logprobs = all_or_none_logprobs(taken)
    out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [] if with_logprobs else None,
                           "env_mask": [], "env_reward": [], "turn_rewards": [], "success": [],
                           "episode_id": [], "batch": [], "sample": [], "task_id": []}
    for rollout, episode in taken:
        view = episode.view
        out["prompt_ids"].append(list(view.prompt_ids))
        out["completion_ids"].append(list(view.completion_ids))
        if with_logprobs:
            out["logprobs"].append(logprobs_or_zero(view.completion_logprobs or ()))
        out["env_mask"].append(list(view.completion_mask))
        out["env_reward"].append(rollout.get("reward"))
        out["turn_rewards"].append(list(rollout.get("turn_rewards") or ()))
        out["success"].append(rollout.get("success"))
        out["episode_id"].append(rollout.get("episode_id"))
        out["batch"].append(rollout.get("batch"))
        out["sample"].append(rollout.get("sample"))
        out["task_id"].append(rollout.get("id"))
    return out
