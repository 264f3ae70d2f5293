"""What a trainer learns from in an exported row: exactly what the model sampled.

An episode's conversation holds text that no model sampled: its opening (the
environment's instructions and, in AgentGym's conversation start, a scripted
assistant acknowledgement such as ``OK``) and the environment's answers between the
model's turns. The record tells them apart: the opening is kept apart from the turns
(``record.opening`` or prompts.jsonl), and each turn holds the reply the model sent.
An export row marks the model's part in each shape a trainer reads:

* ``messages``: every message carries ``weight``, 1 on a reply the model sampled and 0
  on every other message, the scripted acknowledgement included (the per-message
  flag of OpenAI's chat fine-tuning format and of axolotl's ``message_field_training``);
* ``prompt`` / ``completion``: the messages before the model's first reply, and the
  rest (TRL's conversational prompt-completion form). TRL's SFTTrainer leaves the
  prompt out of the loss for this form by default (``completion_only_loss``); when
  environment messages sit between the replies (a multi-turn episode), training with
  ``assistant_only_loss=True`` leaves them out too, since TRL applies both masks;
* ``input_ids`` / ``assistant_masks``, when the endpoint sent token ids: the ids the
  endpoint rendered and sampled, never re-tokenized, with 1 exactly on the sampled
  ones. A row with ``input_ids`` is a pre-tokenized sample to TRL's SFTTrainer, which
  builds its labels from ``assistant_masks`` whatever its options. When the token view
  stops at a turn the endpoint re-rendered (``tokens.rerendered``, see
  results/tokens.py), these ids cover the turns before it.

A reply that a server rewrote in a later turn's conversation (``Turn.sent``) is no
longer what the model sampled there: its message gets weight 0.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from pytest_agentgym.results.conversation import Message, Sidecars, conversation, messages_sent, opening_of
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.tokens import EpisodeTokens

__all__ = ["chat_rows", "episode_facts", "model_weights", "turn_rows"]


def episode_facts(record: EpisodeRecord) -> dict[str, Any]:
    return {"episode_id": record.episode_id, "env": record.env, "task_index": record.task_index,
            "repeat": record.repeat, "reward": record.reward, "success": record.success,
            "turn_rewards": [turn.reward for turn in record.turns], "stop_reason": record.stop_reason,
            "model": record.model, "checkpoint": record.checkpoint, "batch": record.batch,
            "sample": record.sample}


def model_weights(messages: Sequence[Mapping[str, str]], record: EpisodeRecord,
                  opening: Sequence[Mapping[str, str]]) -> list[int]:
    """Per message of ``messages`` (a conversation of ``record``), 1 when it is a reply the model
    sampled and 0 otherwise.

    The opening's messages, as far as ``messages`` begins with them, are never the model's,
    whatever their role. After them an assistant message is the model's when it is the reply
    of one of the record's turns, taken in turn order: exact for a conversation rebuilt from
    the record, and a reply that a server rewrote (``Turn.sent``) matches none."""
    weights = [0] * len(messages)
    start = 0
    while start < min(len(messages), len(opening)) and _same(messages[start], opening[start]):
        start += 1
    replies = [turn.reply for turn in record.turns]
    after = 0  # the first turn whose reply may still come
    for index in range(start, len(messages)):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        try:
            turn = replies.index(message.get("content", ""), after)
        except ValueError:
            continue
        weights[index] = 1
        after = turn + 1
    return weights


def _same(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return a.get("role") == b.get("role") and a.get("content") == b.get("content")


def training_fields(messages: Sequence[Message], weights: Sequence[int]) -> dict[str, Any]:
    """``messages`` with their weights, and split where the model's first reply begins."""
    first = weights.index(1) if 1 in weights else len(messages)
    plain = [{"role": m["role"], "content": m["content"]} for m in messages]
    return {"messages": [{**m, "weight": w} for m, w in zip(plain, weights)],
            "prompt": plain[:first], "completion": plain[first:]}


def token_fields(prompt_ids: Sequence[int], completion_ids: Sequence[int],
                 completion_mask: Sequence[int]) -> dict[str, list[int]]:
    """One pre-tokenized sample: the prompt's ids, then the completion's, 1 where sampled."""
    return {"input_ids": [*prompt_ids, *completion_ids],
            "assistant_masks": [0] * len(prompt_ids) + list(completion_mask)}


def chat_rows(record: EpisodeRecord, sidecars: Sidecars) -> Iterator[dict[str, Any]]:
    """The episode as one row: the conversation of its last turn and its last reply."""
    opening = opening_of(record, sidecars.openings)
    assert opening is not None
    messages = conversation(record, opening, final_feedback=False)
    row = {**training_fields(messages, model_weights(messages, record, opening)), **episode_facts(record)}
    tokens = sidecars.tokens_of(record)
    row["tokens"] = None if tokens is None else tokens.to_dict()
    if tokens is not None:
        view = tokens.view
        row.update(token_fields(view.prompt_ids, view.completion_ids, view.completion_mask))
    yield row


def turn_rows(record: EpisodeRecord, sidecars: Sidecars) -> Iterator[dict[str, Any]]:
    """One row per policy turn: the conversation sent for it (not trained) and its reply."""
    opening = opening_of(record, sidecars.openings)
    assert opening is not None
    tokens: EpisodeTokens | None = sidecars.tokens_of(record)
    facts = episode_facts(record)
    for index, (sent, turn) in enumerate(zip(messages_sent(record, opening), record.turns)):
        messages = sent + [{"role": "assistant", "content": turn.reply}]
        row = {**training_fields(messages, [0] * len(sent) + [1]), "turn": index, "turn_reward": turn.reward,
               **facts}
        if tokens is not None:
            own = tokens.turn(index)
            row.update(prompt_ids=list(own.prompt_ids), completion_ids=list(own.completion_ids),
                       logprobs=None if own.logprobs is None else list(own.logprobs))
            row.update(token_fields(own.prompt_ids, own.completion_ids, [1] * len(own.completion_ids)))
        yield row
