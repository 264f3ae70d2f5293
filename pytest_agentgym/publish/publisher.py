"""Publishing events to NATS from a synchronous pytest run.

:class:`EventPublisher` runs nats-py on its own thread with its own asyncio
loop, so pytest hooks can call :meth:`~EventPublisher.publish` and go on at
once. The life of a publisher::

    publisher = EventPublisher("nats://127.0.0.1:4222", run_dir.path / "outbox.jsonl")
    notes = publisher.start()        # connect (bounded), lines for the run header
    publisher.notices                # the same notes as notices.Notice (key, text, advisory)
    publisher.publish(event)         # never blocks for long, never raises
    stats = publisher.close(5.0)     # deliver what is pending; the rest goes to the outbox

Delivery: with JetStream (a stream captures the subject) an event counts as
delivered when the stream acknowledges it; it is published with the header
``Nats-Msg-Id: <event.msg_id>``, so a retry is stored once. Without JetStream
it goes out on core NATS and counts as delivered once the server has answered
a flush. When the connection is lost mid-run, events wait in memory in order
and are retried with the same msg ids while the publisher reconnects. When
the server cannot be reached at start, no connection is attempted again and
every event goes straight to the outbox (see :mod:`.outbox`).

nats-py is imported when a publisher connects, never at plugin import.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_agentgym.results.events import Event
from pytest_agentgym.publish.notices import Notice
from pytest_agentgym.publish.connection import NatsSender, NatsUnavailable, describe_failure
from pytest_agentgym.publish.outbox import Outbox

log = logging.getLogger("pytest_agentgym.publish")

#: Back-off between retries while NATS is gone: doubles from MIN up to MAX.
RETRY_MIN_S = 0.1
RETRY_MAX_S = 2.0


@dataclass(frozen=True)
class PublishStats:
    """Counts of a publisher's events; ``published = delivered + outboxed + lost + buffered``."""

    url: str
    mode: str  # "jetstream", "core" or "outbox" (unreachable at start)
    published: int
    delivered: int
    duplicates: int  # delivered, but JetStream already had the msg id
    outboxed: int
    lost: int  # could not even be written to the outbox (disk refused)
    buffered: int
    failed_attempts: int
    reconnects: int
    outbox_path: str
    last_error: str | None


_WAKE = object()  # put in the inbox to wake the worker when closing


