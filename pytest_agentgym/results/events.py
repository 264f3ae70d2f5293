"""NATS event payloads: what a run tells the outside world while it runs.

Three subjects, each with a versioned JSON payload (schemas in
``pytest_agentgym/publish/schemas/``, described in docs/events.md):

    agentgym.episode.completed.v1     one per finished episode
    agentgym.eval.batch.completed.v1  one per environment when a run ends
    agentgym.field.status.v1          the run started / finished / was interrupted / failed

This module is plain data: builders turn records into :class:`Event` values,
nothing here touches the network or the disk (see :mod:`pytest_agentgym.publish`).

Every event carries a ``msg_id`` that is a stable key of what it reports, so a
publish that is retried (after a lost ack, a server restart, or from the
outbox) is stored once by JetStream, which deduplicates on the
``Nats-Msg-Id`` header.

Every string of a payload goes through :func:`pytest_agentgym.results.redact.redact_data`
(no URL in an event carries a password or a key), and the bytes on the wire are
strict JSON: a NaN or infinite number is sent as ``null``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from pytest_agentgym.results.jsonl import finite_json, json_utf8, strict_dumps
from pytest_agentgym.results.redact import redact_data
from pytest_agentgym.results.records import EpisodeRecord, RunInfo

if TYPE_CHECKING:  # only for annotations: events sit below aggregate and gates
    from pytest_agentgym.results.aggregate import EnvSummary
    from pytest_agentgym.results.gates import GateVerdict

#: Version of the event payloads. Bump it (and the subjects' ``.vN``) when a
#: field changes meaning or disappears; adding an optional field needs no bump.
EVENT_SCHEMA_VERSION = 1

EPISODE_COMPLETED = "agentgym.episode.completed.v1"
BATCH_COMPLETED = "agentgym.eval.batch.completed.v1"
FIELD_STATUS = "agentgym.field.status.v1"
SUBJECTS = (EPISODE_COMPLETED, BATCH_COMPLETED, FIELD_STATUS)

#: Values ``field_status`` accepts for ``status``.
RUN_STATUSES = ("started", "finished", "finished-with-errors", "no-episode-scored", "partial",
                "interrupted", "crashed")

#: Error messages are cut to this many characters in payloads (the full text
#: stays in episodes.jsonl).
MAX_ERROR_MESSAGE = 1000


@dataclass(frozen=True)
class Event:
    """One message to publish: its subject, its deduplication key and its JSON payload."""

    subject: str
    msg_id: str
    payload: Mapping[str, Any]

    def data(self) -> bytes:
        """The payload as compact, strict UTF-8 JSON (NaN and infinities as null), the
        bytes that go on the wire."""
        return json_utf8(strict_dumps(finite_json(self.payload), separators=(",", ":"), default=str))

    def to_dict(self) -> dict[str, Any]:
        """The form kept in the outbox: ``{"subject", "msg_id", "payload"}``."""
        return {"subject": self.subject, "msg_id": self.msg_id, "payload": dict(self.payload)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Event":
        """Inverse of :meth:`to_dict`; raises KeyError or TypeError on a malformed entry."""
        subject, msg_id, payload = data["subject"], data["msg_id"], data["payload"]
        if not isinstance(subject, str) or not isinstance(msg_id, str) or not isinstance(payload, dict):
            raise TypeError(f"not an event: subject, msg_id must be strings and payload an object: {data!r:.200}")
        return cls(subject, msg_id, payload)


def _event(subject: str, msg_id: str, payload: dict[str, Any]) -> Event:
    """An event whose payload strings are redacted (no credentials leave the run)."""
    return Event(subject, msg_id, redact_data(payload))


def utc_now() -> str:
    """Current time as ISO 8601 UTC with a ``Z``, e.g. ``2025-01-31T12:00:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def episode_completed(
    record: EpisodeRecord,
    *,
    node: str | None = None,
    checkpoint: str | None = None,
    at: str | None = None,
) -> Event:
    """``agentgym.episode.completed.v1`` for one finished episode.

    ``node`` and ``checkpoint`` default to the record's own fields; ``at`` (the
    event's timestamp) defaults to now. The msg id is
    ``<run_id>:<env>:<task_index>:r<repeat>:episode``.
    """
    error = record.error
    payload = {
        "schema_version": EVENT_SCHEMA_VERSION,
        "event": "episode.completed",
        "timestamp": at or utc_now(),
        "episode_id": record.episode_id,
        "run_id": record.run_id,
        "node": node if node is not None else record.node,
        "model": record.model,
        "checkpoint": checkpoint if checkpoint is not None else record.checkpoint,
        "env": record.env,
        "task_index": record.task_index,
        "repeat": record.repeat,
        "nodeid": record.nodeid,
        "reward": record.reward,
        "min_reward": record.min_reward,
        "score": record.score,
        "success": record.success,
        "outcome": record.outcome,
        "stop_reason": record.stop_reason,
        "rounds": record.rounds,
        "started_at": record.started_at,
        "duration_s": record.duration_s,
        "attempts": record.attempts,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "error_type": error.type if error else None,
        "error_where": error.where if error else None,
        "error_message": error.message[:MAX_ERROR_MESSAGE] if error else None,
    }
    return _event(EPISODE_COMPLETED, f"{record.episode_id}:episode", payload)


