"""Plain records of what happened in a run: turns, episodes, errors.

These are the project's data contract. ``episodes.jsonl`` holds one
:class:`EpisodeRecord` per line (``to_dict``), NATS events and the HTML report
are built from the same records. Bump :data:`SCHEMA_VERSION` when a field
changes meaning or disappears; adding an optional field does not need a bump.
The schema is documented in docs/results.md.

What a line must hold to be a record is :mod:`.record_checks`; what a run counts (the
newest generation of each episode) is :mod:`.current`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Literal

from pytest_agentgym.results.record_checks import check_record_data
from pytest_agentgym.results.tokens import EpisodeTokens

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
#: ``partial`` (ended without playing every episode it selected: ``-x``, ``--maxfail``),
#: ``interrupted`` (SIGINT/SIGTERM, a full disk); ``crashed`` (found later: the
#: run.json still says running but its process is gone).
RUN_STATUSES = ("running", "finished", "finished-with-errors", "no-episode-scored", "partial",
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
    #: The whole conversation sent for this turn, kept only when it is not the previous
    #: turn's plus that turn's reply and feedback (a server that keeps the conversation
    #: rewrote it); None otherwise (results/conversation.py rebuilds it).
    sent: tuple[dict[str, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """Everything about one finished episode (environment, task index, repeat).

    Slotted: a run keeps every record in memory, and with more than 30 fields an
    instance's ``__dict__`` no longer shares its keys with the others (792 bytes
    each instead of 156, measured on 10,000 records)."""

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
    #: SHA-256 of the opening messages (those before round 0's user turn): the run
    #: directory keeps them once per run, in prompts.jsonl (results/conversation.py).
    opening_sha256: str | None = None
    #: The rollout service's batch (``<run_id>:b<k>``) and the rollout's index within its group.
    batch: str | None = None
    sample: int | None = None
    #: In memory only, moved to files beside episodes.jsonl when the record is written:
    #: the opening messages (to prompts.jsonl) and the episode's token view when the
    #: endpoint sent token ids (to tokens.jsonl, see results/tokens.py).
    opening: tuple[dict[str, str], ...] | None = None
    tokens: EpisodeTokens | None = None
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
        """The record as JSON data: what travels between processes. The opening messages and
        the token view are in it (``opening``, ``tokens``); the run directory keeps them in
        their own files (:meth:`~pytest_agentgym.results.store.RunDir.append_episode`)."""
        # What dataclasses.asdict gives (the same dict, tuples kept as tuples, containers
        # copied), written out: asdict walks every value through its generic recursion, and
        # this runs two or three times per episode on the engine's loop (8.6% of its time
        # at 512 in flight). tests/results/test_record_dict.py holds the two equal.
        data = {name: getattr(self, name) for name in _RECORD_FIELDS}
        data["turns"] = tuple(_turn_dict(turn) for turn in self.turns)
        data["error"] = None if self.error is None else _error_dict(self.error)
        data["retried"] = tuple(_error_dict(e) for e in self.retried)
        data["sampling"] = _copied(self.sampling)
        # not through a deep copy: a token view holds thousands of ids
        data["opening"] = None if self.opening is None else [dict(m) for m in self.opening]
        data["tokens"] = None if self.tokens is None else self.tokens.to_dict()
        data["episode_id"] = self.episode_id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EpisodeRecord":
        """Inverse of :meth:`to_dict`, for a record passed between processes (an xdist
        worker's report, a queue worker's result); unknown keys (from newer writers) are
        ignored. Data that is not a record (not an object, a field of the wrong type) raises
        TypeError or ValueError naming the field. Numbers are checked for their type alone:
        a record may hold a NaN in memory (its line in episodes.jsonl holds null), or a number
        an endpoint or a server sent beyond the ranges of
        :func:`~pytest_agentgym.results.record_checks.check_record_data`; a line of
        episodes.jsonl is read with :meth:`from_line`, which refuses both."""
        check_record_data(data, finite=False)
        return cls._build(data)

    @classmethod
    def from_line(cls, data: Any) -> "EpisodeRecord":
        """The record of one line of episodes.jsonl (its JSON): every check of
        :func:`check_record_data`, so every reader skips the same lines (raises TypeError
        or ValueError naming the field and what it holds)."""
        check_record_data(data)
        return cls._build(data)

    @classmethod
    def _build(cls, data: dict[str, Any]) -> "EpisodeRecord":
        names = _field_names(cls)
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["turns"] = tuple(Turn(**t) if t.get("sent") is None else
                                Turn(**{**t, "sent": tuple(dict(m) for m in t["sent"])})
                                for t in data.get("turns", ()))
        if data.get("opening") is not None:
            kwargs["opening"] = tuple(dict(m) for m in data["opening"])
        if data.get("tokens") is not None:
            kwargs["tokens"] = EpisodeTokens.from_dict(data["tokens"])
        kwargs["retried"] = tuple(ErrorInfo(**e) for e in data.get("retried", ()))
        if data.get("error") is not None:
            kwargs["error"] = ErrorInfo(**data["error"])
        return cls(**kwargs)


_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(EpisodeRecord))
_TURN_FIELDS = tuple(f.name for f in dataclasses.fields(Turn))
#: Each record field's slot setter, in field order (:func:`record_from_values`).
_RECORD_SETTERS = tuple(getattr(EpisodeRecord, name).__set__ for name in _RECORD_FIELDS)


def record_from_values(values: Iterable[Any]) -> EpisodeRecord:
    """The record ``EpisodeRecord(*values)`` makes (one value per field, in field order, none
    converted), set slot by slot: the dataclass ``__init__`` of a frozen class sets each field
    through ``object.__setattr__``, which costs twice as much. The light index builds
    100,000 records of a large run this way (results/light_index.py)."""
    record = object.__new__(EpisodeRecord)
    for setter, value in zip(_RECORD_SETTERS, values, strict=True):
        setter(record, value)
    return record


_ERROR_FIELDS = tuple(f.name for f in dataclasses.fields(ErrorInfo))
#: A turn's field names, and those without a default (what ``Turn(**turn)`` insists on).
TURN_NAMES = frozenset(_TURN_FIELDS)
TURN_REQUIRED = frozenset(f.name for f in dataclasses.fields(Turn)
                          if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def _copied(value: Any) -> Any:
    """A value as dataclasses.asdict copies it: dicts, lists and tuples anew, all the way down."""
    if isinstance(value, dict):
        return type(value)((_copied(k), _copied(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value  # str, numbers, bool, None: immutable


def _turn_dict(turn: Turn) -> dict[str, Any]:
    data = {name: getattr(turn, name) for name in _TURN_FIELDS}
    if turn.token_data is not None:
        data["token_data"] = _copied(turn.token_data)
    if turn.sent is not None:
        data["sent"] = _copied(turn.sent)
    return data


def _error_dict(error: ErrorInfo) -> dict[str, Any]:
    return {name: getattr(error, name) for name in _ERROR_FIELDS}


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
    #: The environments that stopped before their last episode (--agentgym-stop-when-decided):
    #: env -> the decision (``run.stopping.Stop.to_dict()``: verdict, tasks, episodes, why, ...).
    stopped_early: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per environment when the run ended: mean_reward, success_rate, their 95% intervals,
    #: episodes, scored, errors, mean_rounds (``aggregate.summaries_record``), so a reader of
    #: run.json alone has the figures; the report and ``summarize`` recompute them from episodes.
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
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
        for key in ("stopped_early", "summaries"):  # a reader never trips on a hand-edited entry:
            entries = kwargs.get(key)                  # it keeps what is well-formed
            if key in kwargs:
                kwargs[key] = {str(env): dict(entry) for env, entry in entries.items()
                               if isinstance(entry, dict)} if isinstance(entries, dict) else {}
        return cls(**kwargs)



def parse_time(text: str | None) -> datetime | None:
    """A run.json time (ISO 8601; one without a zone is UTC), or None when absent or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def task_order(envs: Iterable[str] = ()) -> Callable[[EpisodeRecord], tuple[int, str, int, int]]:
    """The sort key of task order: environment as ``envs`` lists them (run.json's
    ``environments``; those it does not list after them, by name), task index, repeat. How
    a reader looks a task up (the report's table, the csv export), not the order the
    episodes finished in, which is episodes.jsonl's."""
    position = {env: number for number, env in enumerate(envs)}
    last = len(position)

    def key(record: EpisodeRecord) -> tuple[int, str, int, int]:
        at = position.get(record.env, last)
        return at, record.env if at == last else "", record.task_index, record.repeat

    return key


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
