"""The rollout service's state: one run directory, the environment servers, and
one engine per model endpoint. Knows nothing of HTTP (app.py serves it) or pytest.

Every rollout is an episode played by :class:`~pytest_agentgym.engine.runner.Engine`,
with the adapters, prompts, retries and failure taxonomy of a pytest run.
A batch names its endpoint (``base_url``, ``model``); the service keeps one
engine per endpoint, each with the node's concurrency. Each finished rollout is
appended to the service's run directory (``reports/<run_id>/episodes.jsonl``,
without its per-token data) and, when the node publishes, sent to NATS as
``agentgym.episode.completed.v1``; at shutdown run.json gets its final status and
report.html is written. Within the run directory an episode's ``repeat`` counts
the rollouts of its (environment, task) so far, so every rollout keeps its own
record.

Two bounds keep the service safe to expose to a trainer it does not control:
its API key goes only to base URLs on its allow-list
(:class:`~pytest_agentgym.rollouts.access.KeyAllowList`; an engine for any other
endpoint sends no key), and at most ``max_queued`` rollouts are queued or
playing at once across every batch (:meth:`RolloutService.submit` refuses one
that would pass it with :class:`QueueFull`), so memory stays bounded whatever
is posted.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import itertools
import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_agentgym.engine.runner import Engine  # the type of the engines kept per endpoint
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.base import EnvAdapter
from pytest_agentgym.engine.episode import EpisodeRequest
from pytest_agentgym.results.aggregate import summaries_record, summarize
from pytest_agentgym.results.fingerprint import server_versions
from pytest_agentgym.results.ledger import RunLedger, final_status, git_commit
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo
from pytest_agentgym.rollouts.access import KeyAllowList
from pytest_agentgym.rollouts.answer import rollout_answer, without_token_data
from pytest_agentgym.rollouts.launched import OwnedVLLM
from pytest_agentgym.rollouts.node import RolloutNode
from pytest_agentgym.run import factory
from pytest_agentgym.run.requests import build
from pytest_agentgym.rollouts.request import MAX_ROLLOUTS, BadRollouts, RolloutBatch

log = logging.getLogger("pytest_agentgym.rollouts")

#: Rollouts queued or playing at once, across every batch (``--max-queued``): two
#: batches of the largest size, one playing and the next waiting. A queued rollout
#: costs about 5 KB of memory before it plays (docs/training.md).
DEFAULT_MAX_QUEUED = 2 * MAX_ROLLOUTS
#: Retry-After bounds, in seconds, for a batch refused as the queue is full.
RETRY_AFTER_S = (1, 300)


class QueueFull(Exception):
    """A batch that would take the rollouts queued past the service's limit (HTTP 429)."""

    def __init__(self, *, queued: int, limit: int, asked: int, retry_after: int) -> None:
        super().__init__(
            f"{queued} rollouts are queued or playing and this service takes at most {limit} at once "
            f"(--max-queued); this batch of {asked} would pass that: send it again in about "
            f"{retry_after} s (Retry-After), or send smaller batches")
        self.queued, self.limit, self.asked, self.retry_after = queued, limit, asked, retry_after


