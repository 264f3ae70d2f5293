"""Which server each environment gets, and the pool that starts them. Usable without pytest.

:func:`plan_server` decides, without probing, how an
:class:`~pytest_agentgym.envs.spec.EnvSpec`'s server would be provided:
attach when ``url`` is set, else spawn the embedded server, else the real
command when it is on PATH, else nothing (the plan says what to do).

:class:`ServerPool` starts what a set of specs needs, on first use: per
environment one :class:`~pytest_agentgym.process.managed.ManagedServer`, or
several replicas (``replicas: N|auto``, or ``url:`` given as a list of running
servers), each its own process on its own port, health-checked, restarted and
logged on its own; the protocol client spreads an environment's episodes over
them (envs/replicas.py). It also attaches when something already answers on an
environment's configured port, and restarts a spawned server that died.
A spawned server that exits or never gets healthy while starting is started
again, up to ``EnvSpec.start_attempts`` times with exponential back-off
(``start_backoff`` seconds, doubling), each attempt logged; only then is the
:class:`~pytest_agentgym.process.managed.ServerStartError` raised.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shlex
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal, Mapping

from pytest_agentgym.envs.spec import EnvSpec, resolve_replicas
from pytest_agentgym.process.health import DEFAULT_HOST, NoAnswer, ask, build_argv, free_port, probe, probe_client
from pytest_agentgym.process.backoff import start_with_backoff
from pytest_agentgym.process.children import in_parallel
from pytest_agentgym.process.errors import ServerError
from pytest_agentgym.process.managed import ManagedServer

log = logging.getLogger("pytest_agentgym.servers")


class ServerUnavailable(ServerError):
    """Nothing answers where the environment's server should be, and nothing here can start it."""


@dataclass(frozen=True)
class ServerPlan:
    """How an environment's server would be provided here, decided without probing.

    ``how``: "attach" (``url`` is set), "embedded" or "command" (spawnable, see
    ``command``), or "unavailable" (``detail`` says what to do).
    """

    env: str
    how: Literal["attach", "embedded", "command", "unavailable"]
    url: str
    command: tuple[str, ...] | None
    detail: str


def embedded_command(name: str) -> tuple[str, ...]:
    """The command (with placeholders) that runs the embedded server ``name``."""
    return ("{python}", "-m", "pytest_agentgym", "serve", name, "--host", "{host}", "--port", "{port}")


def _embedded_available(name: str) -> bool:
    from pytest_agentgym.servers.embedded import EMBEDDED_SERVERS, missing_requirements

    module = EMBEDDED_SERVERS.get(name)
    try:
        found = module is not None and importlib.util.find_spec(module) is not None
    except ImportError:
        return False
    return found and missing_requirements(name) is None


def plan_server(
    spec: EnvSpec,
    *,
    host: str = DEFAULT_HOST,
    python: str = sys.executable,
    which: Callable[[str], str | None] = shutil.which,
) -> ServerPlan:
    url = spec.default_url(host)
    if spec.url:
        return ServerPlan(spec.name, "attach", url, None, f"attach to {url} (envs.{spec.name}.url)")
    if spec.embedded and _embedded_available(spec.embedded):
        return ServerPlan(spec.name, "embedded", url, embedded_command(spec.embedded),
                          f"embedded server: pytest-agentgym serve {spec.embedded}")
    executable = None
    if spec.command:
        executable = build_argv(spec.command, host=host, port=spec.port, python=python)[0]
        found = which(executable)
        if found:
            argv = spec.command if isinstance(spec.command, (list, tuple)) else shlex.split(spec.command)
            return ServerPlan(spec.name, "command", url, tuple(argv),
                              f"command `{executable}` ({found})")
    if executable:
        todo = f"install agentenv-{Path(executable).name} (its `{Path(executable).name}` command)"
    else:
        todo = "configure a command for it"
    if spec.embedded:
        from pytest_agentgym.servers.embedded import missing_requirements

        lacks = (missing_requirements(spec.embedded)
                 or f"this installation lacks the embedded server {spec.embedded!r}")
        todo = f"{lacks}; {todo}"
    return ServerPlan(
        spec.name, "unavailable", url, None,
        f"environment server {spec.name} is not running at {url} and cannot be started here: "
        f"{todo} or set envs.{spec.name}.url",
    )


