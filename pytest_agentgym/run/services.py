"""What a run needs running: the model endpoint, the environment servers, the
engine and the event publisher. Knows nothing of pytest.

One :class:`RunResources` per process. In the controller (or a single pytest
process) it chooses the endpoint (health probes, fallback chain, launching the
reference agent or vLLM) and starts or attaches to the servers; under
pytest-xdist a worker's instance is built from the controller's
:meth:`RunResources.worker_input` and starts nothing of its own.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo



def _import_model_client() -> None:
    """Import the model client off the critical path. (``openai``, about 0.8 s more, is
    imported only where a call goes through the SDK: model/client.py, ``_sdk``.)"""
    try:
        import pytest_agentgym.model.client  # noqa: F401
    except ImportError:  # reported where the client is made
        pass


def model_name_for(kind: str, model: str) -> str:
    """--agentgym-model for one endpoint: TensorZero wants ``tensorzero::model_name::X``."""
    if kind == "tensorzero" and not model.startswith("tensorzero::"):
        return f"tensorzero::model_name::{model}"
    return model


def model_settings_of(s: Any) -> Any:
    """The run's model settings (model.endpoint_settings.ModelSettings): the node's ``model:``
    section with the command line's endpoint, model, checkpoint, key and seed over it. Raises
    EndpointConfigError for a section that cannot be used."""
    from pytest_agentgym.model.endpoint_settings import ModelSettings, parse_endpoint

    ms = ModelSettings.from_profile(s.profile, where=str(s.node_file))
    if s.base_url:
        endpoint = parse_endpoint({"kind": "openai", "url": s.base_url, "model": s.model or "default"},
                                  "--agentgym-base-url")
        ms = dataclasses.replace(ms, endpoints=(endpoint,))
    elif s.model:
        primary, *fallbacks = ms.endpoints  # the fallbacks keep their own models
        primary = dataclasses.replace(primary, model=model_name_for(primary.kind, s.model))
        ms = dataclasses.replace(ms, endpoints=(primary, *fallbacks))
    if s.checkpoint:
        ms = ms.with_checkpoint(s.checkpoint)
    if s.api_key_env:
        ms = dataclasses.replace(ms, api_key_env=s.api_key_env)
    if s.seed is not None and ms.sampling.seed is None:
        ms = dataclasses.replace(ms, sampling=dataclasses.replace(ms.sampling, seed=s.seed))
    return ms


def node_sampling_of(model_settings: Any) -> dict[str, Any]:
    """The sampling keys the node profile sets (None: not set)."""
    return {k: v for k, v in dataclasses.asdict(model_settings.sampling).items() if v is not None}


class RunResources:
    def __init__(self, settings: Any, *, log_dir: Path, worker_input: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.worker = worker_input
        self._model_settings = None
        self._chosen = None  # model.endpoints.ChosenEndpoint
        #: why no episode can run at all (no endpoint)
        self.setup_error: ErrorInfo | None = None
        #: a failed launch's command and last log lines, for the run's summary (shown once)
        self.setup_details: tuple[str, ...] = ()
        self._pool = None  # servers.pool.ServerPool
        #: env -> the URLs of its servers, replica 0 first (one URL without replicas)
        self.env_urls: dict[str, tuple[str, ...]] = {}
        #: the processes playing episodes at once (pytest-xdist's workers), for ``replicas: auto``
        self.processes = 1
        #: environments whose server could not be had, and why
        self.env_errors: dict[str, ErrorInfo] = {}
        self.server_identities: dict[str, str] = {}
        #: env -> what its server says a run must record about its data (run.json notes, the terminal)
        self.data_notes: dict[str, str] = {}
        self.engine = None
        self.publisher = None
        #: the queue coordinator (--agentgym-queue), which takes the engine's place
        self.fleet = None
        #: a resumed run's generation and run directory, for the queue coordinator
        self.generation = 1
        self.run_dir = ""
        self._warmed = False
        #: the first endpoint's reference agent, spawned before the endpoint is chosen (and
        #: ours to stop until the chosen endpoint takes it over)
        self._spawned_agent = None  # process.managed.ManagedServer
        #: one line per restart of the launched endpoint after it died mid-run (before_retry),
        #: and per pause, resume or failover of model.outage (engine/outage.py), for the
        #: terminal's summary and run.json's notes
        self.endpoint_restarts: list[str] = []
        #: the outage lines not yet shown live (the plugin's progress printer takes them)
        self.outage_lines: collections.deque[str] = collections.deque()
        if worker_input is not None:
            self.env_urls = {name: tuple(urls) for name, urls in worker_input["agentgym_env_urls"].items()}

    # -- the model endpoint --------------------------------------------------------------

    def model_settings(self) -> Any:
        if self._model_settings is None:
            self._model_settings = model_settings_of(self.settings)
        return self._model_settings

    def node_sampling(self) -> dict[str, Any]:
        """The sampling keys the node profile sets (None: not set)."""
        if self.worker is not None:
            return dict(self.worker["agentgym_sampling"])
        return node_sampling_of(self.model_settings())

    def ensure_endpoint(self) -> Any:
        if self._chosen is None:
            from pytest_agentgym.model.endpoint_settings import ChosenEndpoint, EndpointConfig
            from pytest_agentgym.model.endpoints import choose_endpoint

            if self.settings.queue is not None and self.worker is None:
                from pytest_agentgym.queue.fleet import open_fleet

                self.fleet, self._chosen = open_fleet(self.settings, generation=self.generation,
                                                      run_dir=self.run_dir)
            elif self.worker is not None:
                w = self.worker
                config = EndpointConfig(kind=w["agentgym_endpoint_kind"], url=w["agentgym_endpoint_url"],
                                        model=w["agentgym_model"],
                                        where=w.get("agentgym_endpoint_where", "model.endpoints[0]"))
                self._chosen = ChosenEndpoint(config, w["agentgym_base_url"], w["agentgym_model"])
            else:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                self._chosen = choose_endpoint(self.model_settings(), log_dir=self.log_dir,
                                               spawned=self._spawned_agent)
                if self._chosen.process is self._spawned_agent:
                    self._spawned_agent = None  # the chosen endpoint owns it now, and stops it
        return self._chosen

    def spawn_endpoint_ahead(self) -> None:
        """When the first endpoint is the reference agent, launch it now without waiting:
        it boots while pytest configures and collects, and choosing the endpoint then only
        waits for it. (Attached endpoints are only probed, which is quick; vLLM's start
        takes long enough that a head start makes no difference.)"""
        if self.worker is not None or self.settings.queue is not None or self._chosen is not None \
                or self._spawned_agent is not None:
            return
        first = self.model_settings().endpoints[0]
        if first.kind != "reference" or not first.launched:  # a reference agent given a URL is attached
            return
        from pytest_agentgym.model.launcher import reference_agent
        from pytest_agentgym.process.errors import ServerError

        self.log_dir.mkdir(parents=True, exist_ok=True)
        agent = reference_agent(first, self.log_dir)
        try:
            agent.spawn()
        except (ServerError, OSError):
            return  # choosing the endpoint launches it again and says what is wrong
        self._spawned_agent = agent

    def endpoint_or_error(self) -> Any:
        """The chosen endpoint, or None with ``setup_error`` saying why there is none."""
        if self.setup_error is not None:
            return None
        try:
            return self.ensure_endpoint()
        except Exception as exc:  # noqa: BLE001 - NoEndpointAvailable, LaunchError, ...
            self.setup_error = ErrorInfo.from_exception(exc, "harness" if self.settings.queue else "model")
            self.setup_details = tuple(getattr(exc, "details", ()))
            return None

    # -- environment servers ---------------------------------------------------------------

    def start_envs(self, names: Iterable[str]) -> None:
        """Start or attach to the servers of ``names`` (controller only); one that cannot
        be had is remembered in :attr:`env_errors` and its episodes become error records."""
        if self.worker is not None or self.fleet is not None:
            return  # xdist: the controller's; a queue: each worker's own
        from pytest_agentgym.process.errors import ServerError

        names = list(names)
        for name in names:  # what the fingerprint and run.json say of an environment without a server
            spec = self.settings.spec(name)
            if spec.in_process:
                self.server_identities.setdefault(name, f"in-process: {spec.description}")
        names = [n for n in self._served(names) if n not in self.env_urls and n not in self.env_errors]
        if not names:
            return
        pool = self._server_pool()
        pool.spawn_ahead(names)  # they boot side by side; then wait for each
        for name in names:
            if name not in self.env_urls and name not in self.env_errors:
                try:
                    self.env_urls[name] = self._pool.urls(name)  # every replica started (or attached)
                except (ServerError, OSError) as exc:
                    self.env_errors[name] = ErrorInfo.from_exception(exc, "env")
                    continue
                self.server_identities[name] = self._identity(name, self._pool.start(name))
                note = self._pool.data_note(name)
                if note:
                    self.data_notes[name] = note

    def _server_pool(self) -> Any:
        if self._pool is None:
            from pytest_agentgym.run import factory

            self._pool = factory.server_pool(self.settings.env_specs, self.settings.servers_mode, self.log_dir,
                                             replicas=self.settings.replicas,
                                             concurrency=self.settings.concurrency * self.processes)
        return self._pool

    def start_all(self, env_names: Sequence[str]) -> Any:
        """The endpoint and the servers of ``env_names``, side by side, for the first
        episode's sake: the servers' processes are launched first and boot while the
        endpoint is chosen (a reference agent or vLLM launched, health probes), and
        the model client's import runs on a thread meanwhile. Returns the chosen
        endpoint, or None (``setup_error`` says why; then no server is left running:
        without a model every episode is an error)."""
        self.warm_up(env_names)
        chosen = self.endpoint_or_error()
        if chosen is not None:
            self.start_envs(env_names)
        elif self._pool is not None:
            self._pool.stop_all()
        return chosen

    def warm_up(self, env_names: Sequence[str]) -> None:
        """Launch the servers of ``env_names`` without waiting for them, and import the
        model client on a thread (once): called as early as the environments are known."""
        served = self._served(env_names)
        if self.worker is None and served:
            self._server_pool().spawn_ahead(served)
        if not self._warmed:
            self._warmed = True
            import threading

            threading.Thread(target=_import_model_client, name="agentgym-import", daemon=True).start()

    def _served(self, names: Iterable[str]) -> list[str]:
        """The environments of ``names`` that have a server (not the in-process ones)."""
        return [n for n in names if not self.settings.spec(n).in_process]

    def _identity(self, name: str, server: Any) -> str:
        """How ``name``'s server is known across runs (it goes into the fingerprint that a
        resume is checked against): asked for as long as its start-up timeout allows, so
        that a slow answer on a busy machine is never recorded as no answer."""
        from pytest_agentgym.process.health import NoAnswer, ask
        from pytest_agentgym.results.fingerprint import server_identity

        spec = self.settings.spec(name)
        how = "attached" if server.attached else (f"embedded {spec.embedded}" if spec.embedded
                                                  else f"command {spec.command}")
        try:
            answer = ask(self._pool.http, server.url + "/", spec.startup_timeout).text
        except NoAnswer:
            answer = None
        return server_identity(answer, how)

    async def before_retry(self, env: str, error: ErrorInfo) -> None:
        """Before an episode is tried again: restart a spawned server that died (an
        ``env`` error), or the model endpoint this process launched (the reference
        agent, vLLM) when it died (a ``model`` error); both with back-off, through
        the same process manager. An endpoint the plugin did not launch is never
        restarted: the retry goes to it as it is."""
        if self._pool is not None and error.where == "env":
            await asyncio.to_thread(self._pool.ensure, env)
        elif error.where == "model" and self.worker is None and self._chosen is not None:
            restarted = await asyncio.to_thread(self._chosen.revive)
            if restarted is not None:
                self.endpoint_restarts.append(f"{restarted}; the episodes it cut short were retried")

    # -- the engine --------------------------------------------------------------------------

    def start_engine(self, adapters: dict[str, Any], *, concurrency: int,
                     on_finished: Callable[[EpisodeRecord], None], kept: Iterable = ()) -> None:
        """The engine; with a queue, the coordinator in its place (``kept``: the keys a
        resumed run has scored already, whose results in the stream it does not take)."""
        if self.fleet is not None:
            self.fleet.start(on_finished, scored_keys=set(kept))
            self.engine = self.fleet
            return
        chosen = self._chosen
        ms = self.model_settings() if self.worker is None else None
        worker = self.worker

        def model_factory() -> Any:
            from pytest_agentgym.run import factory

            if ms is not None:
                return factory.model(chosen.base_url, chosen.model, api_key_env=ms.key_env(chosen.config),
                                     sampling=ms.sampling, request_timeout=ms.request_timeout, retries=ms.retries)
            return factory.model(chosen.base_url, chosen.model, api_key_env=worker["agentgym_api_key_env"],
                                 sampling=worker["agentgym_sampling"],
                                 request_timeout=worker["agentgym_request_timeout"],
                                 retries=worker["agentgym_model_retries"])

        from pytest_agentgym.run import factory

        self.engine = factory.engine(concurrency=concurrency, model_factory=model_factory, adapters=adapters,
                                     env_urls=self.env_urls, before_retry=self.before_retry,
                                     on_finished=on_finished, outage=self._outage_guard(model_factory))

    def _outage_guard(self, model_factory: Callable[[], Any]) -> Any:
        """The engine's :class:`~pytest_agentgym.engine.outage.OutageGuard` for the node's
        ``model.outage`` (None for ``fail``): the endpoint in use with its health probe and,
        for ``failover``, the endpoints after it in ``model.endpoints``, attached ones only
        (a launched kind is started by choosing the endpoint, not mid-run)."""
        from pytest_agentgym.config.profile import outage_policy

        policy = outage_policy(self.settings.profile or {}, str(self.settings.node_file))
        if policy.policy == "fail" or self._chosen is None:
            return None
        from pytest_agentgym.engine.outage import OutageGuard
        from pytest_agentgym.run import factory

        ms = self.model_settings()
        chosen = self._chosen

        def guarded(config: Any, make_model: Callable[[], Any]) -> Any:
            return factory.outage_endpoint(config, api_key_env=ms.key_env(config), health_timeout=ms.health_timeout,
                                           chat_timeout=ms.request_timeout, make_model=make_model)

        def model_for(config: Any) -> Callable[[], Any]:
            def make() -> Any:
                return factory.model(config.base_url, config.model or "", api_key_env=ms.key_env(config),
                                     sampling=ms.sampling, request_timeout=ms.request_timeout, retries=ms.retries)
            return make

        endpoints = [guarded(chosen.config, model_factory)]
        if policy.policy == "failover":
            chain = list(ms.endpoints)
            at = next((i for i, e in enumerate(chain) if e.where == chosen.config.where), len(chain))
            endpoints += [guarded(e, model_for(e)) for e in chain[at + 1:] if not e.launched]
        return OutageGuard(policy, endpoints, notify=self._outage_line)

    def _outage_line(self, line: str) -> None:
        """A pause, resume or failover (the engine's thread): for the summary, run.json's
        notes, and the live terminal line."""
        self.endpoint_restarts.append(line)
        self.outage_lines.append(line)

    # -- events --------------------------------------------------------------------------------

    def start_publisher(self, run_dir: Path) -> list[str]:
        """Connect the NATS publisher when the run publishes; returns its notes."""
        url = self.settings.nats
        if not url:
            return []
        from pytest_agentgym.publish.publisher import EventPublisher

        nats = self.settings.profile.get("nats") or {}
        self.publisher = EventPublisher(url, run_dir / "outbox.jsonl",
                                        create_stream=bool(nats.get("create_stream", False)))
        return list(self.publisher.start() or [])

    def close_publisher(self, timeout: float) -> Any:
        if self.publisher is None:
            return None
        stats = self.publisher.close(timeout=timeout)
        self.publisher = None
        return stats

    # -- xdist -----------------------------------------------------------------------------------

    def worker_input(self, run_dir: Path) -> dict[str, Any]:
        chosen = self.ensure_endpoint()
        ms = self.model_settings()
        return {
            "agentgym_run_id": self.settings.run_id,
            "agentgym_run_dir": str(run_dir),
            "agentgym_env_urls": {name: list(urls) for name, urls in self.env_urls.items()},
            "agentgym_endpoint_kind": chosen.kind,
            "agentgym_endpoint_url": chosen.config.url,
            "agentgym_endpoint_where": chosen.config.where,  # its place in the chain (model.outage failover)
            "agentgym_base_url": chosen.base_url,
            "agentgym_model": chosen.model,
            "agentgym_api_key_env": ms.key_env(chosen.config),
            "agentgym_sampling": self.node_sampling(),
            "agentgym_request_timeout": ms.request_timeout,
            "agentgym_model_retries": ms.retries,
        }

    # -- the end ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Close the engine and stop what this process started (idempotent)."""
        if self.engine is not None:
            self.engine.close()
        stops = []  # side by side: each waits for its processes to exit
        if self._pool is not None:
            stops.append(self._pool.stop_all)
            self._pool = None
        if self._chosen is not None and self.worker is None:
            stops.append(self._chosen.close)
        if self._spawned_agent is not None:  # spawned ahead, never handed to a chosen endpoint
            stops.append(self._spawned_agent.stop)
        if stops:  # (a run that started nothing, e.g. --collect-only, need not import the process manager)
            from pytest_agentgym.process.children import in_parallel

            in_parallel(stops)

    @property
    def chosen(self) -> Any:
        return self._chosen

    def versions(self) -> dict[str, str]:
        import platform

        from pytest_agentgym import __version__

        versions = {"pytest-agentgym": __version__, "python": platform.python_version()}
        from pytest_agentgym.results.fingerprint import server_versions

        versions.update(server_versions(self.env_urls))
        for name, identity in self.server_identities.items():
            versions[f"server-identity:{name}"] = identity
        launched = self._chosen
        if launched is not None and getattr(launched, "startup_s", None) is not None:  # vLLM
            versions[launched.kind] = launched.version or "unknown"
            versions[f"{launched.kind}-startup-s"] = f"{launched.startup_s:.1f}"
        return versions
