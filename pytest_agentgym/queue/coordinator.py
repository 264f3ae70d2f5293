"""The pytest side of a work queue: publish work items, collect results.

:class:`QueueCoordinator` takes the engine's place in a run with
``--agentgym-queue``: ``submit(key, request)`` publishes one work item and
returns a future that a result resolves, so the run's items wait for it exactly
as they wait for a local episode, and every record goes through the same
``on_finished`` (episodes.jsonl) and the same item reports (events, gates,
report). Knows nothing of pytest.

Each episode is recorded once: the first acceptable result of its key resolves
it; later ones (a redelivered item played twice, a retried publish) are acked
and dropped. A work item JetStream gave up on (MaxDeliver) becomes a
``harness:WorkerLost`` record. Results that arrived while no coordinator was
there are in the results stream: a resumed run (``--agentgym-resume``) reads
them all before it publishes anything, and takes the scored ones for the
episodes its file does not have scored.

Every work item carries the run's fingerprint; a result played under another one
(or of another version) is never recorded: it is dropped with a note naming the
worker and the difference, and its item published again (queue/meaning.py).
A result counts only from the run's workers and for the run's episodes
(queue/acceptance.py); any other is refused with a note and its item left to the
worker that holds it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from pytest_agentgym.queue import streams
from pytest_agentgym.queue.acceptance import Unheard, unaccepted
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.meaning import RunMeaning, give_up, payload_key, with_worker
from pytest_agentgym.queue.wire import (HEARTBEAT_SUBJECT, MSG_ID_HEADER, Heartbeat, Result, WireError,
                                        WireVersionError, WorkItem, decode, encode)
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

log = logging.getLogger("pytest_agentgym.queue")

Key = tuple[str, int, int]
#: How long a publish of a work item keeps trying through a server restart.
PUBLISH_PATIENCE_S = 60.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class QueueCoordinator:
    def __init__(self, address: QueueAddress, *, run_id: str, generation: int = 1, model: str = "fleet",
                 reconnect_s: float = 60.0, run_dir: str = "", endpoint_kind: str | None = None) -> None:
        self.address = address
        self.run_id = run_id
        self.generation = generation
        self.model = model
        #: the run's fingerprint, the results' check, the refusals (queue/meaning.py)
        self.meaning = RunMeaning(endpoint_kind)
        self.reconnect_s = reconnect_s
        self.run_dir = run_dir
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentgym-queue", daemon=True)
        self._thread.start()
        self._nc: Any = None
        self._js: Any = None
        self._on_finished: Callable[[EpisodeRecord], EpisodeRecord | None] | None = None
        self._futures: dict[Key, concurrent.futures.Future[EpisodeRecord]] = {}
        #: key -> the generation of the work item whose result we wait for
        self._awaited: dict[Key, int] = {}
        self._items: dict[Key, WorkItem] = {}
        #: scored results of earlier generations, not yet asked for (see :meth:`submit`)
        self._unclaimed: dict[Key, Result] = {}
        self._scored_before: set[Key] = set()
        self._tasks: list[asyncio.Task] = []
        #: worker name -> (its last heartbeat, time.monotonic() when it came)
        self.workers: dict[str, tuple[Heartbeat, float]] = {}
        #: results of workers not heard yet, waiting for their heartbeats (see _take)
        self._unheard = Unheard()
        #: what happened, for the run's notes and the tests
        self.stats = {"published": 0, "adopted": 0, "results": 0, "duplicates": 0, "collected": 0,
                      "worker_lost": 0, "refused": 0, "dropped": 0, "reissued": 0, "unaccepted": 0}
        self.closed_reason: str | None = None
        self._closing = False

    # -- the loop thread ---------------------------------------------------------------

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def connect(self) -> None:
        """Connect, create the streams and the workers' consumer, listen for heartbeats
        and the MaxDeliver advisory. Raises :class:`streams.QueueUnavailable`."""
        self._call(self._connect())

    async def _connect(self) -> None:
        self._nc = await streams.connect(self.address, name=f"pytest-agentgym coordinator {self.run_id}",
                                         reconnect_s=self.reconnect_s, on_closed=self._connection_closed,
                                         door="coordinator")
        self._js = self._nc.jetstream(timeout=streams.API_TIMEOUT_S)
        await streams.ensure_streams(self._js, self.address)
        await streams.ensure_workers_consumer(self._js, self.address)
        await self._nc.subscribe(HEARTBEAT_SUBJECT, cb=self._heartbeat)
        await self._nc.subscribe(self.address.max_deliveries_advisory(), cb=self._max_deliveries)
        await self._nc.subscribe(self.address.refusal_subject(self.run_id), cb=self._refused)
        await self._nc.flush()

    def adopt_fingerprint(self, fp: dict[str, Any]) -> dict[str, Any]:
        """The run's fingerprint as every work item will carry it (:meth:`RunMeaning.adopt`);
        call before the first :meth:`submit`."""
        return self.meaning.adopt(fp)

    def notes(self) -> tuple[str, ...]:
        """The refusals and dropped results of the run so far, for run.json's notes."""
        return self.meaning.notes()

    def roll_call(self, wait_s: float = 1.0) -> list[Heartbeat]:
        """Ask every worker of the queue for a heartbeat; the ones heard within ``wait_s``."""
        return self._call(self._roll_call(wait_s))

    async def _roll_call(self, wait_s: float) -> list[Heartbeat]:
        asked = time.monotonic()
        await self._nc.publish(self.address.ping_subject, b"")
        await self._nc.flush()
        await asyncio.sleep(wait_s)  # replies come as heartbeats; a roll call lasts this long
        return [hb for hb, at in self.workers.values() if at >= asked]

    # -- starting: what the stream already holds --------------------------------------------

    def start(self, on_finished: Callable[[EpisodeRecord], EpisodeRecord | None], *,
              scored_keys: set[Key] = frozenset()) -> None:
        """Read every result the stream holds for this run (a resumed run's earlier
        coordinators' included), then keep reading new ones."""
        self._on_finished = on_finished
        self._scored_before = set(scored_keys)
        self._call(self._start())

    async def _start(self) -> None:
        name = await streams.fresh_coordinator_consumer(self._js, self.address, self.run_id)
        sub = await self._js.pull_subscribe_bind(name, self.address.results_stream)
        info = await sub.consumer_info()
        stored = info.num_pending
        while stored > 0:
            try:
                msgs = await sub.fetch(min(stored, 256), timeout=5)
            except asyncio.TimeoutError:
                break
            for msg in msgs:
                await self._result(msg)
            stored -= len(msgs)
        self._tasks.append(asyncio.ensure_future(self._consume(sub)))

    async def _consume(self, sub: Any) -> None:
        while True:
            try:
                msgs = await sub.fetch(64, timeout=1.0)
            except asyncio.TimeoutError:
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a reconnecting connection; try again
                log.debug("results fetch: %s", exc)
                await asyncio.sleep(0.2)
                continue
            for msg in msgs:
                await self._result(msg)

    # -- results -----------------------------------------------------------------------------

    async def _result(self, msg: Any) -> None:
        try:
            payload = decode(msg.data, msg.headers)
            result = Result.from_payload(payload)
        except WireVersionError as exc:
            self._drop(str(payload.get("worker", "?")), [str(exc)], payload_key(payload), None)
            await _ack(msg)
            return
        except WireError as exc:
            log.warning("dropped a malformed result on %s: %s", msg.subject, exc)
            await _ack(msg)
            return
        self.stats["results"] += 1
        self._take(result, msg.subject)
        await _ack(msg)

    def _take(self, result: Result, subject: str, *, waited: bool = False) -> None:
        """Record ``result`` when it is the first acceptable one of an awaited episode. In a
        run (its fingerprint adopted), one that does not count (queue/acceptance.py) is
        refused: counted in the notes, nothing recorded, its item left to the worker that
        holds it; one from a worker not heard yet waits for its heartbeat first."""
        record, key = result.record, result.record.key
        if self.meaning.fingerprint is not None:
            if result.worker not in self.workers and not waited:
                self._tasks.append(asyncio.ensure_future(self._vouch(result, subject)))
                return
            heard = self.workers.get(result.worker)
            reasons = unaccepted(result, run_id=self.run_id, run=self.meaning.fingerprint, queue=self.address.name,
                                 beat=heard[0] if heard else None, came_on=subject, expected_on=self.address
                                 .result_subject(self.run_id, record.env, record.task_index, record.repeat))
            if reasons:
                self.stats["unaccepted"] += 1
                self.meaning.refused_result(result.worker, reasons)
                log.warning("refused a result from worker %s: %s", result.worker, "; ".join(reasons))
                return
        future = self._futures.get(key)
        item = self._items.get(key)
        problems = self.meaning.problems(item.fingerprint if item else None, result) \
            if record.run_id == self.run_id else []
        if problems:
            self._drop(result.worker, problems, key, result.reissue)
        elif record.run_id != self.run_id or (future is not None and future.done()):
            self.stats["duplicates"] += 1
        elif future is not None and result.generation >= self._awaited.get(key, self.generation):
            self.meaning.recorded(result)
            self._resolve(key, with_worker(record, result.worker))
        elif (result.generation < self.generation and record.error is None
              and key not in self._scored_before and key not in self._unclaimed):
            self._unclaimed[key] = result  # a result that came while no coordinator was there
        else:
            self.stats["duplicates"] += 1

    async def _vouch(self, result: Result, subject: str) -> None:
        """Judge ``result`` once its worker's heartbeat is heard, or after VOUCH_S without one
        (a roll call asks for it: a worker that started a moment ago answers)."""
        entry = await self._unheard.wait(result.worker, (result, subject), self._ping)
        if entry is not None:
            self._take(*entry, waited=True)

    async def _ping(self) -> None:
        try:
            await self._nc.publish(self.address.ping_subject, b"")
        except Exception as exc:  # noqa: BLE001 - reconnecting: its periodic heartbeat may still come
            log.debug("roll call: %s", exc)

    def _drop(self, worker: str, reasons: list[str], key: Key | None, reissue: int | None) -> None:
        """Record nothing of a result played under another fingerprint; name it in the notes,
        and publish its item again when it was the one awaited (its worker acked it)."""
        self.stats["dropped"] += 1
        self.meaning.dropped_result(worker, reasons)
        log.warning("dropped a result from worker %s: %s", worker, "; ".join(reasons))
        item = self._items.get(key) if key is not None else None
        future = self._futures.get(key) if key is not None else None
        if item is None or future is None or future.done() or (reissue is not None and reissue != item.reissue):
            return
        if item.reissue >= self.address.max_deliver:  # workers that do not check (older versions)
            self._resolve(item.key, self._lost(item, "FingerprintMismatch", give_up(item.reissue, worker, reasons)))
            return
        again = dataclasses.replace(item, reissue=item.reissue + 1)
        self._items[item.key] = again
        self.stats["reissued"] += 1
        subject = self.address.work_subject(item.run_id, item.env, item.task_index, item.repeat)
        self._tasks.append(asyncio.ensure_future(self._publish(subject, again, future)))

    async def _refused(self, msg: Any) -> None:
        if self.meaning.refused(msg.data, msg.headers, self.run_id):
            self.stats["refused"] += 1

    def _resolve(self, key: Key, record: EpisodeRecord) -> None:
        future = self._futures[key]
        if future.done():
            return
        try:
            written = self._on_finished(record) if self._on_finished is not None else record
            future.set_result(written or record)
        except Exception as exc:  # noqa: BLE001 - e.g. the results file cannot be written
            future.set_exception(exc)

    # -- submitting ---------------------------------------------------------------------------

    def forget(self, key: str) -> None:
        """The engine's hook for dropping a taken record (``Engine.forget``). The coordinator
        keeps its futures: they deduplicate results that arrive late or twice, and count the
        episodes each worker played for the report."""

    def submit(self, key: str, request: Any) -> concurrent.futures.Future[EpisodeRecord]:
        """Publish the work item of ``request`` once; its future resolves with the record."""
        env, sampling = request.spec.name, dict(request.sampling)
        meaning = self.meaning.for_episode(env, max_rounds=request.limits.max_rounds, sampling=sampling)
        item = WorkItem(run_id=request.run_id, env=env, task_index=request.task_index,
                        repeat=request.repeat, generation=self.generation,
                        max_rounds=request.limits.max_rounds, timeout_s=request.limits.timeout_s,
                        retries=request.limits.retries, min_reward=request.min_reward, nodeid=request.nodeid,
                        checkpoint=request.checkpoint, sampling=sampling, fingerprint=meaning)
        return self._call(self._submit(item))

    async def _submit(self, item: WorkItem) -> concurrent.futures.Future[EpisodeRecord]:
        key = item.key
        if key in self._futures:
            return self._futures[key]
        future: concurrent.futures.Future[EpisodeRecord] = concurrent.futures.Future()
        self._futures[key] = future
        self._items[key] = item
        if self.closed_reason is not None:
            self._resolve(key, self._lost(item, "QueueUnavailable", self.closed_reason))
            return future
        stored = self._unclaimed.pop(key, None)
        if stored is not None:
            self.stats["collected"] += 1
            self.meaning.recorded(stored)
            self._resolve(key, with_worker(stored.record, stored.worker))
            return future
        subject = self.address.work_subject(item.run_id, item.env, item.task_index, item.repeat)
        if self.generation > 1:  # an earlier coordinator's item may still wait for a worker
            pending = await streams.last_on_subject(self._js, self.address.work_stream, subject)
            if pending is not None:
                try:
                    self._awaited[key] = WorkItem.from_payload(decode(pending.data, pending.headers)).generation
                    self.stats["adopted"] += 1
                    return future
                except WireError:
                    pass
        self._awaited[key] = item.generation
        await self._publish(subject, item, future)
        return future

    async def _publish(self, subject: str, item: WorkItem, future: concurrent.futures.Future) -> None:
        data, headers = encode(item.to_payload())
        deadline = time.monotonic() + PUBLISH_PATIENCE_S
        while True:
            try:
                await self._js.publish(subject, data, headers={**headers, MSG_ID_HEADER: item.msg_id},
                                       timeout=streams.API_TIMEOUT_S)
                self.stats["published"] += 1
                return
            except Exception as exc:  # noqa: BLE001 - the same msg id makes the retry safe
                if time.monotonic() > deadline or self.closed_reason is not None:
                    self._resolve(item.key, self._lost(item, "QueueUnavailable",
                                                       f"could not publish the work item: {exc}"))
                    return
                await asyncio.sleep(0.5)

    # -- what JetStream and the workers tell ---------------------------------------------------

    async def _max_deliveries(self, msg: Any) -> None:
        """JetStream gave up on a work item after MaxDeliver deliveries."""
        try:
            advisory = json.loads(msg.data)
            seq = int(advisory["stream_seq"])
            stored = await self._js.get_msg(self.address.work_stream, seq)
            item = WorkItem.from_payload(decode(stored.data, stored.headers))
        except Exception as exc:  # noqa: BLE001 - gone already, or not ours to read
            log.debug("max deliveries advisory: %s", exc)
            return
        if item.run_id != self.run_id:
            return
        future = self._futures.get(item.key)
        if future is not None and not future.done():
            self.stats["worker_lost"] += 1
            deliveries = advisory.get("deliveries", self.address.max_deliver)
            self._resolve(item.key, self._lost(item, "WorkerLost", (
                f"the work item was delivered {deliveries} time(s) (MaxDeliver {self.address.max_deliver}) "
                f"and no worker returned a result within AckWait ({self.address.ack_wait_s:g} s) of "
                f"its last delivery: the workers that took it died, or none could serve {item.env}; see "
                f"the workers' logs, then resume the run to play it again")))
        try:
            await self._js.delete_msg(self.address.work_stream, seq)
        except Exception as exc:  # noqa: BLE001 - another coordinator deleted it
            log.debug("delete work item %s: %s", seq, exc)

    async def _heartbeat(self, msg: Any) -> None:
        try:
            beat = Heartbeat.from_payload(json.loads(msg.data))
        except ValueError:
            return
        if beat is not None and beat.queue == self.address.name:
            self.workers[beat.worker] = (beat, time.monotonic())
            self._unheard.heard(beat.worker)

    async def _connection_closed(self) -> None:
        """The server stayed away longer than the reconnect window: every episode still
        waiting becomes an error; results workers publish later wait in the stream."""
        if self._closing:
            return
        self.closed_reason = (f"lost NATS at {self.address.server} for more than {self.reconnect_s:g} s; "
                              f"results that workers publish stay in stream {self.address.results_stream}: "
                              f"resume the run (--agentgym-resume={self.run_dir or 'RUN_DIR'}) to collect them")
        for key, future in list(self._futures.items()):
            if not future.done():
                self._resolve(key, self._lost(self._items[key], "QueueUnavailable", self.closed_reason))

    def _lost(self, item: WorkItem, kind: str, message: str) -> EpisodeRecord:
        return EpisodeRecord.errored(
            item.run_id, item.env, item.task_index, item.repeat, ErrorInfo(kind, message, "harness"),
            started_at=_now(), model=self.model, nodeid=item.nodeid, checkpoint=item.checkpoint,
            min_reward=item.min_reward, max_rounds=item.max_rounds, sampling=dict(item.sampling))

    # -- the end ---------------------------------------------------------------------------------

    def episodes_by_worker(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for future in self._futures.values():
            if future.done() and future.exception() is None:
                worker = future.result().worker or "(none)"
                counts[worker] = counts.get(worker, 0) + 1
        return dict(sorted(counts.items()))

    def close(self, timeout: float = 10.0) -> None:
        """Stop reading results, delete this run's results consumer, close the connection."""
        if not self._loop.is_running():
            return
        self._closing = True
        for future in self._futures.values():
            future.cancel()
        try:
            self._call(self._aclose(), timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    async def _aclose(self) -> None:
        for entry in self._unheard.left():  # judged now, so that the notes count them
            self._take(*entry, waited=True)
        for task in self._tasks:
            task.cancel()
        nc, self._nc = self._nc, None
        if nc is None or nc.is_closed:
            return
        try:
            if self._on_finished is not None:
                await self._js.delete_consumer(self.address.results_stream,
                                               self.address.coordinator_consumer(self.run_id))
        except Exception as exc:  # noqa: BLE001 - the results stay in the stream either way
            log.debug("delete results consumer: %s", exc)
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass


async def _ack(msg: Any) -> None:
    try:
        await msg.ack()
    except Exception as exc:  # noqa: BLE001 - redelivered later and dropped as a duplicate
        log.debug("ack of a result: %s", exc)
