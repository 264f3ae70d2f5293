"""Rollout answers built by hand, their token data rendered by the reference tokenizer
(pytest_agentgym/model/reference/tokens.py), for the trainer adapters' tests."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_agentgym.model.reference import tokens as ref
from pytest_agentgym.results.tokens import episode_tokens


def hand_rollout(opening: Sequence[Mapping[str, str]], replies: Sequence[str], *, task: int, sample: int,
                 batch: str = "hand:b1", drop: bool = False, reward: float = 1.0) -> dict[str, Any]:
    """One rollout that answers ``replies`` after ``opening``, each reply followed by a user
    turn; ``drop``: the endpoint renders earlier replies without their reasoning (as Qwen3's
    template does), so the token view stops before turn 1."""
    messages, data = list(opening), []
    for k, reply in enumerate(replies):
        ids = ref.completion(reply)
        data.append({"prompt_token_ids": ref.render(messages, drop_reasoning=drop), "token_ids": ids,
                     "logprobs": {"content": [{"token": ref.decode([t]), "logprob": ref.logprob(t, i)}
                                              for i, t in enumerate(ids)]}})
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"Step {k} done."}]
    rounds = len(replies)
    return {"id": task, "sample": sample, "batch": batch, "env": "Maze", "episode_id": f"hand:{task}:{sample}",
            "messages": messages, "reward": reward, "turn_rewards": [0.0] * (rounds - 1) + [reward],
            "success": True, "rounds": rounds, "stop_reason": "done", "tokens": episode_tokens(data).to_dict(),
            "token_data": data, "error": None}
