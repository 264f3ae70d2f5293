"""The per-turn form: one sample per policy turn, with the prompt the endpoint rendered for
that turn. It takes re-rendered rollouts too.
"""

from __future__ import annotations

from typing import Any, Iterable

from pytest_agentgym.integrations.trainers.selection import Rollout, label, log, problem, usable
from pytest_agentgym.results.tokens import EpisodeTokens


def per_turn(rollout: Rollout) -> list[dict[str, Any]]:
    """One sample per policy turn of ``rollout`` (the branching form), each a dict of

    * ``prompt_messages``: the conversation the model answered at that turn;
      ``completion_message``: its reply (``{"role": "assistant", "content": ...}``);
    * ``prompt_ids``: the prompt as the endpoint rendered it for that turn (the
      conversation so far, in ids); ``completion_ids``: the ids it sampled; ``logprobs``
      (None without logprobs);
    * ``turn_reward`` (the environment's reward for that step), ``reward`` and ``success``
      (the rollout's);
    * ``episode_id``, ``batch``, ``sample``, ``task_id``, ``env``, ``turn`` (0-based);
    * ``rerendered``: whether this turn's prompt does not extend the previous turn's prompt
      and reply (the endpoint re-rendered history); its ids are still the endpoint's own.

    The messages are the prefixes of the rollout's final conversation, which is what each
    turn was sent, or, where the environment server rewrote earlier turns (AgentBench's
    ALFWorld), the answer's ``turn_prompts``: exact either way, as the ids are.
    ``ValueError`` for a rollout that failed or has no token ids (see the package's docstring)."""
    why = problem(rollout, whole=False)
    if why is not None:
        raise ValueError(why)
    episode = EpisodeTokens.from_dict(rollout["tokens"])
    messages = [dict(m) for m in rollout.get("messages") or ()]
    turns = episode.turn_count
    opening = len(messages) - 2 * turns  # the messages before round 0's reply
    prompts = rollout.get("turn_prompts")
    if prompts is None:
        if opening < 1 or any(messages[opening + 2 * k].get("role") != "assistant" for k in range(turns)):
            raise ValueError(f"{label(rollout)}: its {len(messages)} messages are not an opening followed by "
                             f"{turns} (reply, answer) pairs, so the turns' conversations cannot be told apart")
        prompts = [messages[:opening + 2 * k + 1] for k in range(turns)]
    elif len(prompts) != turns:
        raise ValueError(f"{label(rollout)}: {len(prompts)} turn_prompts for {turns} turns")
    rewards = list(rollout.get("turn_rewards") or ())
    covered = len(episode.view.turns)
    samples = []
    for k in range(turns):
        tokens = episode.turn(k)
        samples.append({
            "prompt_messages": [dict(m) for m in prompts[k][:-1]],
            "completion_message": dict(prompts[k][-1]),
            "prompt_ids": list(tokens.prompt_ids),
            "completion_ids": list(tokens.completion_ids),
            "logprobs": None if tokens.logprobs is None else list(tokens.logprobs),
            "turn_reward": rewards[k] if k < len(rewards) else None,
            "reward": rollout.get("reward"),
            "success": rollout.get("success"),
            "episode_id": rollout.get("episode_id"),
            "batch": rollout.get("batch"),
            "sample": rollout.get("sample"),
            "task_id": rollout.get("id"),
            "env": rollout.get("env"),
            "turn": k,
            "rerendered": k >= covered,
        })
    return samples


def per_turn_samples(rollouts: Iterable[Rollout], *, skip: bool = False) -> list[dict[str, Any]]:
    """:func:`per_turn` of every rollout, in order; with ``skip`` a rollout that cannot be
    had is left out with its group (and logged) instead of a ``ValueError``."""
    rollouts = list(rollouts)
    if skip:
        found = usable(rollouts, whole=False)
        for _, why in found.skipped:
            log.warning("left out: %s", why)
        rollouts = found.kept
    return [sample for rollout in rollouts for sample in per_turn(rollout)]
