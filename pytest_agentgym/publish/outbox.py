"""The outbox: events a run could not deliver to NATS, kept on disk until they are.

    reports/<run_id>/outbox.jsonl            one event per line: {"subject", "msg_id", "payload"}
    reports/<run_id>/outbox.delivered.jsonl  one line per event delivered later: {"msg_id", "at"}

The publisher appends an event to ``outbox.jsonl`` when NATS was unreachable at
the start of the run, or when the event could still not be delivered when the
run closed its publisher. Each line is appended whole or not at all, under a
lock (:func:`pytest_agentgym.results.jsonl.append_line`), so a run killed at any moment
or a full disk leaves whole lines; a torn or unreadable line is skipped when
reading and reported.

``pytest-agentgym publish-outbox reports/<run_id>`` (:func:`publish_outbox_cli`)
delivers what is in the outbox and appends each delivered msg id to
``outbox.delivered.jsonl`` at once; a second call skips those, so nothing is
sent twice even long after JetStream's duplicate window has passed. The outbox
itself is never rewritten: it stays the record of what the run could not send.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_agentgym.results.events import Event, utc_now
from pytest_agentgym.results.jsonl import append_line, read_records
from pytest_agentgym.publish.connection import NatsSender, NatsUnavailable

OUTBOX_FILE = "outbox.jsonl"
DELIVERED_FILE = "outbox.delivered.jsonl"


def _append_line(path: Path, data: dict, then: str) -> None:
    """Append one strict JSON line, whole or not at all (raises ResultsWriteError, an OSError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    append_line(path, data, then=then, default=str)


def _delivered_id(data: dict) -> str:
    msg_id = data["msg_id"]
    if not isinstance(msg_id, str):
        raise TypeError(f"msg_id must be a string, got {msg_id!r}")
    return msg_id


class Outbox:
    """The outbox file of one run and its record of what was delivered later."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def of_run(cls, run_dir: str | Path) -> "Outbox":
        """The outbox of a run directory (a path to a ``.jsonl`` file is taken as the outbox itself)."""
        run_dir = Path(run_dir)
        if run_dir.suffix == ".jsonl" and not run_dir.is_dir():
            return cls(run_dir)
        return cls(run_dir / OUTBOX_FILE)

    @property
    def delivered_path(self) -> Path:
        return self.path.with_name(self.path.name.removesuffix(".jsonl") + ".delivered.jsonl")

    def append(self, event: Event) -> None:
        """Keep one event; raises :class:`~pytest_agentgym.results.jsonl.ResultsWriteError` (an
        OSError) when the disk refuses, leaving only whole lines (the publisher catches it)."""
        _append_line(self.path, event.to_dict(),
                     then="run again: this event was not kept (it counts as lost)")

    def read(self) -> tuple[list[Event], list[str]]:
        """The events in file order, and one message per line that was skipped
        (``<file>:<line>: skipped a torn last line (...)`` or ``... an unreadable line (...)``)."""
        events, skipped = read_records(self.path, Event.from_dict)
        return events, [str(line) for line in skipped]

    def delivered_ids(self) -> set[str]:
        """Msg ids recorded as delivered by an earlier ``publish_outbox``. A torn or
        unreadable line is ignored: that event is simply sent again."""
        ids, _ = read_records(self.delivered_path, _delivered_id)
        return set(ids)

    def mark_delivered(self, msg_id: str) -> None:
        _append_line(self.delivered_path, {"msg_id": msg_id, "at": utc_now()},
                     then="run publish-outbox again (the events delivered so far may be sent twice)")

    def undelivered(self) -> tuple[list[Event], int, list[str]]:
        """Events still to deliver (first of each msg id, file order), how many
        distinct msg ids were delivered before, and the unreadable-line messages."""
        events, problems = self.read()
        done = self.delivered_ids()
        seen: set[str] = set()
        todo: list[Event] = []
        already = 0
        for event in events:
            if event.msg_id in seen:
                continue
            seen.add(event.msg_id)
            if event.msg_id in done:
                already += 1
            else:
                todo.append(event)
        return todo, already, problems


@dataclass(frozen=True)
class OutboxDelivery:
    """What one :func:`publish_outbox` call did."""

    outbox: str
    url: str
    mode: str  # "jetstream", "core", "unreachable" or "nothing to send"
    total: int
    already_delivered: int
    delivered: int
    duplicates: int
    failed: int
    unreadable: int
    notes: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.error is None


def publish_outbox(
    run_dir: str | Path,
    url: str,
    *,
    jetstream: bool | str = "auto",
    create_stream: bool = False,
    stream: str = "AGENTGYM",
    connect_timeout: float = 2.0,
    ack_timeout: float = 2.0,
) -> OutboxDelivery:
    """Deliver the events of a run's outbox that were not delivered before.

    With JetStream each event is published with its msg id and counted as
    delivered once the stream acknowledges it (``duplicates`` counts those the
    stream already had); on core NATS, once the server has answered a flush.
    Each delivered msg id is recorded at once, so an interrupted call loses
    nothing and a repeated call sends nothing twice.
    """
    return asyncio.run(_deliver(
        Outbox.of_run(run_dir), url, jetstream=jetstream, create_stream=create_stream,
        stream=stream, connect_timeout=connect_timeout, ack_timeout=ack_timeout,
    ))


async def _deliver(outbox: Outbox, url: str, **options) -> OutboxDelivery:
    todo, already, problems = outbox.undelivered()
    report = dict(outbox=str(outbox.path), url=url, total=len(todo) + already,
                  already_delivered=already, unreadable=len(problems))
    if not todo:
        return OutboxDelivery(mode="nothing to send", delivered=0, duplicates=0, failed=0,
                              notes=tuple(problems), **report)
    sender = NatsSender(url, **options)
    try:
        notes = await sender.connect()
    except NatsUnavailable as exc:
        return OutboxDelivery(mode="unreachable", delivered=0, duplicates=0, failed=len(todo),
                              notes=tuple(problems), error=str(exc), **report)
    delivered = duplicates = failed = 0
    error = None
    try:
        for index, event in enumerate(todo):
            try:
                duplicate = await sender.send(event)
            except Exception as exc:  # noqa: BLE001 - any failure leaves the event in the outbox
                failed += 1
                error = f"{event.msg_id}: {type(exc).__name__}: {exc}"
                if not sender.connected:
                    failed += len(todo) - index - 1
                    error = f"lost the connection to {url} ({error}); run publish-outbox again later"
                    break
                continue
            outbox.mark_delivered(event.msg_id)
            delivered += 1
            duplicates += int(duplicate)
    finally:
        mode = sender.mode
        await sender.close()
    return OutboxDelivery(mode=mode, delivered=delivered, duplicates=duplicates, failed=failed,
                          notes=tuple(notes) + tuple(problems), error=error, **report)


def publish_outbox_cli(run_dir: str | Path, url: str, *, create_stream: bool = False) -> int:
    """``pytest-agentgym publish-outbox RUN_DIR --nats URL [--create-stream]``: 0 when
    everything is delivered (or there was nothing to deliver), 1 when something is
    left, 2 for a bad RUN_DIR. ``create_stream`` creates stream AGENTGYM on
    ``agentgym.>`` when the server has JetStream but not that stream."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        print(f"publish-outbox: {run_dir} does not exist; pass a run directory such as reports/latest",
              file=sys.stderr)
        return 2
    outbox = Outbox.of_run(run_dir)
    if not outbox.path.exists():
        print(f"{outbox.path}: no outbox, nothing to deliver (every event of this run reached NATS)")
        return 0
    result = publish_outbox(run_dir, url, create_stream=create_stream)
    for note in result.notes:
        print(note)
    via = f" to {url} via {result.mode}" if result.mode in ("jetstream", "core") else ""
    already_stored = f" ({result.duplicates} already in the stream)" if result.duplicates else ""
    print(f"{result.outbox}: {result.total} event(s); {result.already_delivered} delivered earlier, "
          f"{result.delivered} delivered now{via}{already_stored}, {result.failed} not delivered")
    if result.error:
        print(f"publish-outbox: {result.error}", file=sys.stderr)
    if not result.ok:
        print(f"publish-outbox: {result.failed} event(s) stay in {result.outbox}; "
              f"run the same command again once NATS at {url} is reachable", file=sys.stderr)
        return 1
    return 0