def _interval(pair: tuple[float, float] | None) -> list[float] | None:
    return [pair[0], pair[1]] if pair is not None else None


def batch_completed(
    run_id: str,
    summary: EnvSummary,
    verdicts: Iterable[GateVerdict],
    *,
    node: str | None,
    model: str,
    checkpoint: str | None,
    at: str | None = None,
) -> Event:
    """``agentgym.eval.batch.completed.v1``: one environment's figures at the end of a run.

    Only the verdicts of ``summary.env`` are kept, so the caller may pass all of
    a run's verdicts. ``gates_passed`` is true when every kept verdict passed
    (and when there is none). The batch id, also the msg id, is
    ``<run_id>:<env>:batch:n<episodes>``: a run resumed with more episodes
    publishes a new batch rather than a duplicate that JetStream would drop.
    """
    gates = [
        {"gate": v.gate, "value": v.value, "passed": v.passed, "detail": v.detail}
        for v in verdicts
        if v.env == summary.env
    ]
    batch_id = f"{run_id}:{summary.env}:batch:n{summary.episodes}"
    payload = {
        "schema_version": EVENT_SCHEMA_VERSION,
        "event": "eval.batch.completed",
        "timestamp": at or utc_now(),
        "batch_id": batch_id,
        "run_id": run_id,
        "node": node,
        "model": model,
        "checkpoint": checkpoint,
        "env": summary.env,
        "n_episodes": summary.episodes,
        "scored": summary.scored,
        "errors": summary.errors,
        "failed": summary.failed,
        "retried": summary.retried,
        "mean_reward": summary.mean_reward,
        "reward_ci95": _interval(summary.reward_ci95),
        "reward_ci_method": summary.reward_ci_method,
        "reward_range": _interval(summary.reward_range),
        "success_rate": summary.success_rate,
        "success_ci95": _interval(summary.success_ci95),
        "mean_rounds": summary.mean_rounds,
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "wall_s": summary.wall_s,
        "gates": gates,
        "gates_passed": all(g["passed"] for g in gates),
    }
    return _event(BATCH_COMPLETED, batch_id, payload)


def field_status(
    info: RunInfo,
    status: str,
    counts: Mapping[str, int] | None = None,
    *,
    at: str | None = None,
) -> Event:
    """``agentgym.field.status.v1``: what a node is doing with a run.

    ``status`` is one of :data:`RUN_STATUSES`; ``counts`` (name -> number,
    e.g. ``{"episodes": 12, "passed": 9, "failed": 2, "errors": 1}``) defaults to
    ``info.counts``. ``at`` defaults to ``info.started_at`` for "started" and
    to ``info.ended_at`` (or now) otherwise; the msg id is
    ``<run_id>:status:<status>:<at>``, so a resumed run's second "started" is
    a new event while a retried one is not.
    """
    if status not in RUN_STATUSES:
        raise ValueError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
    if at is None:
        at = info.started_at if status == "started" else (info.ended_at or utc_now())
    counts = dict(info.counts if counts is None else counts)
    payload = {
        "schema_version": EVENT_SCHEMA_VERSION,
        "event": "field.status",
        "timestamp": at,
        "run_id": info.run_id,
        "node": info.node,
        "status": status,
        "counts": {str(k): int(v) for k, v in counts.items()},
        "started_at": info.started_at,
        "ended_at": info.ended_at,
        "config": {
            "model": info.model,
            "endpoint": info.endpoint,
            "endpoint_kind": info.endpoint_kind,
            "environments": list(info.environments),
            "checkpoint": info.checkpoint,
            "seed": info.seed,
            "command": info.command,
            "git_commit": info.git_commit,
            "versions": dict(info.versions),
        },
    }
    who = info.run_id
    if info.shard:  # the shards of a run share its id: each its own status (and msg id)
        payload["shard"] = {"index": int(info.shard["index"]), "count": int(info.shard["count"])}
        who += f"/shard-{info.shard['index']}-of-{info.shard['count']}"
    return _event(FIELD_STATUS, f"{who}:status:{status}:{at}", payload)