class EventPublisher:
    """Publishes events from any thread; see the module docstring for the lifecycle."""

    def __init__(self, url: str, outbox_path: str | Path, *, jetstream: bool | str = "auto",
                 create_stream: bool = False, stream: str = "AGENTGYM", connect_timeout: float = 1.0,
                 ack_timeout: float = 2.0, max_buffered: int = 10_000) -> None:
        self.url = url
        self.outbox = Outbox(outbox_path)
        self.connect_timeout = connect_timeout
        self.max_buffered = max_buffered
        self._sender = NatsSender(url, jetstream=jetstream, create_stream=create_stream, stream=stream,
                                  connect_timeout=connect_timeout, ack_timeout=ack_timeout)
        self._lock = threading.Lock()
        self._state = "new"  # new -> live | outbox -> closing -> closed
        self._mode = "outbox"
        self._counts = collections.Counter()
        self._last_error: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._inbox: asyncio.Queue | None = None
        self._pending: collections.deque[Event] = collections.deque()
        self._worker: asyncio.Task | None = None
        self._closing = False
        self._deadline = float("inf")
        self._wake: asyncio.Event | None = None
        #: what start() found, with keys: advisory ones describe a standing setup
        #: (the terminal shows those once per machine, see notices.py)
        self.notices: list[Notice] = []

    # -- caller side (any thread) ------------------------------------------------

    def start(self) -> list[str]:
        """Connect, at most about ``connect_timeout`` seconds; returns notes for the run header."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"EventPublisher for {self.url} was already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="agentgym-nats", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        future = asyncio.run_coroutine_threadsafe(self._open(), loop)
        try:
            notes = future.result(timeout=self.connect_timeout + 2 * max(self.connect_timeout, 0.5) + 1)
        except Exception as exc:  # noqa: BLE001 - unreachable, or a stuck JetStream lookup
            future.cancel()
            self._stop_loop()
            reason = exc.reason if isinstance(exc, NatsUnavailable) else describe_failure(exc)
            with self._lock:
                self._state = "outbox"
                self._last_error = reason
            self.notices = [Notice(
                f"nats.unreachable {self.url}",
                f"NATS at {self.url} unreachable ({reason}); events go to {self.outbox.path}; "
                f"deliver them later with: pytest-agentgym publish-outbox {self.outbox.path.parent}",
                advisory=False)]
            return [notice.text for notice in self.notices]
        with self._lock:
            self._state = "live"
            self._mode = self._sender.mode
        self.notices = list(self._sender.notices)
        return notes

    def publish(self, event: Event) -> None:
        """Hand an event over; returns at once and never raises."""
        try:
            with self._lock:
                self._counts["published"] += 1
                if self._state == "live":
                    self._loop.call_soon_threadsafe(self._inbox.put_nowait, event)
                    return
            self._keep([event])
        except Exception as exc:  # noqa: BLE001 - publishing must never break a run
            self._keep([event], error=exc)

    def stats(self) -> PublishStats:
        with self._lock:
            c = self._counts
            return PublishStats(
                url=self.url, mode=self._mode, published=c["published"], delivered=c["delivered"],
                duplicates=c["duplicates"], outboxed=c["outboxed"], lost=c["lost"],
                buffered=c["published"] - c["delivered"] - c["outboxed"] - c["lost"],
                failed_attempts=c["failed"], reconnects=c["reconnects"],
                outbox_path=str(self.outbox.path), last_error=self._last_error,
            )

    def close(self, timeout: float = 5.0) -> PublishStats:
        """Deliver what is pending for up to ``timeout`` s, put the rest in the outbox, stop."""
        with self._lock:
            state = self._state
            self._state = "closing" if state == "live" else "closed"
        if state == "live":
            future = asyncio.run_coroutine_threadsafe(self._drain(timeout), self._loop)
            try:
                future.result(timeout=timeout + self._sender.ack_timeout + 3.0)
            except Exception as exc:  # noqa: BLE001 - whatever happened, keep the events
                self._note_error(exc)
                future.cancel()
            self._stop_loop()
            leftovers = list(self._pending)
            self._pending.clear()
            while self._inbox is not None and not self._inbox.empty():
                item = self._inbox.get_nowait()
                if item is not _WAKE:
                    leftovers.append(item)
            self._keep(leftovers)
            with self._lock:
                self._state = "closed"
        return self.stats()

    def _keep(self, events: list[Event], error: BaseException | None = None) -> None:
        """Write events to the outbox (caller's thread or the loop's; appends are atomic)."""
        if error is not None:
            self._note_error(error)
        for event in events:
            try:
                self.outbox.append(event)
                key = "outboxed"
            except Exception as exc:  # noqa: BLE001 - disk full, no permission, bad payload
                self._note_error(exc)
                log.warning("NATS event %s lost: could not write %s (%s)", event.msg_id, self.outbox.path, exc)
                key = "lost"
            with self._lock:
                self._counts[key] += 1

    def _note_error(self, exc: BaseException) -> None:
        with self._lock:
            self._counts["failed"] += 1
            self._last_error = f"{type(exc).__name__}: {exc}".rstrip(": ")

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._sender.close()

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout=3.0)
        except (concurrent.futures.TimeoutError, RuntimeError, asyncio.CancelledError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=3.0)
        if not thread.is_alive():
            loop.close()

    # -- loop side (the publisher's thread) ----------------------------------------

    async def _open(self) -> list[str]:
        self._inbox = asyncio.Queue()
        self._wake = asyncio.Event()
        notes = await self._sender.connect()
        self._worker = asyncio.ensure_future(self._work())
        return notes

    def _take(self, item) -> None:
        if item is _WAKE:
            return
        if len(self._pending) >= self.max_buffered:
            self._keep([item])  # an outage too long to hold everything in memory
        else:
            self._pending.append(item)

    async def _work(self) -> None:
        backoff, failures_in_a_row = RETRY_MIN_S, 0
        while True:
            while not self._inbox.empty():
                self._take(self._inbox.get_nowait())
            if not self._pending:
                if self._closing:
                    return
                self._take(await self._inbox.get())
                continue
            if self._closing and time.monotonic() >= self._deadline:
                return
            event = self._pending[0]
            try:
                if not self._sender.connected:
                    await self._reconnect()
                duplicate = await self._sender.send(event)
            except Exception as exc:  # noqa: BLE001 - retried with the same msg id
                if _is_permanent(exc):
                    self._pending.popleft()
                    self._keep([event], error=exc)
                    continue
                self._note_error(exc)
                failures_in_a_row += 1
                if failures_in_a_row >= 2 and self._sender.connected:
                    # Still "connected" but nothing gets through (a half-open
                    # socket, a JetStream gone quiet): start afresh.
                    await self._sender.close()
                await self._pause(backoff)
                backoff = min(2 * backoff, RETRY_MAX_S)
                continue
            self._pending.popleft()
            backoff, failures_in_a_row = RETRY_MIN_S, 0
            with self._lock:
                self._counts["delivered"] += 1
                self._counts["duplicates"] += int(duplicate)

    async def _reconnect(self) -> None:
        timeout = self.connect_timeout
        if self._closing:
            timeout = min(timeout, max(0.05, self._deadline - time.monotonic()))
        await self._sender.connect(timeout=timeout)
        with self._lock:
            self._counts["reconnects"] += 1
            self._mode = self._sender.mode
        log.info("NATS %s: connected again, %d event(s) to resend", self.url, len(self._pending))

    async def _pause(self, seconds: float) -> None:
        """Wait before a retry. ``close`` wakes a wait in progress (one more try at
        once); while closing, waits are cut short at the deadline."""
        if self._closing:
            await asyncio.sleep(min(seconds, max(0.0, self._deadline - time.monotonic())))
            return
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _drain(self, timeout: float) -> None:
        self._closing = True
        self._deadline = time.monotonic() + timeout
        self._wake.set()
        self._inbox.put_nowait(_WAKE)
        worker = self._worker
        if worker is not None and not worker.done():
            # A send in flight may outlast the deadline by up to ack_timeout; not more.
            done, _ = await asyncio.wait({worker}, timeout=timeout + self._sender.ack_timeout)
            if not done:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
        await self._sender.close()


def _is_permanent(exc: BaseException) -> bool:
    """Failures that no retry can fix: the event goes to the outbox at once."""
    return type(exc).__name__ in ("MaxPayloadError", "BadSubjectError")