class ServiceStopping(Exception):
    """A batch posted while the service shuts down (HTTP 503)."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Pending:
    """One rollout of a batch: which id and sample, the future of its record, its seed stream."""

    id: int
    sample: int
    future: concurrent.futures.Future[EpisodeRecord]
    stream: dict[str, int] | None = None

    def answer(self) -> dict[str, Any]:
        """The answer of a finished rollout (a cancelled one is a harness error)."""
        try:
            record = self.future.result(timeout=0)
        except concurrent.futures.CancelledError:
            return self._failed("Cancelled", "the rollout service stopped before this rollout finished")
        except Exception as exc:  # noqa: BLE001 - a bug in the harness: say so in this rollout only
            return self._failed(type(exc).__name__, f"the harness failed on this rollout: {exc}")
        return rollout_answer(record, id=self.id, sample=self.sample, stream=self.stream)

    def _failed(self, kind: str, message: str) -> dict[str, Any]:
        return {"id": self.id, "sample": self.sample, "reward": None, "success": False, "messages": [],
                "error": {"type": kind, "message": message, "where": "harness"}}


class RolloutService:
    def __init__(self, node: RolloutNode, *, reports: Path, run_id: str | None = None,
                 api_key_env: str | None = None, key_allow_list: KeyAllowList | None = None,
                 max_queued: int = DEFAULT_MAX_QUEUED, checkpoint: str | None = None,
                 command: str = "pytest-agentgym rollout-server") -> None:
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1:
            raise ValueError(f"--max-queued must be a whole number >= 1, got {max_queued!r}")
        self.node = node
        #: the variable holding the service's API key (None: it holds none, and sends none)
        self.api_key_env = api_key_env
        #: where that key may go: by default the node's model endpoints only
        self.key_allow_list = key_allow_list or KeyAllowList(node.model_urls)
        self.max_queued = max_queued
        #: rollouts accepted and not finished (queued or playing), and the most there ever were
        self.queued = 0
        self.queued_peak = 0
        self._finish_times: collections.deque[float] = collections.deque(maxlen=200)
        #: set once the service stops taking work (SIGTERM): what is queued then is cancelled
        self.stopping = False
        self.interrupted = False
        self.run_id = run_id or "rollouts-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        # LedgerError when the id is taken or its directory is in use
        self.ledger = RunLedger.new(Path(reports).resolve(), self.run_id, run_id_flag="--run-id")
        self.command = command
        #: vLLM on ``checkpoint`` (--checkpoint): launched by start(), stopped by close()
        self.launched = OwnedVLLM(node, checkpoint) if checkpoint is not None else None
        #: env -> the URLs of its servers, replica 0 first
        self.env_urls: dict[str, tuple[str, ...]] = {}
        self.env_errors: dict[str, ErrorInfo] = {}
        self.adapters: dict[str, EnvAdapter] = {}
        self._engines: dict[tuple[str, str], Engine] = {}
        self._pool: Any = None
        self._publisher: Any = None
        self._lock = threading.Lock()
        self._env_lock = threading.Lock()
        self._repeats: dict[tuple[str, int], int] = {}
        self._keys = itertools.count(1)
        self._batches = itertools.count(1)
        self.finished = 0
        #: why a record could not be appended to episodes.jsonl (the rollout is still answered)
        self.write_error: str | None = None
        self.closed = False

    @property
    def run_dir(self) -> Path:
        return self.ledger.run_dir.path

    # -- start and stop -----------------------------------------------------------------

    def start(self) -> list[str]:
        """Write run.json (status running), launch vLLM on the checkpoint (raises its
        LaunchError, noted in run.json) and connect to NATS when the node publishes;
        returns lines worth printing."""
        from pytest_agentgym import __version__
        from pytest_agentgym.results.store import point_latest

        self.ledger.open_log()
        info = RunInfo(
            run_id=self.run_id, started_at=_now(), node=self.node.name, model="per batch",
            endpoint="per batch", endpoint_kind="openai", environments=tuple(self.node.served()),
            command=self.command, checkpoint=self.launched and self.launched.checkpoint,
            settings={"node_file": str(self.node.file), "concurrency": self.node.concurrency,
                      "servers_mode": self.node.servers_mode, "nats": self.node.nats},
            versions={"pytest-agentgym": __version__}, git_commit=git_commit(),
            notes=("rollout service: each batch names its model endpoint; repeats count the rollouts "
                   "of each task",))
        self.ledger.begin(info)
        point_latest(self.run_dir.parent, self.run_id)
        lines = [f"run directory: {self.run_dir}"]
        if self.launched is not None:
            lines += self.launched.start(self.ledger)
        if self.node.nats:
            from pytest_agentgym.results.events import field_status
            from pytest_agentgym.publish.publisher import EventPublisher

            self._publisher = EventPublisher(self.node.nats, self.run_dir / "outbox.jsonl",
                                             create_stream=self.node.create_stream)
            lines += list(self._publisher.start() or [])
            self._publisher.publish(field_status(self.ledger.info, "started", {}))
        return lines

    def stop(self) -> None:
        """Take no more work and cancel every rollout queued or playing (each is answered
        as cancelled, so no caller waits on it); the run is ``interrupted`` when there
        were any. Idempotent; :meth:`close` calls it first."""
        with self._lock:
            if self.stopping:
                return
            self.stopping = True
            self.interrupted = self.queued > 0
            engines = list(self._engines.values())
        for engine in engines:
            engine.close()

    def close(self) -> None:
        """Stop the engines (cancelling what runs), write run.json's final state and the
        report, close NATS, stop the servers started here. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.stop()
        records = self.ledger.records()
        status = final_status(records, interrupted=self.interrupted)  # interrupted even before any finished
        counts = {"episodes": len(records), "errors": sum(1 for r in records if r.error is not None),
                  "duplicates": len(getattr(records, "duplicates", ()))}
        models = sorted({r.model for r in records}) or ["none"]
        info = dataclasses.replace(self.ledger.info, ended_at=_now(), status=status, counts=counts,
                                   summaries=summaries_record(summarize(records)), model=", ".join(models),
                                   environments=tuple(sorted({r.env for r in records})) or self.ledger.info.environments,
                                   versions={**self.ledger.info.versions, **server_versions(self.env_urls)})
        try:
            self.ledger.write(info)
        except OSError as exc:
            log.error("run.json could not be written: %s", exc)
        if records:
            try:
                from pytest_agentgym.report.render import render_run_dir

                render_run_dir(self.run_dir)
            except Exception:  # noqa: BLE001 - the records are safe; say what went wrong
                log.exception("the report of %s could not be written", self.run_dir)
        if self._publisher is not None:
            from pytest_agentgym.results.events import field_status

            self._publisher.publish(field_status(info, status, counts))
            self._publisher.close(timeout=5.0)
        with self._env_lock:  # no server is being started meanwhile
            if self._pool is not None:
                self._pool.stop_all()
        if self.launched is not None:
            self.launched.close()  # vLLM on --checkpoint, after the engines that used it
        self.ledger.close_log()
        self.ledger.release()

    # -- environment servers ------------------------------------------------------------

    def ensure_env(self, name: str) -> ErrorInfo | None:
        """Start or attach to ``name``'s server (blocking; once); its error if it cannot be had."""
        from pytest_agentgym.process.errors import ServerError
        from pytest_agentgym.run import factory

        with self._env_lock:
            if name not in self.adapters:
                self.adapters[name] = adapter_class(name)(self.node.specs[name].prompt_template)
            if name in self.env_urls or self.stopping:  # stopping: submit cancels the batch
                return None
            if self._pool is None:
                self._pool = factory.server_pool(self.node.specs, self.node.servers_mode, self.ledger.run_dir.logs,
                                                 replicas=self.node.replicas, concurrency=self.node.concurrency)
            try:
                self.env_urls[name] = self._pool.urls(name)
            except (ServerError, OSError) as exc:
                return ErrorInfo.from_exception(exc, "env")  # tried again by the next batch
            note = self._pool.data_note(name)  # (the project's WebShop catalogue: not comparable)
            if note and note not in self.ledger.info.notes:
                self.ledger.write(dataclasses.replace(self.ledger.info, notes=self.ledger.info.notes + (note,)))
                log.warning("%s", note)
            return None

    async def _before_retry(self, env: str, error: ErrorInfo) -> None:
        """Restart a spawned server that died before an episode is tried again."""
        if self._pool is not None and error.where == "env":
            await asyncio.to_thread(self._pool.ensure, env)

    # -- engines --------------------------------------------------------------------------

    def key_env_for(self, base_url: str) -> str | None:
        """The variable of the key to send to ``base_url``: the service's, when the URL is
        on its allow-list; None (no key sent) otherwise."""
        if self.api_key_env and self.key_allow_list.allows(base_url):
            return self.api_key_env
        return None

    def engine_for(self, base_url: str, model: str) -> Engine | None:
        """The engine playing against ``model`` at ``base_url`` (made on first use; blocking);
        None once the service is stopping."""
        with self._lock:
            if self.stopping:
                return None
            key = (base_url, model)
            if key not in self._engines:
                self._engines[key] = self._make_engine(base_url, model)
            return self._engines[key]

    def _make_engine(self, base_url: str, model: str) -> Engine:
        node, api_key_env = self.node, self.key_env_for(base_url)

        def model_factory() -> Any:
            return factory.model(base_url, model, api_key_env=api_key_env, request_timeout=node.request_timeout,
                                 retries=node.model_retries)

        return factory.engine(concurrency=node.concurrency, model_factory=model_factory, adapters=self.adapters,
                              env_urls=self.env_urls, before_retry=self._before_retry, on_finished=self._record,
                              outage=self._outage_guard(base_url, model, api_key_env, model_factory))

    def _outage_guard(self, base_url: str, model: str, api_key_env: str | None, model_factory: Any) -> Any:
        """The node's ``model.outage`` for an engine of this service (docs/outages.md): the
        trainer names the endpoint of its rollouts, so there is no chain to move along, and
        ``failover`` waits for that endpoint as ``wait`` does; None for ``fail``."""
        from pytest_agentgym.config.profile import outage_policy
        from pytest_agentgym.engine.outage import OutageGuard
        from pytest_agentgym.model.endpoint_settings import HEALTH_TIMEOUT, EndpointConfig

        policy = outage_policy(self.node.profile, str(self.node.file))
        if policy.policy == "fail":
            return None
        config = EndpointConfig(kind="openai", url=base_url, model=model, where="the rollouts' base_url")
        endpoint = factory.outage_endpoint(config, api_key_env=api_key_env, health_timeout=HEALTH_TIMEOUT,
                                           chat_timeout=self.node.request_timeout, make_model=model_factory)
        return OutageGuard(dataclasses.replace(policy, policy="wait"), [endpoint])  # its lines: harness.log

    def _record(self, record: EpisodeRecord) -> None:
        """Engine thread: keep the rollout in the run directory and publish it."""
        try:
            self.ledger.append(without_token_data(record))  # the token view stays (tokens.jsonl)
        except OSError as exc:  # store.ResultsWriteError: the answer still goes out
            self.write_error = str(exc)
            log.error("rollout %s not written: %s", record.episode_id, exc)
        with self._lock:
            self.finished += 1
            self._finish_times.append(time.monotonic())
        if self._publisher is not None:
            from pytest_agentgym.results.events import episode_completed

            self._publisher.publish(episode_completed(record, node=self.node.name))

    def in_flight(self) -> int:
        return sum(engine.in_flight() for engine in list(self._engines.values()))

    # -- batches -----------------------------------------------------------------------------

    def _repeat(self, env: str, task: int) -> int:
        with self._lock:
            self._repeats[(env, task)] = self._repeats.get((env, task), 0) + 1
            return self._repeats[(env, task)]

    # -- the queue ----------------------------------------------------------------------------

    def reserve(self, count: int) -> None:
        """Count ``count`` more rollouts as queued, or refuse: :class:`BadRollouts` when
        the batch alone is over the limit, :class:`QueueFull` when it would take the
        queue past it now, :class:`ServiceStopping` once the service stops."""
        with self._lock:
            if self.stopping:
                raise ServiceStopping("the rollout service is shutting down; send the batch to its successor")
            if count > self.max_queued:
                raise BadRollouts(f"this batch has {count} rollouts and this service queues at most "
                                  f"{self.max_queued} at once (--max-queued): split the batch")
            if self.queued + count > self.max_queued:
                raise QueueFull(queued=self.queued, limit=self.max_queued, asked=count,
                                retry_after=self._retry_after(self.queued + count - self.max_queued))
            self.queued += count
            self.queued_peak = max(self.queued_peak, self.queued)

    def _release(self, _future: object = None, count: int = 1) -> None:
        with self._lock:
            self.queued -= count

    def _retry_after(self, excess: int) -> int:
        """Seconds until about ``excess`` rollouts will have finished, at the recent pace
        (10 s when nothing has finished lately), within :data:`RETRY_AFTER_S`."""
        times = self._finish_times
        low, high = RETRY_AFTER_S
        if len(times) < 2 or times[-1] <= times[0]:
            return 10
        rate = (len(times) - 1) / (times[-1] - times[0])
        return int(min(high, max(low, math.ceil(excess / rate))))

    def submit(self, batch: RolloutBatch) -> list[Pending]:
        """Queue every rollout of ``batch`` (blocking while a server or engine starts);
        refused as :meth:`reserve` says when the queue has no room for it. When the
        environment's server cannot be had, each rollout is an error record at once,
        written like any other; once the service stops, the rest are cancelled."""
        self.reserve(batch.size)
        pending: list[Pending] = []
        try:
            name = batch.spec.name
            error = self.ensure_env(name)
            engine = None if error is not None else self.engine_for(batch.base_url, batch.model)
            if self.stopping:
                error = None  # each rollout cancelled, none recorded: the run is over
            rules = self.node.rules(self.run_id)
            rounds, budget = rules.rounds(batch.spec, batch.max_rounds), rules.timeout()
            batch_id = f"{self.run_id}:b{next(self._batches)}"
            for entry, task in enumerate(batch.ids):
                for sample in range(batch.n):
                    request = build(run_id=self.run_id, spec=batch.spec, task_index=task,
                                    repeat=self._repeat(name, task), max_rounds=rounds, timeout_s=budget,
                                    retries=rules.retries, node=self.node.name,
                                    sampling=batch.sampling_for(entry, sample), batch=batch_id, sample=sample)
                    if error is not None:
                        future = self._errored(request, batch.model, error)
                    else:
                        future = self._queue(engine, request)
                    pending.append(Pending(task, sample, future, batch.stream(entry, sample)))
                    future.add_done_callback(self._release)
        except BaseException:
            self._release(count=batch.size - len(pending))
            raise
        return pending

    def _queue(self, engine: Engine | None, request: EpisodeRequest) -> concurrent.futures.Future[EpisodeRecord]:
        """``request`` handed to ``engine``, unless the service is stopping (then a cancelled future)."""
        future = None
        key = f"rollout-{next(self._keys)}"
        with self._lock:  # stop() cannot close the engine between this check and the submission
            if engine is not None and not self.stopping:
                future = engine.submit(key, request)
        if future is None:
            future = concurrent.futures.Future()
            future.cancel()
            return future
        future.add_done_callback(lambda _, key=key, engine=engine: engine.forget(key))
        return future

    def _errored(self, request: EpisodeRequest, model: str, error: ErrorInfo) -> concurrent.futures.Future:
        record = EpisodeRecord.errored(
            request.run_id, request.spec.name, request.task_index, request.repeat, error, started_at=_now(),
            model=model, node=request.node, max_rounds=request.limits.max_rounds, sampling=dict(request.sampling),
            batch=request.batch, sample=request.sample)
        self._record(record)
        future: concurrent.futures.Future[EpisodeRecord] = concurrent.futures.Future()
        future.set_result(record)
        return future

    def health(self) -> dict[str, Any]:
        return {"status": "ok" if self.write_error is None else "degraded", "run_id": self.run_id,
                "run_dir": str(self.run_dir), "node": self.node.name, "environments": self.node.served(),
                "servers": {name: ", ".join(urls) for name, urls in self.env_urls.items()}, "concurrency": self.node.concurrency,
                "endpoints": len(self._engines), "in_flight": self.in_flight(), "queued": self.queued,
                "queued_peak": self.queued_peak, "max_queued": self.max_queued,
                "rollouts_finished": self.finished, "write_error": self.write_error}
