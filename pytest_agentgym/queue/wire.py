"""What travels on the queue's subjects: work items, results, worker heartbeats.

Plain data and bytes, no network. Every message is JSON (a large result is
zlib-compressed and says so in a header); every one has a schema version ``v``.

* work item, one per episode, on ``agentgymq.<queue>.work.<run>.<env>.<task>.<repeat>``,
  msg id ``<run>:<env>:<task>:r<repeat>:g<generation>``;
* result, on ``agentgymq.<queue>.results.<run>.<env>.<task>.<repeat>``, msg id
  ``<episode msg id>:a<delivery>`` (one per delivery of its work item, so a
  worker's retried publish is stored once and a redelivered item's second result
  is a different message that the coordinator drops by key);
* heartbeat, on ``agentgym.field.status.v1`` with ``status: "worker"``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from pytest_agentgym.results.events import EVENT_SCHEMA_VERSION, FIELD_STATUS, utc_now
from pytest_agentgym.results.jsonl import finite_json, json_utf8, strict_dumps
from pytest_agentgym.results.records import EpisodeRecord

WIRE_VERSION = 1
MSG_ID_HEADER = "Nats-Msg-Id"
ENCODING_HEADER = "Agentgym-Encoding"
#: Payloads above this many bytes are compressed (nats-server's default max payload is 1 MiB).
COMPRESS_ABOVE = 256 * 1024
HEARTBEAT_SUBJECT = FIELD_STATUS


class WireError(ValueError):
    """A message on a queue subject that is not what it should be."""


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

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.env, self.task_index, self.repeat)

    @property
    def msg_id(self) -> str:
        return episode_msg_id(self.run_id, self.env, self.task_index, self.repeat, self.generation)

    def to_payload(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "kind": "work", **asdict(self)}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "WorkItem":
        if payload.get("kind") != "work":
            raise WireError(f"not a work item: kind={payload.get('kind')!r}")
        try:
            return cls(run_id=str(payload["run_id"]), env=str(payload["env"]),
                       task_index=int(payload["task_index"]), repeat=int(payload["repeat"]),
                       generation=int(payload["generation"]), max_rounds=int(payload["max_rounds"]),
                       timeout_s=float(payload["timeout_s"]), retries=int(payload["retries"]),
                       min_reward=payload.get("min_reward"), nodeid=payload.get("nodeid"),
                       checkpoint=payload.get("checkpoint"), sampling=dict(payload.get("sampling") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed work item ({type(exc).__name__}: {exc}): {dict(payload)!r:.300}") from None


@dataclass(frozen=True)
class Result:
    """A played episode as a worker publishes it: the record, who played it, which delivery."""

    record: EpisodeRecord
    worker: str
    delivery: int
    generation: int

    def msg_id(self) -> str:
        r = self.record
        return episode_msg_id(r.run_id, r.env, r.task_index, r.repeat, self.generation) + f":a{self.delivery}"

    def to_payload(self) -> dict[str, Any]:
        return {"v": WIRE_VERSION, "kind": "result", "worker": self.worker, "delivery": self.delivery,
                "generation": self.generation, "record": self.record.to_dict()}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Result":
        if payload.get("kind") != "result":
            raise WireError(f"not a result: kind={payload.get('kind')!r}")
        try:
            return cls(record=EpisodeRecord.from_dict(dict(payload["record"])), worker=str(payload["worker"]),
                       delivery=int(payload["delivery"]), generation=int(payload["generation"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireError(f"malformed result ({type(exc).__name__}: {exc})") from None


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

    def to_payload(self) -> dict[str, Any]:
        return {"schema_version": EVENT_SCHEMA_VERSION, "event": "field.status", "status": "worker",
                "timestamp": self.timestamp or utc_now(), "node": self.worker, "queue": self.queue,
                "profile": self.profile, "model": self.model, "capacity": self.capacity, "load": self.load,
                "envs": list(self.envs), "host": self.host, "state": self.state}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Heartbeat | None":
        """None for a field.status that is not a worker's (a run's own status)."""
        if payload.get("status") != "worker":
            return None
        try:
            return cls(worker=str(payload["node"]), queue=str(payload["queue"]), profile=str(payload["profile"]),
                       model=str(payload["model"]), capacity=int(payload["capacity"]), load=int(payload["load"]),
                       envs=tuple(payload.get("envs") or ()), host=str(payload.get("host", "")),
                       state=str(payload.get("state", "serving")), timestamp=str(payload.get("timestamp", "")))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        return f"{self.worker} ({self.profile}, {self.model}, load {self.load}/{self.capacity})"
