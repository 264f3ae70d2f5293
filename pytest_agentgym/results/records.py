"""Plain records of what happened in a run: turns, episodes, errors.

These are the project's data contract. ``episodes.jsonl`` holds one
:class:`EpisodeRecord` per line (``to_dict``), NATS events and the HTML report
are built from the same records. Bump :data:`SCHEMA_VERSION` when a field
changes meaning or disappears; adding an optional field does not need a bump.
The schema is documented in docs/results.md.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

SCHEMA_VERSION = 1

#: Where an infrastructure failure came from. A failure of any of these is an
#: *error* in pytest's terms, never a policy failure.
ErrorSource = Literal["env", "model", "harness"]

#: Why an episode's loop ended.
StopReason = Literal["done", "max_rounds", "timeout", "context_length", "error"]

#: The episode's verdict, the same in pytest, junit, the report and NATS:
#: ``passed`` (it succeeded by its environment's rule, or met the suite's
#: ``min_reward``), ``failed`` (below ``min_reward``: an assertion failed),
#: ``unsolved`` (no ``min_reward`` and no success: not a failure of the run, never
#: green; pytest shows it as UNSOLVED, junit as skipped), ``error`` (infrastructure).
Outcome = Literal["passed", "failed", "unsolved", "error"]

#: Where a run stands (run.json ``status``): ``running``; at the end ``finished``
#: (every episode scored), ``finished-with-errors``, ``no-episode-scored``,
#: ``interrupted`` (SIGINT/SIGTERM, a full disk); ``crashed`` (found later: the
#: run.json still says running but its process is gone).
RUN_STATUSES = ("running", "finished", "finished-with-errors", "no-episode-scored",
                "interrupted", "crashed")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    """The field names of a dataclass (from_dict runs once per line of episodes.jsonl)."""
    return frozenset(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True)
class ErrorInfo:
    """A failure stored as data: its class name, message and origin."""

    type: str
    message: str
    where: ErrorSource

    @classmethod
    def from_exception(cls, exc: BaseException, where: ErrorSource) -> "ErrorInfo":
        return cls(type=type(exc).__name__, message=str(exc), where=where)


@dataclass(frozen=True)
class Turn:
    """One round: the text shown to the model, its reply, and the environment's answer.

    ``observation`` is the user message the model answered (for round 0 the
    environment's first observation). ``action`` is what was sent to the
    server; it is None when the reply was rejected on the client side (for
    example two ``Action:`` lines), in which case ``feedback`` holds the
    message shown to the model instead and the server was not called.
    """

    index: int
    observation: str
    reply: str
    action: str | None
    feedback: str
    reward: float
    done: bool
    model_latency_s: float
    env_latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    score: float | None = None
    #: The endpoint's per-token data for ``reply`` (``logprobs``, ``token_ids``,
    #: ``prompt_token_ids``), untouched, when it sent some (ask with sampling
    #: ``logprobs: true``); None otherwise.
    token_data: dict[str, Any] | None = None


@dataclass(frozen=True)
class EpisodeRecord:
    """Everything about one finished episode (environment, task index, repeat)."""

    run_id: str
    env: str
    task_index: int
    repeat: int
    reward: float | None
    success: bool
    rounds: int
    stop_reason: StopReason
    started_at: str
    duration_s: float
    model: str
    turns: tuple[Turn, ...] = ()
    error: ErrorInfo | None = None
    #: Earlier attempts that ended in an infrastructure error and were retried.
    retried: tuple[ErrorInfo, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    min_reward: float | None = None
    outcome: Outcome | None = None
    nodeid: str | None = None
    checkpoint: str | None = None
    node: str | None = None
    score: float | None = None
    #: The queue worker that played the episode (``--agentgym-queue``); None when the run played it.
    worker: str | None = None
    #: Rounds allowed and sampling sent (the effective values, after precedence).
    max_rounds: int | None = None
    sampling: dict[str, Any] | None = None
    #: 1 for the run's first attempt at its episodes, +1 per ``--agentgym-resume``.
    generation: int = 1
    schema: int = SCHEMA_VERSION

    @property
    def episode_id(self) -> str:
        """Stable key of this episode within its run."""
        return f"{self.run_id}:{self.env}:{self.task_index}:r{self.repeat}"

    @property
    def key(self) -> tuple[str, int, int]:
        """(env, task index, repeat): what a run holds exactly once."""
        return (self.env, self.task_index, self.repeat)

    @property
    def attempts(self) -> int:
        return 1 + len(self.retried)

    @classmethod
    def errored(cls, run_id: str, env: str, task_index: int, repeat: int, error: ErrorInfo, *,
                started_at: str, model: str, **facts: Any) -> "EpisodeRecord":
        """The record of an episode that could not be played at all (no endpoint, no
        server, its worker died): no reward, no rounds; ``facts`` are other fields."""
        return cls(run_id=run_id, env=env, task_index=task_index, repeat=repeat, reward=None,
                   success=False, rounds=0, stop_reason="error", started_at=started_at,
                   duration_s=0.0, model=model, error=error, outcome="error", **facts)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["episode_id"] = self.episode_id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EpisodeRecord":
        """Inverse of :meth:`to_dict`; unknown keys (from newer writers) are ignored.
        Data that is not a record (not an object, a field of the wrong type) raises
        TypeError or ValueError naming the field, so every reader skips the line."""
        check_record_data(data)
        names = _field_names(cls)
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["turns"] = tuple(Turn(**t) for t in data.get("turns", ()))
        kwargs["retried"] = tuple(ErrorInfo(**e) for e in data.get("retried", ()))
        if data.get("error") is not None:
            kwargs["error"] = ErrorInfo(**data["error"])
        return cls(**kwargs)


#: What each field of an episode record must be in episodes.jsonl (absent is fine: the
#: dataclass says which fields are required). A line whose fields are not is not a record.
_STRINGS = ("run_id", "env", "stop_reason", "started_at", "model")
_OPTIONAL_STRINGS = ("outcome", "nodeid", "checkpoint", "node", "worker")
_WHOLE_NUMBERS = ("task_index", "repeat", "rounds", "prompt_tokens", "completion_tokens", "generation")
_OPTIONAL_WHOLE_NUMBERS = ("max_rounds",)
#: (a non-finite float is written as null, with the record's ``non_finite`` naming it)
_OPTIONAL_NUMBERS = ("reward", "min_reward", "score", "duration_s")
_LISTS = ("turns", "retried")
_OPTIONAL_MAPPINGS = ("error", "sampling")


def check_record_data(data: Any) -> None:
    """Raise TypeError (naming the field and what it holds) unless ``data`` has the shape
    of an episode record. Non-finite rewards are numbers: the summaries leave them out."""
    if not isinstance(data, dict):
        raise TypeError(f"an episode record is a JSON object, this line holds {_kind(data)}")
    wrong = _wrong_field(data)
    if wrong is not None:
        name, expected = wrong
        value = data[name]
        shown = "" if value is None or isinstance(value, (dict, list)) else f" {_shown(value)}"
        raise TypeError(f"'{name}' must be {expected}, got {_kind(value)}{shown}")


def _wrong_field(data: dict[str, Any]) -> tuple[str, str] | None:
    get = data.get
    for name in _STRINGS:
        if name in data and not isinstance(get(name), str):
            return name, "a string"
    for name in _OPTIONAL_STRINGS:
        if get(name) is not None and not isinstance(get(name), str):
            return name, "a string or null"
    for name in _WHOLE_NUMBERS:
        if name in data and not _whole(get(name)):
            return name, "a whole number"
    for name in _OPTIONAL_WHOLE_NUMBERS:
        if get(name) is not None and not _whole(get(name)):
            return name, "a whole number or null"
    for name in _OPTIONAL_NUMBERS:
        if get(name) is not None and not _number(get(name)):
            return name, "a number or null"
    if "success" in data and not isinstance(get("success"), bool):
        return "success", "true or false"
    for name in _LISTS:
        if name in data and not isinstance(get(name), (list, tuple)):
            return name, "a list"
    for name in _OPTIONAL_MAPPINGS:
        if get(name) is not None and not isinstance(get(name), dict):
            return name, "an object or null"
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class RunInfo:
    """What ``run.json`` holds: how a run was set up, and how it ended."""

    run_id: str
    started_at: str
    node: str
    model: str
    endpoint: str
    endpoint_kind: str
    environments: tuple[str, ...]
    command: str
    seed: int | None = None
    checkpoint: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    git_commit: str | None = None
    notes: tuple[str, ...] = ()
    ended_at: str | None = None
    status: str = "running"
    counts: dict[str, int] = field(default_factory=dict)
    #: Gate verdicts (``GateVerdict.to_dict()``), written when the run ends.
    gates: tuple[dict[str, Any], ...] = ()
    #: Path of the baseline run directory this run was compared with, if any.
    baseline: str | None = None
    #: What an episode's meaning depends on (model, endpoint kind, checkpoint, and
    #: per environment: max rounds, sampling, prompt hash, server identity);
    #: ``--agentgym-resume`` refuses when it differs (see fingerprint.py).
    fingerprint: dict[str, Any] = field(default_factory=dict)
    #: The process that writes this run: ``{pid, host, started}``; a ``running``
    #: run whose process is gone is ``crashed``.
    process: dict[str, Any] = field(default_factory=dict)
    #: The newest attempt generation (1, then +1 per resume) and when each resume began.
    generation: int = 1
    resumed_at: tuple[str, ...] = ()
    #: A shard's slice of the run (``--agentgym-shard``, see shards.py): index, count,
    #: the whole selection, and what its suites ask of each environment.
    shard: dict[str, Any] | None = None
    #: A run written by ``pytest-agentgym merge``: one entry per shard it joined.
    merged_from: tuple[dict[str, Any], ...] = ()
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunInfo":
        names = _field_names(cls)
        kwargs = {k: v for k, v in data.items() if k in names}
        for key in ("environments", "notes", "gates", "resumed_at", "merged_from"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


def current_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """What a run counts: for each (env, task, repeat), the records of its newest
    generation (normally one), in the order they were written.

    episodes.jsonl is append-only: a resumed run adds a new generation's record for
    every episode it reruns (the missing and the errored ones) and leaves the
    superseded error records in the file as history. Every reader that counts
    (summary, gates, report, batch events) goes through here.
    """
    records = list(records)
    newest: dict[tuple[str, int, int], int] = {}
    for record in records:
        newest[record.key] = max(newest.get(record.key, 0), record.generation)
    return [r for r in records if r.generation == newest[r.key]]


def outcome_of(error: ErrorInfo | None, reward: float | None, min_reward: float | None,
               success: bool) -> str:
    """The episode's verdict (see :data:`~pytest_agentgym.results.records.Outcome`): with a
    ``min_reward`` the reward decides (``reward >= min_reward`` passes, below it
    fails); without one the environment's success rule does, and an episode that
    did not succeed is ``unsolved``, never a green pass."""
    if error is not None:
        return "error"
    if min_reward is not None:
        return "passed" if reward is not None and reward >= min_reward else "failed"
    return "passed" if success else "unsolved"
