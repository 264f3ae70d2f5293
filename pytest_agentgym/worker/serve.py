"""`pytest-agentgym worker`: pull episodes from a work queue and play them here.

A worker is the engine (not pytest) with its own node profile: it chooses the
profile's model endpoint and starts (or attaches to) its environment servers as
a run would, then takes work items from the queue's durable pull consumer, up
to ``--concurrency`` at once. For each item it

1. naks it with a delay when it cannot serve the environment (not in its
   profile, or its server would not start), so another worker takes it; the
   delay is ``--nak-delay`` times a random factor between 0.5 and 1.5
   (:func:`nak_delay`);
2. naks it the same way, saying why in its output and on the queue's refusal
   subject, when it would not play it under the run's fingerprint (the item's
   ``fingerprint``: model, endpoint kind, checkpoint, sampling sent, prompt hash,
   rounds, plugin version; the server only when the item names one) or the item
   is of another wire version;
3. acks it at once when the results stream already holds its result (the ack of
   an earlier delivery was lost, e.g. across a server restart);
4. plays the episode, sending an in-progress ack every third of AckWait;
5. publishes the record with its own fingerprint to the results stream (msg id:
   episode + generation + reissue + delivery; a publish retried through a
   reconnect is stored once) and acks the item only once the result is stored.

A worker that dies takes no item with it: JetStream redelivers what it did not
ack after AckWait. SIGTERM or Ctrl-C: stop taking work, nak what is in flight
(no delay), exit 0. Every ``heartbeat_s`` (and when the coordinator calls the
roll) it publishes a heartbeat on ``agentgym.field.status.v1``: its load, the episodes it
played, the runs it serves (``pytest-agentgym fleet`` shows them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable

from pytest_agentgym.queue import streams
from pytest_agentgym.queue.acceptance import played_before
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.meaning import worker_fingerprint
from pytest_agentgym.queue.wire import (HEARTBEAT_SUBJECT, MSG_ID_HEADER, RECENT_RUN_S, Heartbeat, Refusal, Result,
                                        WireError, WireVersionError, WorkItem, decode, encode)
from pytest_agentgym.results.fingerprint import episode_differences

log = logging.getLogger("pytest_agentgym.worker.serve")


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    address: QueueAddress
    name: str
    concurrency: int
    log_dir: Path
    reconnect_s: float = 60.0
    heartbeat_s: float = 10.0
    nak_delay_s: float = 5.0


def nak_delay(base_s: float, rng: random.Random | None = None) -> float:
    """The redelivery delay of an item this worker cannot serve: ``base_s`` times a
    random factor in [0.5, 1.5).

    Not a fixed delay: JetStream hands an item that comes back to the oldest waiting
    pull request. Two workers that each hold an item only the other one serves, naking
    them with one fixed delay, fall into step: both items come back at the same moment,
    go to the waiting pulls in the same order as last time, so each worker gets back the
    item it has just naked, again and again until MaxDeliver makes it WorkerLost. A
    random delay lets the items come back at different moments, each time to whichever
    worker pulls then."""
    return base_s * (0.5 + (rng or random).random())


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    def __init__(self, config: WorkerConfig, settings: Any, *, say: Callable[[str], None] = print) -> None:
        from pytest_agentgym.run.services import RunResources

        self.config = config
        self.settings = settings
        self.say = say
        self.resources = RunResources(settings, log_dir=config.log_dir)
        self.served = tuple(n for n in settings.env_specs if n not in settings.skip_envs)
        self._adapters: dict[str, Any] = {}
        self._inflight: dict[int, Any] = {}  # id(msg) -> msg
        self._inflight_runs: dict[int, str] = {}  # id(msg) -> the run of its work item
        self._finished_runs: dict[str, float] = {}  # run id -> when its last episode here was played (monotonic)
        self._stopping = asyncio.Event()
        self._starting = asyncio.Lock()
        self.stop_reason: str | None = None
        self.played = 0
        self._nc: Any = None
        self._js: Any = None
        self._ack_wait = config.address.ack_wait_s
        self._model = "unknown"
        self._chosen: Any = None
        self._said: set[tuple[str, tuple[str, ...]]] = set()  # refusals said once per run and reasons

    # -- starting ------------------------------------------------------------------------

    def _adapter(self, env: str) -> Any:
        if env not in self._adapters:
            from pytest_agentgym.envs import adapter_class

            self._adapters[env] = adapter_class(env)(self.settings.spec(env).prompt_template)
        return self._adapters[env]

    async def run(self) -> int:
        """Serve until stopped; 0 after SIGTERM/SIGINT, 1 when NATS went away for good, 2
        when the worker could not start."""
        try:  # the queue first: no model is launched for a queue that is not there
            self._nc = await streams.connect(self.config.address, name=f"pytest-agentgym worker {self.config.name}",
                                             reconnect_s=self.config.reconnect_s, on_closed=self._closed, door="worker")
            self._js = self._nc.jetstream(timeout=streams.API_TIMEOUT_S)
            await streams.ensure_streams(self._js, self.config.address)
        except streams.QueueUnavailable as exc:
            self.say(f"worker {self.config.name}: {exc}")
            return 2
        chosen = await asyncio.to_thread(self.resources.endpoint_or_error)
        if chosen is None:
            self.say(f"worker {self.config.name}: no model endpoint: {self.resources.setup_error.message}")
            await self._nc.close()
            return 2
        self._model, self._chosen = chosen.model, chosen
        self.resources.start_engine(self._adapters, concurrency=self.config.concurrency, on_finished=lambda r: r)
        sub = await self._bind()
        self._install_signals()
        await self._nc.subscribe(self.config.address.ping_subject, cb=self._pinged)
        beats = asyncio.ensure_future(self._heartbeats())
        self.say(f"worker {self.config.name}: serving {self.config.address.describe()} with "
                 f"{self.config.concurrency} slot(s); node {self.settings.node}, model {chosen.model} via "
                 f"{chosen.kind}; environments {', '.join(self.served)}")
        try:
            await self._pull(sub)
        finally:
            beats.cancel()
            await self._wind_down()
        return 1 if self.stop_reason and self.stop_reason.startswith("lost") else 0

    async def _bind(self) -> Any:
        """The workers' consumer (made with this worker's AckWait and MaxDeliver when no
        coordinator made it first; never changed here)."""
        from nats.js.errors import NotFoundError

        address = self.config.address
        try:
            info = await self._js.consumer_info(address.work_stream, address.workers_consumer)
        except NotFoundError:
            await streams.ensure_workers_consumer(self._js, address)
            info = await self._js.consumer_info(address.work_stream, address.workers_consumer)
        self._ack_wait = float(info.config.ack_wait or address.ack_wait_s)
        return await self._js.pull_subscribe_bind(address.workers_consumer, address.work_stream)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.stop, f"signal {signal.Signals(sig).name}")
            except (NotImplementedError, RuntimeError):  # not the main thread
                pass

    def stop(self, reason: str = "stopped") -> None:
        self.stop_reason = self.stop_reason or reason
        self._stopping.set()

    async def _closed(self) -> None:
        self.stop(f"lost NATS at {self.config.address.server} for more than {self.config.reconnect_s:g} s")

    # -- pulling -------------------------------------------------------------------------

    async def _pull(self, sub: Any) -> None:
        slot_freed = asyncio.Event()
        tasks: set[asyncio.Task] = set()
        while not self._stopping.is_set():
            free = self.config.concurrency - len(tasks)
            if free <= 0:
                slot_freed.clear()
                await streams.first(slot_freed.wait(), self._stopping.wait())
                continue
            try:
                msgs = await sub.fetch(free, timeout=1.0)
            except asyncio.TimeoutError:
                continue
            except Exception as exc:  # noqa: BLE001 - reconnecting: try again shortly
                log.debug("fetch: %s", exc)
                await streams.first(asyncio.sleep(0.5), self._stopping.wait())
                continue
            for msg in msgs:
                task = asyncio.ensure_future(self._handle(msg))
                tasks.add(task)
                task.add_done_callback(lambda t: (tasks.discard(t), slot_freed.set()))
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _handle(self, msg: Any) -> None:
        self._inflight[id(msg)] = msg
        try:
            await self._serve(msg)
        except asyncio.CancelledError:
            await streams.quietly(msg.nak())  # stopping: another worker takes it now
            raise
        except Exception as exc:  # noqa: BLE001 - never lose the loop; the item is redelivered
            log.exception("work item on %s", msg.subject)
            self.say(f"worker {self.config.name}: could not finish a work item ({type(exc).__name__}: {exc}); "
                     f"it will be redelivered")
        finally:
            self._inflight.pop(id(msg), None)
            self._inflight_runs.pop(id(msg), None)

    async def _serve(self, msg: Any) -> None:
        try:
            payload = decode(msg.data, msg.headers)
            item = WorkItem.from_payload(payload)
        except WireVersionError as exc:  # never read as this version; a worker of its version may take it
            await self._refuse(msg, str(payload.get("run_id", "?")), msg.subject, [str(exc)])
            return
        except WireError as exc:
            self.say(f"worker {self.config.name}: dropped a malformed work item on {msg.subject}: {exc}")
            await msg.term()
            return
        self._inflight_runs[id(msg)] = item.run_id
        delivery = msg.metadata.num_delivered
        progress = asyncio.ensure_future(self._keep_alive(msg))  # a server start may take a while too
        try:
            if not await self._can_serve(item.env):
                await msg.nak(delay=nak_delay(self.config.nak_delay_s))
                return
            mine = self.fingerprint(item)
            differences = episode_differences(item.fingerprint, mine)
            if differences:
                await self._refuse(msg, item.run_id, item.msg_id, differences)
                return
            address = self.config.address
            subject = address.result_subject(item.run_id, item.env, item.task_index, item.repeat)
            stored = await streams.last_on_subject(self._js, address.results_stream, subject)
            if stored is not None and played_before(stored, item, worker=self.config.name, model=self._model):
                await msg.ack_sync(timeout=streams.API_TIMEOUT_S)  # played before; only the ack was lost
                return
            log.info("playing %s delivery %d", item.msg_id, delivery)
            key = f"{item.msg_id}:a{delivery}"
            try:
                record = await asyncio.wrap_future(self.resources.engine.submit(key, self._request(item)))
            finally:
                self.resources.engine.forget(key)
            record = dataclasses.replace(record, worker=self.config.name, generation=item.generation)
            await self._publish(Result(record, self.config.name, delivery, item.generation, mine, item.reissue),
                                subject, item)
            await msg.ack_sync(timeout=streams.API_TIMEOUT_S)
        finally:
            progress.cancel()
        self.played += 1
        self._finished_runs[item.run_id] = time.monotonic()
        log.info("played %s delivery %d", item.msg_id, delivery)
        self.say(f"worker {self.config.name}: {item.nodeid or item.msg_id} (run {item.run_id}): {record.outcome}, "
                 f"reward {record.reward}, {record.duration_s:.1f} s (delivery {delivery})")

    async def _can_serve(self, env: str) -> bool:
        if env not in self.served:
            log.info("naked %s: not served by node %s", env, self.settings.node)
            return False
        async with self._starting:  # one start per server, however many items wait on it
            await asyncio.to_thread(self.resources.start_envs, [env])
        if env in self.resources.env_errors:
            log.info("naked %s: %s", env, self.resources.env_errors[env].message)
            return False
        self._adapter(env)
        return True

    def fingerprint(self, item: WorkItem) -> dict[str, Any]:
        """This worker's fingerprint for the item's episode (its environment's server started)."""
        chosen = self._chosen
        return worker_fingerprint(item, model=chosen.model, endpoint_kind=chosen.kind,
                                  checkpoint=getattr(chosen.config, "checkpoint", None),
                                  node_sampling=self.resources.node_sampling(),
                                  prompt_sha256=self._adapter(item.env).prompt_sha256,
                                  server=self.resources.server_identities.get(item.env),
                                  data_note=self.resources.data_notes.get(item.env))

    async def _refuse(self, msg: Any, run_id: str, what: str, reasons: list[str]) -> None:
        """Nak an item this worker will not play under the run's fingerprint, and say why: in its
        output (once per run and reasons), its log and to the run's coordinator."""
        await msg.nak(delay=nak_delay(self.config.nak_delay_s))
        log.info("refused %s of run %s: %s", what, run_id, "; ".join(reasons))
        if (run_id, tuple(reasons)) not in self._said:
            self._said.add((run_id, tuple(reasons)))
            self.say(f"worker {self.config.name}: refused work items of run {run_id} (naked for a worker that "
                     f"honours the run): " + "; ".join(reasons))
        from pytest_agentgym import __version__

        refusal = Refusal(worker=self.config.name, run_id=run_id, item=what, reasons=tuple(reasons),
                          node=self.settings.node, version=__version__)
        data, headers = encode(refusal.to_payload())
        subject = self.config.address.refusal_subject(run_id)
        await streams.quietly(self._nc.publish(subject, data, headers=headers or None))

    def _request(self, item: WorkItem) -> Any:
        """The item's episode as the coordinator decided it (run/requests.py ``build``)."""
        from pytest_agentgym.run.requests import build

        return build(run_id=item.run_id, spec=self.settings.spec(item.env), task_index=item.task_index,
                     repeat=item.repeat, max_rounds=item.max_rounds, timeout_s=item.timeout_s,
                     retries=item.retries, sampling=item.sampling, min_reward=item.min_reward,
                     nodeid=item.nodeid, node=self.settings.node, checkpoint=item.checkpoint)

    async def _keep_alive(self, msg: Any) -> None:
        """In-progress acks while the episode runs: JetStream restarts AckWait on each."""
        while True:
            await asyncio.sleep(max(0.2, self._ack_wait / 3))
            await streams.quietly(msg.in_progress())

    async def _publish(self, result: Result, subject: str, item: WorkItem) -> None:
        """Get the result stored, retrying through a reconnect (same msg id: stored once).

        A msg id is predictable, so someone else may have stored a message under it first
        (JetStream then answers "duplicate" and drops ours): when the message stored under
        it is not this worker's own result of ``item``, the result goes again under a msg
        id of its own, so a squatted id cannot make an episode wait forever."""
        data, headers = encode(result.to_payload())
        msg_id = result.msg_id()
        deadline = time.monotonic() + self.config.reconnect_s
        while True:
            try:
                ack = await self._js.publish(subject, data, headers={**headers, MSG_ID_HEADER: msg_id},
                                             timeout=streams.API_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - unstored: the item stays unacked and comes back
                if time.monotonic() > deadline or self._nc.is_closed:
                    raise
                log.debug("publish result: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if not getattr(ack, "duplicate", False) or await self._stored_is_mine(ack, item):
                return
            msg_id = f"{result.msg_id()}:w{os.urandom(4).hex()}"
            log.warning("msg id %s of %s was taken by another message; publishing as %s",
                        result.msg_id(), item.msg_id, msg_id)

    async def _stored_is_mine(self, ack: Any, item: WorkItem) -> bool:
        try:
            stored = await self._js.get_msg(ack.stream, ack.seq)
        except Exception:  # noqa: BLE001 - cannot tell: publish under an id of our own
            return False
        return played_before(stored, item, worker=self.config.name, model=self._model)

    # -- heartbeats ------------------------------------------------------------------------

    def heartbeat(self, state: str = "serving") -> Heartbeat:
        from pytest_agentgym import __version__

        chosen = self._chosen
        return Heartbeat(worker=self.config.name, queue=self.config.address.name, profile=self.settings.node,
                         model=self._model, capacity=self.config.concurrency, load=len(self._inflight),
                         envs=self.served, host=socket.gethostname(), state=state, version=__version__,
                         endpoint_kind=chosen.kind if chosen else "",
                         checkpoint=getattr(chosen.config, "checkpoint", None) if chosen else None,
                         played=self.played, runs=self.runs(), interval_s=self.config.heartbeat_s)

    def runs(self) -> tuple[str, ...]:
        """The runs this worker serves: those of the items it holds, and those it played an
        episode of within RECENT_RUN_S (older ones are forgotten)."""
        now = time.monotonic()
        for run_id, ended in list(self._finished_runs.items()):
            if now - ended > RECENT_RUN_S:
                del self._finished_runs[run_id]
        return tuple(sorted({*self._inflight_runs.values(), *self._finished_runs}))

    async def _beat(self, state: str = "serving") -> None:
        import json

        try:
            await self._nc.publish(HEARTBEAT_SUBJECT, json.dumps(self.heartbeat(state).to_payload()).encode())
        except Exception as exc:  # noqa: BLE001 - a heartbeat lost while reconnecting
            log.debug("heartbeat: %s", exc)

    async def _heartbeats(self) -> None:
        while True:
            await self._beat()
            await asyncio.sleep(self.config.heartbeat_s)

    async def _pinged(self, msg: Any) -> None:
        await self._beat()

    # -- the end ----------------------------------------------------------------------------

    async def _wind_down(self) -> None:
        self.say(f"worker {self.config.name}: stopping ({self.stop_reason}); played {self.played} episode(s)")
        if self._nc is not None and not self._nc.is_closed:
            await self._beat("stopping")
            try:  # the naks of the items in flight go out before the connection closes
                await asyncio.wait_for(self._nc.flush(), 2.0)
                await asyncio.wait_for(self._nc.close(), 2.0)
            except Exception:  # noqa: BLE001 - a dead connection
                pass
        await asyncio.to_thread(self.resources.stop)


def main(*, nats: str, node: str, concurrency: int | None, name: str | None, log_dir: str | None,
         reconnect_s: float, heartbeat_s: float, nak_delay_s: float, command: str,
         replicas: int | str | None = None) -> int:
    """`pytest-agentgym worker`: 0 stopped by a signal, 1 NATS lost, 2 bad input or no start."""
    import sys

    from pytest_agentgym.queue.address import QueueAddressError
    from pytest_agentgym.config.profile import NodeProfile, ProfileError
    from pytest_agentgym.config.settings import for_node

    name = name or default_name()
    logs = Path(log_dir or Path("reports") / "workers" / name).resolve()
    try:
        address = QueueAddress.parse(nats, where="--nats")
        settings = for_node(NodeProfile.load(node, Path.cwd(), flag="--node"), concurrency=concurrency,
                            reports=logs, command=command, replicas=replicas)
    except (QueueAddressError, ProfileError) as exc:
        print(f"pytest-agentgym worker: {exc}", file=sys.stderr)
        return 2
    logs.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(logs / "worker.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("pytest_agentgym")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    config = WorkerConfig(address=address, name=name, concurrency=settings.concurrency, log_dir=logs,
                          reconnect_s=reconnect_s, heartbeat_s=heartbeat_s, nak_delay_s=nak_delay_s)
    worker = Worker(config, settings, say=lambda line: print(line, flush=True))
    return asyncio.run(worker.run())
