"""One rollout as the service answers it: the scored conversation of one episode.

    {"id": 3, "sample": 0, "env": "TextCraft", "episode_id": "...",
     "messages": [{"role": "user", "content": <instructions>}, {"role": "assistant", ...}, ...],
     "actions": ["get 1 oak log", ...], "reward": 1.0, "score": null, "success": true,
     "rounds": 4, "stop_reason": "done", "usage": {"prompt_tokens": 812, "completion_tokens": 96},
     "token_data": [null, ...], "error": null, "retried": [], "duration_s": 0.41}

``messages`` is the conversation exactly as the model saw it, with its replies
and the environment's last answer: the adapter's opening turns (instructions and
acknowledgement), then per round the user turn it answered, its reply and, after
the last round, the environment's feedback. ``token_data`` has one entry per
assistant message: what the endpoint sent of logprobs and token ids, untouched
(None where it sent none). A rollout that could not be played has ``error``
(type, message, where: env, model or harness) and no reward.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_agentgym.envs.base import EnvAdapter
from pytest_agentgym.results.records import EpisodeRecord


def conversation(record: EpisodeRecord, adapter: EnvAdapter) -> list[dict[str, str]]:
    """The chat messages of ``record`` as its model saw them, ending with the last feedback.

    The episode opens with ``adapter.conversation(first observation)``; its last
    message is the user turn of round 0 (kept in the record as that turn's
    observation), the ones before it depend on the adapter alone."""
    if not record.turns:
        return []
    first = record.turns[0].observation
    messages = [dict(m) for m in adapter.conversation(first)[:-1]]
    messages.append({"role": "user", "content": first})
    for turn in record.turns:
        messages.append({"role": "assistant", "content": turn.reply})
        messages.append({"role": "user", "content": turn.feedback})
    return messages


def rollout_answer(record: EpisodeRecord, adapter: EnvAdapter, *, id: int, sample: int) -> dict[str, Any]:
    """The service's answer for one finished rollout (see the module's docstring)."""
    return {
        "id": id,
        "sample": sample,
        "env": record.env,
        "episode_id": record.episode_id,
        "model": record.model,
        "messages": conversation(record, adapter),
        "actions": [turn.action for turn in record.turns],
        "reward": record.reward,
        "score": record.score,
        "success": record.success,
        "rounds": record.rounds,
        "stop_reason": record.stop_reason,
        "usage": {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens},
        "token_data": [turn.token_data for turn in record.turns],
        "error": dataclasses.asdict(record.error) if record.error else None,
        "retried": [dataclasses.asdict(error) for error in record.retried],
        "sampling": record.sampling,
        "duration_s": record.duration_s,
    }


def without_token_data(record: EpisodeRecord) -> EpisodeRecord:
    """``record`` as the run directory keeps it: per-token data is answered, not stored
    (it would make episodes.jsonl and the report many times larger)."""
    if not any(turn.token_data for turn in record.turns):
        return record
    turns = tuple(dataclasses.replace(turn, token_data=None) for turn in record.turns)
    return dataclasses.replace(record, turns=turns)
