"""What travels on the queue's subjects: work items, results, worker heartbeats.

Plain data and bytes, no network. Every message is JSON (a large result is
zlib-compressed and says so in a header); every one has a schema version ``v``.

* work item, one per episode, on ``agentgymq.<queue>.work.<run>.<env>.<task>.<repeat>``,
  msg id ``<run>:<env>:<task>:r<repeat>:g<generation>`` (``:i<n>`` added when published
  again after a result played under another fingerprint was dropped);
* result, on ``agentgymq.<queue>.results.<run>.<env>.<task>.<repeat>``, msg id
  ``<episode msg id>:a<delivery>`` (one per delivery of its work item, so a
  worker's retried publish is stored once and a redelivered item's second result
  is a different message that the coordinator drops by key);
* heartbeat, on ``agentgym.field.status.v1`` with ``status: "worker"`` (core NATS, not
  stored; ``pytest-agentgym fleet`` shows them);
* refusal, on ``agentgymq.<queue>.refusals.<run>`` (core NATS, not stored): a worker
  that will not play a work item of the run says why.

A work item carries what its episode means: the run's fingerprint for the item's
environment and the plugin version (:func:`pytest_agentgym.results.fingerprint.for_episode`).
A result carries the fingerprint of the worker that played it. A message of
another ``v`` is refused (:class:`WireVersionError`), never read as this version.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from pytest_agentgym.results.events import EVENT_SCHEMA_VERSION, FIELD_STATUS, utc_now
from pytest_agentgym.results.jsonl import finite_json, json_utf8, strict_dumps
from pytest_agentgym.results.records import EpisodeRecord

#: 2: work items carry the run's fingerprint, results the worker's; refusals.
WIRE_VERSION = 2
MSG_ID_HEADER = "Nats-Msg-Id"
ENCODING_HEADER = "Agentgym-Encoding"
#: Payloads above this many bytes are compressed (nats-server's default max payload is 1 MiB).
COMPRESS_ABOVE = 256 * 1024
HEARTBEAT_SUBJECT = FIELD_STATUS


class WireError(ValueError):
    """A message on a queue subject that is not what it should be."""


class WireVersionError(WireError):
    """A message of another wire version: refused, not misread."""


def check_version(payload: Mapping[str, Any], what: str) -> None:
    """Raise :class:`WireVersionError` unless ``payload`` is of :data:`WIRE_VERSION`."""
    version = payload.get("v")
    if version != WIRE_VERSION:
        from pytest_agentgym import __version__

        said = "no wire version ('v')" if version is None else f"wire version {version!r}"
        raise WireVersionError(
            f"a {what} of {said}; this pytest-agentgym {__version__} speaks wire version {WIRE_VERSION}: "
            f"run the same pytest-agentgym version on the coordinator and every worker")


def encode(payload: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    data = json_utf8(strict_dumps(finite_json(payload), separators=(",", ":"), default=str))
    if len(data) > COMPRESS_ABOVE:
        return zlib.compress(data, 6), {ENCODING_HEADER: "zlib"}
    return data, {}


def decode(data: bytes, headers: Mapping[str, str] | None) -> dict[str, Any]:
    try:
        if (headers or {}).get(ENCODING_HEADER) == "zlib":
            data = zlib.decompress(data)
        payload = json.loads(data)
    except (zlib.error, ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not a queue message: {exc}") from None
    if not isinstance(payload, dict):
        raise WireError(f"not a queue message: a JSON object was expected, got {type(payload).__name__}")
    return payload


def episode_msg_id(run_id: str, env: str, task_index: int, repeat: int, generation: int) -> str:
    return f"{run_id}:{env}:{task_index}:r{repeat}:g{generation}"


@dataclass(frozen=True)
class WorkItem:
    """One episode to play, with the facts it is played under (the coordinator's: the
    worker adds only its own model endpoint and environment servers)."""

    run_id: str
    env: str
    task_index: int
    repeat: int
    generation: int
    max_rounds: int
    timeout_s: float
    retries: int
    min_reward: float | None = None
    nodeid: str | None = None
    checkpoint: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    #: what the episode means (fingerprint.for_episode): a worker plays it only under this
    fingerprint: dict[str, Any] = field(default_factory=dict)
    #: how many times the coordinator published the item again after dropping a result
    #: played under another fingerprint (0: the first publish)
    reissue: int = 0

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.env, self.task_index, self.repeat)

    @property
    def msg_id(self) -> str:
        return episode_msg_id(self.run_id, self.env, self.task_index, self.repeat, self.generation) + (
            f":i{self.reissue}" if self.reissue else "")

    def to_payload(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "kind": "work", **asdict(self)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "WorkItem":
        if payload.get("kind") != "work":
            raise WireError(f"not a work item: kind={payload.get('kind')!r}")
        if "v" in payload:
            check_version(payload, "work item")
        try:
            item = cls(run_id=str(payload["run_id"]), env=str(payload["env"]),
                       task_index=int(payload["task_index"]), repeat=int(payload["repeat"]),
                       generation=int(payload["generation"]), max_rounds=int(payload["max_rounds"]),
                       timeout_s=float(payload["timeout_s"]), retries=int(payload["retries"]),
                       min_reward=payload.get("min_reward"), nodeid=payload.get("nodeid"),
                       checkpoint=payload.get("checkpoint"), sampling=dict(payload.get("sampling") or {}),
                       fingerprint=dict(payload.get("fingerprint") or {}), reissue=int(payload.get("reissue", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed work item ({type(exc).__name__}: {exc}): {dict(payload)!r:.300}") from None
        check_version(payload, "work item")  # after the fields: a missing one is named first
        return item


@dataclass(frozen=True)
class Result:
    """A played episode as a worker publishes it: the record, who played it, which delivery,
    and the fingerprint it was played under (the worker's, fingerprint.for_episode)."""

    record: EpisodeRecord
    worker: str
    delivery: int
    generation: int
    fingerprint: dict[str, Any] = field(default_factory=dict)
    reissue: int = 0

    def msg_id(self) -> str:
        r = self.record
        return (episode_msg_id(r.run_id, r.env, r.task_index, r.repeat, self.generation)
                + (f":i{self.reissue}" if self.reissue else "") + f":a{self.delivery}")

    def to_payload(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "kind": "result", "worker": self.worker, "delivery": self.delivery,
                "generation": self.generation, "reissue": self.reissue, "fingerprint": self.fingerprint,
                "record": self.record.to_dict()}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Result":
        if payload.get("kind") != "result":
            raise WireError(f"not a result: kind={payload.get('kind')!r}")
        check_version(payload, f"result from worker {payload.get('worker', '?')}")
        try:
            return cls(record=EpisodeRecord.from_dict(dict(payload["record"])), worker=str(payload["worker"]),
                       delivery=int(payload["delivery"]), generation=int(payload["generation"]),
                       fingerprint=dict(payload.get("fingerprint") or {}), reissue=int(payload.get("reissue", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed result ({type(exc).__name__}: {exc})") from None


def stamp(stored: Any) -> tuple[int, int] | None:
    """The generation and reissue of a stored result message (a reissued item's earlier
    result, which the coordinator dropped, does not count as played); None: unreadable."""
    try:
        result = Result.from_payload(decode(stored.data, stored.headers))
    except WireError:
        return None
    return (result.generation, result.reissue)


@dataclass(frozen=True)
class Refusal:
    """A worker's word that it did not play a work item of a run, and why (one line per
    difference, or the wire-version problem)."""

    worker: str
    run_id: str
    item: str
    reasons: tuple[str, ...]
    node: str = ""
    version: str = ""

    def to_payload(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "kind": "refusal", "worker": self.worker, "run_id": self.run_id,
                "item": self.item, "reasons": list(self.reasons), "node": self.node, "version": self.version}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Refusal":
        if payload.get("kind") != "refusal":
            raise WireError(f"not a refusal: kind={payload.get('kind')!r}")
        check_version(payload, f"refusal from worker {payload.get('worker', '?')}")
        try:
            return cls(worker=str(payload["worker"]), run_id=str(payload["run_id"]), item=str(payload["item"]),
                       reasons=tuple(str(r) for r in payload["reasons"]), node=str(payload.get("node", "")),
                       version=str(payload.get("version", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed refusal ({type(exc).__name__}: {exc})") from None


#: How long a worker's heartbeat keeps naming a run after it finished the run's last item
#: it held (so a run does not blink out of ``pytest-agentgym fleet`` between two items).
RECENT_RUN_S = 60.0


def _optional(kind: type, value: Any) -> Any:
    return None if value is None else kind(value)


@dataclass(frozen=True)
class Heartbeat:
    """A worker's ``agentgym.field.status.v1`` with ``status: "worker"``."""

    worker: str
    queue: str
    profile: str
    model: str
    capacity: int
    load: int
    envs: tuple[str, ...] = ()
    host: str = ""
    state: str = "serving"  # serving | stopping
    timestamp: str = ""
    #: what the roll call pins a run by and checks before any item (None: a worker older
    #: than wire version 2, which sends none of them)
    wire: int | None = WIRE_VERSION
    version: str = ""
    endpoint_kind: str = ""
    checkpoint: str | None = None
    #: what ``pytest-agentgym fleet`` shows (None: a worker that sends none of them, shown as
    #: "-"; they were added without a wire version bump, as optional fields): episodes played
    #: since it started, the runs of the items it holds or finished within
    #: :data:`RECENT_RUN_S`, and the seconds between its heartbeats
    played: int | None = None
    runs: tuple[str, ...] | None = None
    interval_s: float | None = None

    def to_payload(self) -> dict[str, Any]:
        payload = {"schema_version": EVENT_SCHEMA_VERSION, "event": "field.status", "status": "worker",
                   "timestamp": self.timestamp or utc_now(), "node": self.worker, "queue": self.queue,
                   "profile": self.profile, "model": self.model, "capacity": self.capacity, "load": self.load,
                   "envs": list(self.envs), "host": self.host, "state": self.state, "v": self.wire,
                   "version": self.version, "endpoint_kind": self.endpoint_kind, "checkpoint": self.checkpoint}
        optional = {"played": self.played, "runs": None if self.runs is None else list(self.runs),
                    "interval_s": self.interval_s}
        return {**payload, **{key: value for key, value in optional.items() if value is not None}}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Heartbeat | None":
        """None for a field.status that is not a worker's (a run's own status)."""
        if payload.get("status") != "worker":
            return None
        try:
            return cls(worker=str(payload["node"]), queue=str(payload["queue"]), profile=str(payload["profile"]),
                       model=str(payload["model"]), capacity=int(payload["capacity"]), load=int(payload["load"]),
                       envs=tuple(payload.get("envs") or ()), host=str(payload.get("host", "")),
                       state=str(payload.get("state", "serving")), timestamp=str(payload.get("timestamp", "")),
                       wire=payload.get("v"), version=str(payload.get("version") or ""),
                       endpoint_kind=str(payload.get("endpoint_kind") or ""), checkpoint=payload.get("checkpoint"),
                       played=_optional(int, payload.get("played")),
                       runs=None if not isinstance(payload.get("runs"), list) else tuple(
                           str(run) for run in payload["runs"]),
                       interval_s=_optional(float, payload.get("interval_s")))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        return f"{self.worker} ({self.profile}, {self.model}, load {self.load}/{self.capacity})"
