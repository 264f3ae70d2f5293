"""Runs many episodes concurrently, within limits. Knows nothing of pytest.

The engine owns an asyncio event loop on a background thread. Callers submit
episodes (in the order they want them started) and get a
``concurrent.futures.Future`` per episode; at most ``concurrency`` episodes are
in flight at once, started in submission order. pytest items then simply wait
for their own future, so the engine can run ahead of the item being reported.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from typing import Any, Awaitable, Callable, Mapping, Sequence

from pytest_agentgym.envs.base import EnvAdapter
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.replicas import replicated
from pytest_agentgym.engine.episode import ChatModel, EpisodeRequest, run_episode
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo
from pytest_agentgym.transport.keepalive import ensure_file_room

#: Builds the model client inside the engine's loop (clients bind to their loop).
ModelFactory = Callable[[], ChatModel]


class Engine:
    def __init__(
        self,
        *,
        concurrency: int,
        model_factory: ModelFactory,
        adapters: dict[str, EnvAdapter],
        env_urls: Mapping[str, str | Sequence[str]],
        before_retry: Callable[[str, ErrorInfo], Awaitable[None]] | None = None,
        on_finished: Callable[[EpisodeRecord], None] | None = None,
        outage: Any = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        ensure_file_room(concurrency)  # each episode in flight holds connections
        self._model_factory = model_factory
        self._adapters = adapters
        self._env_urls = env_urls
        self._before_retry = before_retry
        self._on_finished = on_finished
        #: the model.outage policy (engine/outage.OutageGuard), or None: an outage is an error
        self._outage = outage
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentgym-engine", daemon=True)
        self._thread.start()
        self._futures: dict[str, concurrent.futures.Future[EpisodeRecord]] = {}
        #: keys whose episode has begun (it will be played and written, come what may)
        self._started: set[str] = set()
        #: asked (on the loop's thread) before an episode begins: False leaves it unplayed
        #: (its future is cancelled); run/stopping.RunStops.may_start sets it
        self.may_start: Callable[[str], bool] | None = None
        self._running = 0
        self._ready = self._call(self._setup())

    def _call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _setup(self) -> None:
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._model = self._model_factory()
        if self._outage is not None:
            await self._outage.setup(self._model)
        self._clients: dict[str, EnvClient] = {}

    def _client(self, request: EpisodeRequest) -> EnvClient:
        """One protocol client per environment, built by its adapter; each request may
        take the environment's ``request_timeout`` (configs/envs.yaml, node overrides).
        An environment with several servers (its replicas' URLs) gets one client over
        them all (envs/replicas.py)."""
        name = request.spec.name
        if name not in self._clients:
            urls = self._env_urls[name]
            urls = (urls,) if isinstance(urls, str) else tuple(urls)
            adapter = self._adapters[name]
            self._clients[name] = replicated([adapter.make_client(request.spec, url) for url in urls])
        return self._clients[name]

    async def _run(self, key: str, request: EpisodeRequest) -> EpisodeRecord:
        async with self._semaphore:
            if self._outage is not None:
                await self._outage.admitted()  # paused while the model endpoint is waited for
            if self.may_start is not None and not self.may_start(key):
                raise asyncio.CancelledError(f"{key}: not to be played")
            self._started.add(key)
            adapter = self._adapters[request.spec.name]
            before_retry = None
            if self._before_retry is not None:
                before_retry = functools.partial(self._before_retry, request.spec.name)
            self._running += 1
            try:
                if request.spec.in_process:  # it plays its own episodes (a verifiers environment)
                    model = self._outage.model if self._outage is not None else self._model
                    record = await adapter.play(request, model)  # type: ignore[attr-defined]
                else:
                    record = await run_episode(request, adapter, self._client(request), self._model, before_retry,
                                               self._outage)
            finally:
                self._running -= 1
            if self._on_finished is not None:  # before the slot goes to the next episode
                self._on_finished(record)  # e.g. appended to episodes.jsonl before anyone waits on it
        return record

    def submit(self, key: str, request: EpisodeRequest) -> concurrent.futures.Future[EpisodeRecord]:
        """Schedule an episode once; submitting the same key again returns the same future."""
        if key not in self._futures:
            self._futures[key] = asyncio.run_coroutine_threadsafe(self._run(key, request), self._loop)
        return self._futures[key]

    def submitted(self, key: str) -> bool:
        return key in self._futures

    def forget(self, key: str) -> None:
        """The caller has taken the episode's record: drop the engine's hold on it, so a
        long run keeps no finished records in memory (they are on disk). Submitting
        the key again later plays the episode again."""
        self._futures.pop(key, None)
        self._started.discard(key)

    def withdraw(self, key: str) -> bool:
        """Take back an episode that has not begun (e.g. an xdist worker's queued item
        went to another worker); True when it was withdrawn, False when it has begun
        (it then finishes and is written as usual) or was never submitted."""
        future = self._futures.get(key)
        if future is None or key in self._started:
            return False
        future.cancel()
        self._futures.pop(key, None)
        return True

    def in_flight(self) -> int:
        """How many episodes are being played right now."""
        return self._running

    def close(self, timeout: float = 10.0) -> None:
        """Cancel what has not finished, close the clients, and stop the loop."""
        if not self._loop.is_running():
            return

        async def cancel_then_close() -> None:
            # On the loop's thread, over a snapshot: cancelling runs the futures' callbacks
            # (a caller's forget() among them), which take keys out of self._futures.
            for future in list(self._futures.values()):
                future.cancel()
            await self._aclose()

        try:
            asyncio.run_coroutine_threadsafe(cancel_then_close(), self._loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            for future in list(self._futures.values()):  # the loop did not get to it: from here
                future.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    async def _aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        for adapter in self._adapters.values():
            close = getattr(adapter, "aclose", None)  # an in-process environment's resources
            if close is not None:
                await close()
        models = self._outage.models() if self._outage is not None else [self._model]
        for model in models:  # a failover made one per endpoint
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
