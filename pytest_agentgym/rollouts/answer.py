"""One rollout as the service answers it: the scored conversation of one episode.

    {"id": 3, "sample": 0, "batch": "<run_id>:b7", "env": "TextCraft", "episode_id": "...",
     "messages": [{"role": "user", "content": <instructions>}, {"role": "assistant", ...}, ...],
     "actions": ["get 1 oak log", ...], "reward": 1.0, "turn_rewards": [0.0, 0.0, 0.0, 1.0],
     "score": null, "success": true, "rounds": 4, "stop_reason": "done",
     "usage": {"prompt_tokens": 812, "completion_tokens": 96}, "tokens": {...} or null,
     "token_data": [null, ...], "error": null, "retried": [],
     "sampling": {"temperature": 1.0, "max_tokens": 256, "seed": 1660533956000393},
     "seed": {"batch": 7, "entry": 3, "sample": 0, "episode": 1660533956000393, "turns": [...]},
     "duration_s": 0.41}

``messages`` is the conversation exactly as the model saw it at its last turn, with
its last reply and the environment's last answer (results/conversation.py builds it
from the record). ``turn_rewards`` has the environment's reward of each step. ``turn_prompts`` is
null unless the environment server rewrote earlier turns (AgentBench's ALFWorld): then,
per turn, the whole conversation that turn was sent, ending with its reply.
``tokens`` is the episode's token view when the endpoint sent token ids
(results/tokens.py: ``prompt_ids``, ``completion_ids``, ``completion_mask``,
``completion_logprobs``, the turns' spans, ``rerendered`` and ``rest``);
``token_data`` has one entry per assistant message: what the endpoint sent of
logprobs and token ids (None where it sent none), in the chat route's shapes (a turn
sent as token ids to ``/v1/completions`` is written so: model/token_data.py), with
``token_in`` (which route the turn took) when the batch asked for token ids. A rollout that
could not be played has ``error`` (type, message, where: env, model or harness)
and no reward.

``sampling`` is what the rollout was played with (the batch's own keys and the node's
defaults, rollouts/request.py), its ``seed`` the rollout's own; ``seed`` says which
stream that is (the batch seed, the entry's position in ``ids``, the sample) and lists
the seed each turn's model call sent (engine/episode.py ``turn_sampling``), or is null
when the batch gave no seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_agentgym.engine.episode import turn_sampling
from pytest_agentgym.results.conversation import conversation, messages_sent
from pytest_agentgym.results.records import EpisodeRecord


def rollout_answer(record: EpisodeRecord, *, id: int, sample: int,
                   stream: dict[str, int] | None = None) -> dict[str, Any]:
    """The service's answer for one finished rollout (see the module's docstring);
    ``stream``: its seed stream (RolloutBatch.stream), None without a batch seed."""
    opening = record.opening or ()
    return {
        "id": id,
        "sample": sample,
        "batch": record.batch,
        "env": record.env,
        "episode_id": record.episode_id,
        "model": record.model,
        "messages": conversation(record, opening),
        "turn_prompts": _turn_prompts(record, opening),
        "actions": [turn.action for turn in record.turns],
        "reward": record.reward,
        "turn_rewards": [turn.reward for turn in record.turns],
        "score": record.score,
        "success": record.success,
        "rounds": record.rounds,
        "stop_reason": record.stop_reason,
        "usage": {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens},
        "tokens": None if record.tokens is None else record.tokens.to_dict(),
        "token_data": [turn.token_data for turn in record.turns],
        "error": dataclasses.asdict(record.error) if record.error else None,
        "retried": [dataclasses.asdict(error) for error in record.retried],
        "sampling": record.sampling,
        "seed": _seeds(record, stream),
        "duration_s": record.duration_s,
    }


def _seeds(record: EpisodeRecord, stream: dict[str, int] | None) -> dict[str, Any] | None:
    """The rollout's seed stream and the seed each played turn sent."""
    if stream is None:
        return None
    sent = [turn_sampling(record.sampling, record.task_index, turn.index).get("seed") for turn in record.turns]
    return {**stream, "turns": sent}


def _turn_prompts(record: EpisodeRecord, opening: Any) -> list[list[dict[str, str]]] | None:
    if not any(turn.sent for turn in record.turns):
        return None
    return [sent + [{"role": "assistant", "content": turn.reply}]
            for sent, turn in zip(messages_sent(record, opening), record.turns)]


def without_token_data(record: EpisodeRecord) -> EpisodeRecord:
    """``record`` as the run directory keeps it: per-token data is answered, not stored
    (it would make episodes.jsonl and the report many times larger)."""
    if not any(turn.token_data for turn in record.turns):
        return record
    turns = tuple(dataclasses.replace(turn, token_data=None) for turn in record.turns)
    return dataclasses.replace(record, turns=turns)