def machine_cores() -> int:
    """The cores this process may run on (its affinity where the OS says; else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class ServerPool:
    """The servers a run needs, started on first use: per environment one process, or
    its replicas.

    ``attach_running``: when ``url`` is not set but something already answers on
    the environment's configured port, use it instead of spawning one (with
    ``replicas`` above 1 it is the first replica and the rest are spawned).
    ``replicas``: the count of an environment whose spec sets none (N or "auto");
    ``concurrency`` (episodes in flight) and ``cores`` are what "auto" follows.
    """

    def __init__(
        self,
        specs: Mapping[str, EnvSpec] | Iterable[EnvSpec],
        *,
        host: str = DEFAULT_HOST,
        python: str = sys.executable,
        log_dir: str | Path | None = None,
        attach_running: bool = True,
        probe_timeout: float = 1.0,
        stop_grace: float = 5.0,
        replicas: int | str = 1,
        concurrency: int = 1,
        cores: int | None = None,
    ) -> None:
        items = specs.values() if isinstance(specs, Mapping) else specs
        self.specs = {spec.name: spec for spec in items}
        self.host = host
        self.python = python
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="agentgym-servers-"))
        self.attach_running = attach_running
        self.probe_timeout = probe_timeout
        self.stop_grace = stop_grace
        self.replicas = replicas
        self.concurrency = concurrency
        self.cores = cores or machine_cores()
        #: env -> its running servers, replica 0 first
        self._servers: dict[str, list[ManagedServer]] = {}
        #: launched by spawn_ahead, not yet waited for by start
        self._spawned: dict[str, list[ManagedServer]] = {}
        self._lock = threading.RLock()
        self._http = None

    def _shared_http(self):  # type: ignore[no-untyped-def]
        return self.http

    @property
    def http(self):  # type: ignore[no-untyped-def]
        """One health-probe client for the pool's lifetime, shared by its servers."""
        if self._http is None:
            self._http = probe_client()
        return self._http

    def _spec(self, env: str) -> EnvSpec:
        try:
            return self.specs[env]
        except KeyError:
            raise KeyError(f"no environment {env!r} configured; known: {', '.join(sorted(self.specs))}") from None

    def replica_count(self, env: str) -> int:
        """How many servers ``env`` gets: one per URL of an attached list, else its
        ``replicas`` (the pool's when it sets none) resolved for this machine."""
        spec = self._spec(env)
        if spec.attach_urls:
            return len(spec.attach_urls)
        chosen = spec.replicas if spec.replicas is not None else self.replicas
        return resolve_replicas(chosen, self.concurrency, self.cores)

    def _make(self, spec: EnvSpec) -> list[ManagedServer]:
        plan = plan_server(spec, host=self.host, python=self.python)
        count = self.replica_count(spec.name)

        def label(index: int) -> str | None:
            return None if count == 1 else f"environment server {spec.name} (replica {index + 1} of {count})"

        # The shared probe client is made when a server is first probed, not here: making
        # it (an SSL context) takes about 0.1 s that the first spawn need not wait for.
        common = dict(startup_timeout=spec.startup_timeout, stop_grace=self.stop_grace,
                      probe_timeout=self.probe_timeout, python=self.python, http=self._shared_http)
        if plan.how == "attach":
            return [ManagedServer(spec.name, url=url, label=label(i), **common)
                    for i, url in enumerate(spec.attach_urls)]
        made: list[ManagedServer] = []
        if self.attach_running and probe(plan.url, self.probe_timeout, client=self.http) is None:
            made.append(ManagedServer(spec.name, url=plan.url, label=label(0), **common))
            if count == 1:
                return made
        if plan.command is None:
            raise ServerUnavailable(plan.detail)
        while len(made) < count:
            port = free_port(self.host)  # never one it handed out before (process.health.free_port)
            made.append(ManagedServer(spec.name, command=list(plan.command), host=self.host, port=port,
                                      log_path=self.log_dir / f"{spec.name}-{port}.log", label=label(len(made)),
                                      **common))
        return made

    def start(self, env: str) -> ManagedServer:
        """The first running server of ``env``; all its replicas are started (or attached)
        on the first call. A start that failed is not remembered: the next call tries again."""
        return self.start_replicas(env)[0]

    def start_replicas(self, env: str) -> list[ManagedServer]:
        """Every running server of ``env``, started (or attached) on first call: launched
        side by side, then each waited for (with back-off). When one cannot be started the
        others are stopped and the error is raised: the environment has no servers then."""
        with self._lock:
            servers = self._servers.get(env)
            if servers is None:
                spec = self._spec(env)
                made = self._spawned.pop(env, None) or self._make(spec)
                try:
                    for server in made:
                        server.spawn()  # side by side (a no-op for one spawned ahead or attached)
                    servers = [self._start_with_backoff(spec, server) for server in made]
                except BaseException:
                    in_parallel([server.stop for server in made])
                    raise
                self._servers[env] = servers
            return list(servers)

    def urls(self, env: str) -> tuple[str, ...]:
        """The URLs of ``env``'s running servers, replica 0 first (started on first call)."""
        return tuple(server.url for server in self.start_replicas(env))

    def data_note(self, env: str) -> str | None:
        """What ``env``'s server says a run must record about its data (``GET
        /embedded/data``'s ``note``: the embedded WebShop on the project catalogue is not
        comparable with published scores); None when it says nothing (the original servers
        have no such route). Asks the first replica (they serve the same data), for as long
        as the environment's start-up timeout allows (:func:`ask`): a busy machine delays
        the note, never drops it. A server that never answers gets a note saying so."""
        spec = self._spec(env)
        url = self.start(env).url + "/embedded/data"
        try:
            answer = ask(self.http, url, spec.startup_timeout)
        except NoAnswer as exc:
            return (f"{env}: its server did not say which data it serves ({exc}); this run cannot tell "
                    f"whether its scores compare with published {env} scores")
        try:
            note = answer.json().get("note") if answer.status_code == 200 else None
        except (ValueError, AttributeError):
            return None
        return note if isinstance(note, str) and note else None

    def spawn_ahead(self, envs: Iterable[str]) -> None:
        """Launch the processes of ``envs`` without waiting for them, so that they boot
        side by side; :meth:`start` then only waits for each. What cannot be made
        here (no command, unknown env) is left for :meth:`start` to report."""
        with self._lock:
            for env in envs:
                if env in self._servers or env in self._spawned:
                    continue
                try:
                    made = self._make(self._spec(env))
                    for server in made:
                        server.spawn()
                except (KeyError, ServerError, OSError):
                    continue
                self._spawned[env] = made

    def _start_with_backoff(self, spec: EnvSpec, server: ManagedServer) -> ManagedServer:
        """Start ``server``; a spawned one that exits or never answers is started again
        (same port) up to ``spec.start_attempts`` times, waiting ``spec.start_backoff``
        seconds, doubling, in between (:func:`~pytest_agentgym.process.backoff.start_with_backoff`)."""
        return start_with_backoff(server, spec.start_attempts, spec.start_backoff, log)

    def base_url(self, env: str) -> str:
        """The URL the protocol client uses for ``env``'s first server (server URL + path prefix)."""
        return self._spec(env).base_url(self.start(env).url)

    def ensure(self, env: str) -> ManagedServer:
        """Like :meth:`start` (which also starts a server whose earlier start failed),
        but each spawned replica that has died is restarted on its port, with the same
        back-off; an attached one that stopped answering is an error (when the
        environment has other replicas, only once none of them is left).

        A spawned server counts as dead when its process has ended, and also when
        its port refuses connections while the process is still there: a killed
        process closes its listening socket before its exit can be seen, and a
        client that was refused may call this in between."""
        with self._lock:
            servers = self.start_replicas(env)
            spec = self._spec(env)
            lost: list[ServerError] = []
            for server in servers:
                try:
                    server.revive(spec.start_attempts, spec.start_backoff, log)  # the one restart mechanism
                except ServerError as exc:
                    lost.append(exc)
            if lost and len(lost) == len(servers):
                raise lost[0]
            for exc in lost:  # the others carry the episodes (envs/replicas.py passes it over)
                log.warning("%s; its episodes go to the other replicas", exc)
            return servers[0]

    def restart(self, env: str) -> ManagedServer:
        """Stop ``env``'s spawned servers and start them again on their ports (with back-off)."""
        with self._lock:
            if env not in self._servers:
                return self.start(env)
            servers = self._servers[env]
            for server in servers:
                if server.attached:
                    return server.restart()  # refuses, saying why
            in_parallel([server.stop for server in servers])
            for server in servers:
                self._start_with_backoff(self._spec(env), server)
            return servers[0]

    def stop_all(self) -> None:
        with self._lock:
            every = [server for group in [*self._servers.values(), *self._spawned.values()] for server in group]
            in_parallel([server.stop for server in every])
            self._servers.clear()
            self._spawned.clear()
            if self._http is not None:
                self._http.close()
                self._http = None  # the pool may be used again: a new one then

    @property
    def servers(self) -> dict[str, ManagedServer]:
        """Each started environment's first server."""
        return {env: group[0] for env, group in self._servers.items()}

    @property
    def replica_servers(self) -> dict[str, list[ManagedServer]]:
        """Each started environment's servers, replica 0 first."""
        return {env: list(group) for env, group in self._servers.items()}

    def __enter__(self) -> "ServerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
