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
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Literal

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
        an endpoint or a server sent beyond the ranges of :func:`check_record_data`; a line of
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


#: What each field of an episode record must be in episodes.jsonl (absent is fine: the
#: dataclass says which fields are required). A line whose fields are not is not a record.
_STRINGS = ("run_id", "env", "stop_reason", "started_at", "model")
_OPTIONAL_STRINGS = ("outcome", "nodeid", "checkpoint", "node", "worker", "opening_sha256", "batch")
_WHOLE_NUMBERS = ("task_index", "repeat", "rounds", "prompt_tokens", "completion_tokens", "generation")
_OPTIONAL_WHOLE_NUMBERS = ("max_rounds", "sample")
#: (a non-finite float is written as null, with the record's ``non_finite`` naming it)
_OPTIONAL_NUMBERS = ("reward", "min_reward", "score", "duration_s")
_LISTS = ("turns", "retried")
_OPTIONAL_MAPPINGS = ("error", "sampling", "tokens")
#: A turn's fields (its numbers may be null: a non-finite one is written as null).
_TURN_STRINGS = ("observation", "reply", "feedback")
_TURN_NUMBERS = ("reward", "score", "model_latency_s", "env_latency_s")
_TURN_WHOLE_NUMBERS = ("prompt_tokens", "completion_tokens")
_ERROR_FIELDS = ("type", "message", "where")

#: The largest whole number a record may hold (task index, repeat, rounds, tokens,
#: generation): 2**53 - 1, the largest that a float and the report's JavaScript hold exactly.
MAX_WHOLE = 2**53 - 1
#: The smallest each whole number may be (others: 0); token counts are the endpoint's to say.
_LOWEST = {"generation": 1, "prompt_tokens": -MAX_WHOLE, "completion_tokens": -MAX_WHOLE}
#: The largest magnitude of a reward, score, threshold, duration or latency: far beyond any
#: that a run produces, and small enough that every sum, mean and variance of a run's numbers
#: stays finite (a float overflows past about 1.8e308; the square of 1e100 is 1e200).
MAX_NUMBER = 1e100


_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(EpisodeRecord))
_TURN_FIELDS = tuple(f.name for f in dataclasses.fields(Turn))
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


def check_record_data(data: Any, *, finite: bool = True) -> None:
    """Raise TypeError (naming the field and what it holds) unless ``data`` has the shape
    of an episode record that every reader can count: the right JSON type for each field,
    numbers that are finite (a NaN or Infinity token, which Python's json accepts, is no
    reward: the harness writes a non-finite number as null) and within :data:`MAX_NUMBER`,
    whole numbers up to :data:`MAX_WHOLE` (an index, repeat or count from 0, a generation from
    1), errors and turns that are objects with fields of their types. ``finite=False`` checks
    the types alone and lets non-finite and out-of-range numbers through (a record in memory,
    see :meth:`EpisodeRecord.from_dict`)."""
    if not isinstance(data, dict):
        raise TypeError(f"an episode record is a JSON object, this line holds {_kind(data)}")
    wrong = _wrong_field(data, finite)
    if wrong is not None:
        name, expected, value = wrong
        raise TypeError(f"'{name}' must be {expected}, got {_kind(value)}{_shown(value)}")


def _wrong_field(data: dict[str, Any], finite: bool = True) -> tuple[str, str, Any] | None:
    """(field path, what it must be, what it holds) of the first field that is wrong."""
    get = data.get
    for name in _STRINGS:
        if name in data and not isinstance(get(name), str):
            return name, "a string", get(name)
    for name in _OPTIONAL_STRINGS:
        if get(name) is not None and not isinstance(get(name), str):
            return name, "a string or null", get(name)
    for name in _WHOLE_NUMBERS:
        if name in data:
            wrong = _wrong_whole(get(name), _LOWEST.get(name, 0), strict=finite)
            if wrong:
                return name, wrong, get(name)
    for name in _OPTIONAL_WHOLE_NUMBERS:
        wrong = _wrong_whole(get(name), 0, optional=True, strict=finite)
        if wrong:
            return name, wrong, get(name)
    for name in _OPTIONAL_NUMBERS:
        wrong = _wrong_number(get(name), finite)
        if wrong:
            return name, wrong, get(name)
    if "success" in data and not isinstance(get("success"), bool):
        return "success", "true or false", get("success")
    for name in _LISTS:
        if name in data and not isinstance(get(name), (list, tuple)):
            return name, "a list", get(name)
    for name in _OPTIONAL_MAPPINGS:
        if get(name) is not None and not isinstance(get(name), dict):
            return name, "an object or null", get(name)
    if get("opening") is not None and not _messages(get("opening")):
        return "opening", "a list of {role, content} strings or null", get("opening")
    if get("error") is not None:
        found = _wrong_error(get("error"), "error")
        if found is not None:
            return found
    for number, error in enumerate(get("retried") or ()):
        found = _wrong_error(error, f"retried[{number}]")
        if found is not None:
            return found
    for number, turn in enumerate(get("turns") or ()):
        if not _plain_turn(turn):  # the usual turn passes here; the rest is looked at closely
            found = _wrong_turn(turn, f"turns[{number}]", finite)
            if found is not None:
                return found
    return None


