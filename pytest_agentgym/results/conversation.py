"""The exact conversation an episode's model saw, from a run directory.

A record holds, per turn, the user message the model answered (``observation``),
its ``reply`` and the environment's ``feedback``. What it does not repeat is the
opening: the messages before round 0's user turn (instructions, acknowledgement),
the same for most episodes of an environment. The run directory keeps each
opening once, in ``prompts.jsonl`` (one ``{"sha256", "messages"}`` per line), and
the record names it by ``opening_sha256``. A turn whose conversation is not the
previous one plus that reply and feedback (a server that keeps the conversation
and rewrote it: AgentBench's ALFWorld drops earlier action lists) keeps what was
sent in ``sent``.

``tokens.jsonl`` holds the token view of each episode whose endpoint sent token
ids (:mod:`pytest_agentgym.results.tokens`), one line per episode and generation.

Both files are appended before the record's own line in episodes.jsonl, so a record
never names an opening that is not on disk. Their readers skip a torn or malformed
line, as every reader of a run directory does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_agentgym.results.jsonl import parse_line, read_numbered
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.tokens import EpisodeTokens

PROMPTS_FILE = "prompts.jsonl"
TOKENS_FILE = "tokens.jsonl"

Message = dict[str, str]

#: Openings seen by this process, by hash: every record of an environment shares one tuple.
_INTERNED: dict[str, tuple[Message, ...]] = {}
_INTERNED_MAX = 4096


def opening_key(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[Message, ...]]:
    """The SHA-256 of an opening (roles and contents, in order) and the one tuple this
    process keeps for it."""
    plain = tuple({"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in messages)
    canonical = json.dumps([[m["role"], m["content"]] for m in plain], ensure_ascii=False)
    sha = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    kept = _INTERNED.get(sha)
    if kept is None:
        if len(_INTERNED) >= _INTERNED_MAX:
            _INTERNED.clear()
        kept = _INTERNED[sha] = plain
    return sha, kept


def messages_sent(record: EpisodeRecord, opening: Sequence[Message]) -> list[list[Message]]:
    """Per turn, the whole conversation sent to the model for it."""
    sent: list[list[Message]] = []
    previous: list[Message] | None = None
    for turn in record.turns:
        if turn.sent is not None:
            messages = [dict(m) for m in turn.sent]
        elif previous is None:
            messages = [dict(m) for m in opening] + [{"role": "user", "content": turn.observation}]
        else:
            last = record.turns[len(sent) - 1]
            messages = previous + [{"role": "assistant", "content": last.reply},
                                   {"role": "user", "content": last.feedback}]
        sent.append(messages)
        previous = messages
    return sent


def conversation(record: EpisodeRecord, opening: Sequence[Message], *,
                 final_feedback: bool = True) -> list[Message]:
    """The conversation of the last turn with its reply and (``final_feedback``) the
    environment's last answer; ``[]`` for an episode without turns."""
    sent = messages_sent(record, opening)
    if not sent:
        return []
    last = record.turns[-1]
    messages = sent[-1] + [{"role": "assistant", "content": last.reply}]
    if final_feedback:
        messages.append({"role": "user", "content": last.feedback})
    return messages


def opening_of(record: EpisodeRecord, openings: Mapping[str, Sequence[Message]]) -> Sequence[Message] | None:
    """The record's opening: the one it carries, else the run directory's by its hash
    (None when neither has it: a record written before openings were kept)."""
    if record.opening is not None:
        return record.opening
    if record.opening_sha256 is None:
        return None
    return openings.get(record.opening_sha256)


# --------------------------------------------------------------------------- the files


def opening_line(sha: str, messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    return {"sha256": sha, "messages": [dict(m) for m in messages]}


def tokens_line(record: EpisodeRecord, tokens: Mapping[str, Any]) -> dict[str, Any]:
    return {"episode_id": record.episode_id, "generation": record.generation, "batch": record.batch,
            "sample": record.sample, "tokens": tokens}


@dataclass
class Sidecars:
    """What a run directory keeps beside episodes.jsonl, read: the openings by hash and the
    token views by (episode id, generation), with the lines skipped (file:line: why)."""

    openings: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    tokens: dict[tuple[str, int], EpisodeTokens] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def tokens_of(self, record: EpisodeRecord) -> EpisodeTokens | None:
        if record.tokens is not None:
            return record.tokens
        return self.tokens.get((record.episode_id, record.generation))


def read_sidecars(run_dir: Path, *, tokens: bool = True) -> Sidecars:
    """prompts.jsonl and (``tokens``) tokens.jsonl of ``run_dir``, read as every JSON Lines file
    of a run is (:func:`~pytest_agentgym.results.jsonl.read_numbered`); missing files are empty."""
    found = Sidecars()
    openings, skipped = read_numbered(run_dir / PROMPTS_FILE, _opening, parse=_parse)
    found.openings.update(opening for _, _, opening in openings)
    if tokens:
        views, more = read_numbered(run_dir / TOKENS_FILE, _tokens, parse=_parse)
        found.tokens.update(view for _, _, view in views)
        skipped += more
    found.skipped = [f"{Path(line.path).name}:{line.line}: {line.reason}" for line in skipped]
    return found


def _parse(raw: bytes) -> Any:
    try:
        return parse_line(raw)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError("not JSON (a torn line?)") from None


def _opening(data: Any) -> tuple[str, tuple[Message, ...]]:
    """A line of prompts.jsonl: (its hash, its messages), checked against each other."""
    sha, messages = (data.get("sha256"), data.get("messages")) if isinstance(data, dict) else (None, None)
    if not isinstance(sha, str) or not _is_messages(messages):
        raise ValueError("not {sha256, messages}")
    if opening_key(messages)[0] != sha:
        raise ValueError("its messages do not hash to its sha256")
    return sha, tuple(dict(m) for m in messages)


def _tokens(data: Any) -> tuple[tuple[str, int], EpisodeTokens]:
    """A line of tokens.jsonl: ((episode id, generation), its token view)."""
    if not isinstance(data, dict):
        raise ValueError("not an object")
    return (str(data["episode_id"]), int(data.get("generation", 1))), EpisodeTokens.from_dict(data["tokens"])


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value)
