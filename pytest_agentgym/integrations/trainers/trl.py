"""The trajectory form as TRL's ``GRPOTrainer`` takes it from a ``rollout_func``.

Read from trl 1.16.0 (``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._generate`` and
``_generate_and_score_completions``); docs/trainer-formats.md "TRL" has the facts and the
``rollout_func`` that tests/integrations/test_trl_grpo.py runs.
"""

from __future__ import annotations

from typing import Any, Iterable

from pytest_agentgym.integrations.trainers.selection import (Rollout, all_or_none_logprobs, label, log,
                                                             logprobs_or_zero, take)


def for_trl(rollouts: Iterable[Rollout], *, rerendered: str = "cut") -> dict[str, Any]:
    """What TRL's ``GRPOTrainer`` takes from a ``rollout_func`` (trl 1.16.0,
    ``trl/trainer/grpo_trainer.py`` ``_generate``): one entry per rollout, in order, of

    * ``prompt_ids``, ``completion_ids``: lists of token ids (the trajectory form);
    * ``logprobs``: the sampled tokens' logprobs, 0.0 on the environment's tokens (TRL
      makes a float tensor of each list); None when the batch did not ask for logprobs;
    * ``env_mask``: 1 on the tokens the policy sampled, 0 on the environment's (TRL pops it
      as its ``tool_mask`` and multiplies it into the loss mask);
    * extra fields, which TRL hands to the reward functions one value per entry:
      ``env_reward``, ``turn_rewards``, ``success``, ``episode_id``, ``batch``, ``sample``,
      ``task_id`` and ``rerendered`` (None, or the turn the sample was cut before).

    TRL calls ``rollout_func(prompts, trainer)`` with each prompt already repeated
    ``num_generations`` times, consecutively, and wants one completion per entry, in order:
    post the entries' task ids as ``ids`` with ``n = 1`` (the service answers in the order
    of ``ids``) and hand the answer here. A rollout whose endpoint re-rendered the history
    is cut there by default (``rerendered="cut"``: its sample stops before that turn; its
    reward is still the whole episode's); ``"raise"`` refuses it. ``"group"`` is refused:
    leaving entries out would shift TRL's groups. There is no ``skip`` for the same reason:
    a rollout that failed is a ``ValueError``; post its id again."""
    if rerendered == "group":
        raise ValueError('for_trl cannot leave a group out (rerendered="group"): TRL wants one completion per '
                         'prompt entry, in order, and a missing one shifts its groups; use rerendered="cut" (the '
                         'turns before the re-render) or "raise"')
    taken = take(rollouts, whole=True, skip=False, rerendered=rerendered)
    with_logprobs = all_or_none_logprobs(taken)
    out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [] if with_logprobs else None,
                           "env_mask": [], "env_reward": [], "turn_rewards": [], "success": [],
                           "episode_id": [], "batch": [], "sample": [], "task_id": [], "rerendered": []}
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
        mark = view.rerendered
        out["rerendered"].append(None if mark is None else mark.turn)
        if mark is not None:
            log.info("cut: %s: the sample stops before turn %d, which the endpoint re-rendered (%s)",
                     label(rollout), mark.turn, mark.reason)
    return out