def _plain_turn(turn: Any) -> bool:
    """True for a turn as the harness writes it (what :func:`_wrong_turn` accepts, checked
    in one pass: a report reads every turn of every episode); False says look closer."""
    if type(turn) is not dict:
        return False
    get = turn.get
    index, action, data = get("index"), get("action"), get("token_data")
    if get("sent") is not None:
        return False
    if (type(index) is not int or not 0 <= index <= MAX_WHOLE or type(get("observation")) is not str
            or type(get("reply")) is not str or type(get("feedback")) is not str
            or (action is not None and type(action) is not str) or type(get("done")) is not bool
            or (data is not None and type(data) is not dict)):
        return False
    for value in (get("reward"), get("score"), get("model_latency_s"), get("env_latency_s")):
        if value is not None and ((type(value) is not float and type(value) is not int)
                                  or not -MAX_NUMBER <= value <= MAX_NUMBER):
            return False
    for value in (get("prompt_tokens"), get("completion_tokens")):
        if value is not None and (type(value) is not int or not -MAX_WHOLE <= value <= MAX_WHOLE):
            return False
    return True


def _wrong_error(error: Any, where: str) -> tuple[str, str, Any] | None:
    if not isinstance(error, dict):
        return where, "an object {type, message, where}", error
    for name in _ERROR_FIELDS:
        if not isinstance(error.get(name), str):
            return f"{where}.{name}", "a string", error.get(name)
    return None


def _wrong_turn(turn: Any, where: str, finite: bool = True) -> tuple[str, str, Any] | None:
    if not isinstance(turn, dict):
        return where, "an object (a turn)", turn
    get = turn.get
    wrong = _wrong_whole(get("index"), 0, strict=finite)
    if wrong:
        return f"{where}.index", wrong, get("index")
    for name in _TURN_STRINGS:
        if not isinstance(get(name), str):
            return f"{where}.{name}", "a string", get(name)
    if get("action") is not None and not isinstance(get("action"), str):
        return f"{where}.action", "a string or null", get("action")
    if not isinstance(get("done"), bool):
        return f"{where}.done", "true or false", get("done")
    for name in _TURN_NUMBERS:
        wrong = _wrong_number(get(name), finite)
        if wrong:
            return f"{where}.{name}", wrong, get(name)
    for name in _TURN_WHOLE_NUMBERS:
        wrong = _wrong_whole(get(name), -MAX_WHOLE, optional=True, strict=finite)
        if wrong:
            return f"{where}.{name}", wrong, get(name)
    if get("token_data") is not None and not isinstance(get("token_data"), dict):
        return f"{where}.token_data", "an object or null", get("token_data")
    if get("sent") is not None and not _messages(get("sent")):
        return f"{where}.sent", "a list of {role, content} strings or null", get("sent")
    return None


def _messages(value: Any) -> bool:
    """Whether ``value`` is a list of chat messages ({role, content} strings)."""
    return isinstance(value, (list, tuple)) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value)


def _wrong_whole(value: Any, low: int, *, optional: bool = False, strict: bool = True) -> str:
    """What a whole-number field must be, when ``value`` is not that; else ``""``. ``low``: the
    smallest it may be (0 for an index or a count the harness makes, 1 for a generation,
    -:data:`MAX_WHOLE` for a token count, which the endpoint reports)."""
    if optional and value is None:
        return ""
    null = " or null" if optional else ""
    if not isinstance(value, int) or isinstance(value, bool):
        return "a whole number" + null
    if strict and not low <= value <= MAX_WHOLE:
        shown = "-(2**53 - 1)" if low == -MAX_WHOLE else str(low)
        return f"a whole number from {shown} to 2**53 - 1{null}"
    return ""


def _wrong_number(value: Any, finite: bool = True) -> str:
    """What a number field (null allowed) must be, when ``value`` is not that; else ``""``."""
    if value is None:
        return ""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "a number or null"
    if finite and not -MAX_NUMBER <= value <= MAX_NUMBER:  # NaN fails every comparison
        if isinstance(value, float) and not math.isfinite(value):
            return "a finite number or null"
        return f"a number from -{MAX_NUMBER:.0e} to {MAX_NUMBER:.0e} or null"
    return ""


def _kind(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        name = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return f"{name} (Python's json reads it, strict JSON has no such number)"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _shown(value: Any) -> str:
    """`` 'abc'`` after the kind of a scalar; nothing for null, lists, objects and non-finite floats."""
    if value is None or isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    text = repr(value)
    return " " + (text if len(text) <= 40 else text[:37] + "...")


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


Key = tuple[str, int, int]


@dataclass(frozen=True)
class Duplicate:
    """A second record of one (env, task, repeat) in one generation, left out by every reader.

    ``line`` and ``kept_line`` are line numbers of episodes.jsonl (None for records that
    did not come from a file); ``identical``: the two lines are the same bytes (None when
    that is not known)."""

    key: Key
    generation: int
    line: int | None = None
    kept_line: int | None = None
    path: str | None = None
    identical: bool | None = None

    def __str__(self) -> str:
        env, task, repeat = self.key
        what = f"{env} task {task} repeat {repeat} (generation {self.generation})"
        if self.line is None:
            return f"left out a second record of {what}: the first one counts"
        same = {True: "the same line", False: "a different record", None: "another record"}[self.identical]
        return (f"{self.path}:{self.line}: skipped a duplicate of {what}: line {self.kept_line} "
                f"holds it already ({same}); the first written counts")


class Records(list):  # type: ignore[type-arg]  (a list of EpisodeRecord)
    """Records as a reader counts them, with what reading left out: ``duplicates``
    (:class:`Duplicate`) and ``skipped`` (lines that are no record,
    :class:`~pytest_agentgym.results.jsonl.SkippedLine`). A plain list otherwise;
    :func:`current_records` passes both on, so the figures made from a run's records
    (run.json ``counts``) can say what was left out."""

    def __init__(self, items: Iterable[EpisodeRecord] = (), *, duplicates: Iterable[Duplicate] = (),
                 skipped: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.duplicates: tuple[Duplicate, ...] = tuple(duplicates)
        self.skipped: tuple[Any, ...] = tuple(skipped)


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


def current_records(records: Iterable[EpisodeRecord]) -> Records:
    """What a run counts: for each (env, task, repeat), the first written record of its
    newest generation, in the order they were written.

    episodes.jsonl is append-only: a resumed run adds a new generation's record for
    every episode it reruns (the missing and the errored ones) and leaves the
    superseded error records in the file as history. A second record of the same
    episode and generation (a line written twice, a copied line) is a duplicate: the
    first written counts (the append-only file's first word on the episode), the
    others are listed in the result's ``duplicates``. Every reader that counts
    (summary, gates, report, compare, merge, resume, batch events) goes through here;
    :func:`pytest_agentgym.results.reading.read_episodes_file` finds the duplicates of a
    file with their line numbers first, and those are passed on too.
    """
    given = records if isinstance(records, list) else list(records)
    keys = [(record.env, record.task_index, record.repeat) for record in given]  # (record.key, made once)
    newest: dict[Key, int] = {}
    for key, record in zip(keys, given):
        generation = newest.get(key)
        if generation is None or record.generation > generation:
            newest[key] = record.generation
    seen: set[Key] = set()
    kept: list[EpisodeRecord] = []
    found: list[Duplicate] = []
    for key, record in zip(keys, given):
        if record.generation != newest[key]:
            continue
        if key in seen:
            found.append(Duplicate(key, record.generation))
            continue
        seen.add(key)
        kept.append(record)
    return Records(kept, duplicates=(*getattr(given, "duplicates", ()), *found),
                   skipped=getattr(given, "skipped", ()))


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
