"""Run an HTTP server as a child process, watch its health, restart and stop it.

The one process manager of the plugin, used for environment servers
(:mod:`~pytest_agentgym.servers.pool`), vLLM (:mod:`~pytest_agentgym.model.vllm`)
and the reference agent (:mod:`~pytest_agentgym.model.endpoints`); no pytest.
A :class:`ManagedServer` is *attached* (a URL someone else runs: we only wait
for it) or *spawned* (our command on a port we choose, output in a log file,
its own session, ``PR_SET_PDEATHSIG``, stopped with SIGTERM then SIGKILL and a
psutil sweep, stopped at interpreter exit). Healthy means passing a
:class:`~pytest_agentgym.process.health.HealthCheck`: any answer to ``GET /``
for environment servers, HTTP 200 from ``GET /health`` for vLLM and the
reference agent. A spawned server that exits or never answers while starting is
started again with back-off, and one that died later is restarted on its port the
same way (:meth:`ManagedServer.revive`): the one restart mechanism of environment
servers and of the model endpoints the plugin launched. Ports, probes and message
wording live in :mod:`pytest_agentgym.process.health`; the back-off and the words of
a start that gave up, in :mod:`pytest_agentgym.process.backoff`; forking a child
that dies with us and stopping its whole family, in
:mod:`pytest_agentgym.process.children`; what a failed start raises, in
:mod:`pytest_agentgym.process.errors`. See docs/servers.md.
"""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping
from urllib.parse import urlsplit

from pytest_agentgym.process.backoff import log, start_with_backoff
from pytest_agentgym.process.children import (
    descendants,
    popen,
    session_members,
    signal_group,
    sweep,
    tree_listens_on,
)
from pytest_agentgym.process.errors import ServerCommandError, ServerError, ServerStartError
from pytest_agentgym.process.reaper import Reaper, shm_names
from pytest_agentgym.results.redact import redact_text
from pytest_agentgym.process.health import (
    ANY_ANSWER,
    DEFAULT_HOST,
    Advice,
    Command,
    REFUSED,
    HealthCheck,
    build_argv,
    describe_exit,
    environment_advice,
    free_port,
    port_is_taken,
    probe,
    probe_client,
    server_url,
)

if TYPE_CHECKING:  # see process.health: imported where a server is first probed
    import httpx

__all__ = ["ManagedServer", "POLL_INTERVAL"]

POLL_INTERVAL = 0.05  # seconds between health probes while waiting


#: Spawned servers not yet stopped; stopped at interpreter exit (also after Ctrl-C).
_live: "set[ManagedServer]" = set()


@atexit.register
def _stop_all_live() -> None:
    for server in list(_live):
        server.stop()


# -- one server ----------------------------------------------------------------------


class ManagedServer:
    """One HTTP server: attached to ``url``, or spawned from ``command``.

    ``command`` is a shell-like string or an argv list with ``{host}``,
    ``{port}`` and ``{python}`` placeholders; the port is chosen here unless
    ``port`` is given. Output goes to ``log_path`` (default: a file in a fresh
    temporary directory); ``env`` is added to this process's environment.
    ``health`` says what counts as healthy; ``label`` is how messages name the
    server (default ``environment server NAME``) and ``advice`` what they
    suggest; ``death_signal`` is what the child gets if the harness dies;
    ``reaper``: a :class:`~pytest_agentgym.process.reaper.Reaper` comes with each spawn,
    to stop the family if the harness dies and delete the shared memory it leaves.
    Call :meth:`start` (or use it as a context manager).
    """

    def __init__(
        self,
        name: str,
        *,
        command: Command | None = None,
        url: str | None = None,
        host: str = DEFAULT_HOST,
        port: int | None = None,
        python: str = sys.executable,
        log_path: str | Path | None = None,
        startup_timeout: float = 60.0,
        stop_grace: float = 5.0,
        probe_timeout: float = 1.0,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        health: HealthCheck = ANY_ANSWER,
        label: str | None = None,
        advice: Advice | None = None,
        death_signal: int = signal.SIGKILL,
        http: httpx.Client | Callable[[], httpx.Client] | None = None,
        reaper: bool = False,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError(f"server {name}: give exactly one of command= (spawn) or url= (attach)")
        self.name = name
        self.command = command
        self.host = host
        self.python = python
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.probe_timeout = probe_timeout
        self.env = dict(env) if env is not None else {}
        self.cwd = cwd
        self.health = health
        self.label = label or f"environment server {name}"
        self.advice = advice or environment_advice(name)
        self.death_signal = int(death_signal)
        self.reaper = reaper
        self._proc: subprocess.Popen | None = None
        self._reaper: Reaper | None = None
        #: the health-probe client: the caller's (a pool's, or a function that gives it
        #: on first use), or one of our own made on first use and kept until stop();
        #: never one per poll
        self._http = http
        self._own_http: httpx.Client | None = None
        self._spawned_at = 0.0
        self._last_exit: int | None = None
        #: one revive() at a time: callers that find it dead together restart it once
        self._revive_lock = threading.Lock()
        #: how often revive() restarted it
        self.restarts = 0
        #: whether it has ever answered: until then nobody knows its URL, and it may move
        self.answered = False
        if url is not None:
            self.url = url.rstrip("/")
            self.port = urlsplit(self.url).port
            self.log_path: Path | None = None
        else:
            self.port = port or free_port(host)
            self.url = server_url(host, self.port)
            if log_path is None:
                log_dir = Path(tempfile.mkdtemp(prefix="agentgym-servers-"))
                log_path = log_dir / f"{name.replace(' ', '-')}-{self.port}.log"
            self.log_path = Path(log_path)

    def __repr__(self) -> str:
        how = "attached" if self.attached else f"pid {self.pid}"
        return f"<ManagedServer {self.name} {self.url} {how}>"

    @property
    def attached(self) -> bool:
        return self.command is None

    @property
    def proc(self) -> subprocess.Popen | None:
        """The child process while it is ours (None when attached or stopped)."""
        return self._proc

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def argv(self) -> list[str] | None:
        if self.command is None:
            return None
        return build_argv(self.command, host=self.host, port=self.port, python=self.python)

    def _probe(self, timeout: float) -> str | None:
        if self._http is None and self._own_http is None:
            self._own_http = probe_client()
        shared = self._http() if callable(self._http) else self._http
        return probe(self.url, timeout, self.health, shared or self._own_http)

    # -- starting ---------------------------------------------------------------------

    def start(self) -> "ManagedServer":
        """Spawn (if ours) and wait until healthy; raise :class:`ServerStartError` if not."""
        self.spawn()
        self.wait_ready()
        return self

    def spawn(self) -> "ManagedServer":
        """Start the process without waiting for it (no-op when attached or running)."""
        if self.attached:
            return self
        if self._proc is not None and self._proc.poll() is not None:
            self.stop()  # it died: clear away whatever it left behind
        if self._proc is not None:
            return self
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv or []
        env = {**os.environ, **self.env}
        env.setdefault("PYTHONUNBUFFERED", "1")
        shm_before = shm_names() if self.reaper else None
        with self.log_path.open("ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} starting: {redact_text(shlex.join(argv))}\n".encode())
            log.flush()
            self._spawned_at = time.time()
            try:
                self._proc = popen(
                    argv, self.death_signal, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=self.cwd,
                )
            except OSError as exc:
                raise ServerCommandError(
                    f"{self.label}: cannot run `{shlex.join(argv)}`: {exc}; {self.advice.cannot_run}"
                ) from exc
        _live.add(self)
        if shm_before is not None:
            self._watch(shm_before)
        return self

    def _watch(self, shm_before: set[str]) -> None:
        """Start the reaper of the process just spawned (``shm_before``: /dev/shm before it)."""
        assert self._proc is not None
        try:
            self._reaper = Reaper.watch(self._proc.pid, self._spawned_at, self.stop_grace, shm_before,
                                        self.log_path)
        except OSError as exc:  # the server runs; only the clean-up after a crash is lost
            log.warning("%s: no reaper for its processes and shared memory: %s", self.label, exc)

    def wait_ready(self, timeout: float | None = None, poll_interval: float = POLL_INTERVAL) -> float:
        """Probe until healthy and return the seconds it took (``timeout``:
        default ``startup_timeout``). A spawned server that exits first, or does
        not answer in time, is stopped and reported as :class:`ServerStartError`."""
        timeout = self.startup_timeout if timeout is None else timeout
        if self._proc is None and not self.attached:
            raise ServerStartError(f"{self.label} was not started; call start() or spawn() first")
        started = time.monotonic()
        deadline = started + timeout
        while True:
            if self._proc is not None and (code := self._proc.poll()) is not None:
                self.stop()  # whatever it started before dying
                tail = self.log_tail()
                raise ServerStartError(
                    f"{self.label} {describe_exit(code)} before it answered at {self.url}; "
                    f"command: `{shlex.join(self.argv or [])}`; last lines of {self.log_path}:\n{tail}",
                    exit_code=code, log_tail=tail,
                )
            remaining = deadline - time.monotonic()
            reason = self._probe(max(0.05, min(self.probe_timeout, remaining)))
            if reason is None and self._owns_port():
                self.answered = True
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                break
            time.sleep(poll_interval)  # polling the health condition until the deadline
        what = self.health.describe()
        if self.attached:
            raise ServerStartError(
                f"{self.label} at {self.url} did not answer {what} within {timeout:g} s ({reason}); "
                f"{self.advice.attach}"
            )
        tail = self.log_tail()
        self.stop()
        raise ServerStartError(
            f"{self.label} (`{shlex.join(self.argv or [])}`) did not answer {what} at {self.url} "
            f"within {timeout:g} s ({reason or 'another process owns the port'}); it was stopped; "
            f"{self.advice.slow_start}; last lines of {self.log_path}:\n{tail}",
            log_tail=tail,
        )

    def leave_a_taken_port(self) -> str | None:
        """After a failed first start: when another process holds this server's port (it
        took it between our choice and the server's bind; other test processes choose
        ports too), take another free port and say so. Only before the server has ever
        answered: after that its URL is known, and a restart keeps it. None when it stays."""
        if self.attached or self.answered or not port_is_taken(self.host, self.port):
            return None
        taken, self.port = self.port, free_port(self.host)
        self.url = server_url(self.host, self.port)
        return f"port {taken} is held by another process; moving to port {self.port}"

    def _owns_port(self) -> bool:
        """For a spawned server: is the answer coming from our process tree (not from
        another program that took the port between our choice and the server's bind)?"""
        return self._proc is None or tree_listens_on(self._proc.pid, self.port)

    # -- watching ---------------------------------------------------------------------

    def is_alive(self) -> bool:
        """Spawned: the process is running. Attached: the URL is healthy."""
        if self.attached:
            return self._probe(self.probe_timeout) is None
        return self._proc is not None and self._proc.poll() is None

    def refuses_connections(self) -> bool:
        """Whether nothing listens on the server's port now (the health probe is refused).

        For a spawned server that answered before, this means it is going away even
        while :meth:`is_alive` still says yes: a process killed by a signal closes
        its sockets before it can be reaped, so for a moment its port refuses while
        ``poll()`` still reports it running. A slow or busy server is not refused."""
        return self._probe(self.probe_timeout) == REFUSED

    def poll(self) -> int | None:
        """The exit code once the spawned process has ended (negative: killed by
        that signal), else None. Always None for an attached server."""
        if self._proc is not None:
            code = self._proc.poll()
            if code is not None:
                self._last_exit = code
            return code
        return self._last_exit

    def note(self, text: str) -> None:
        """Append a ``--- HH:MM:SS <text>`` line to the log of a spawned server."""
        if self.log_path is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} {text}\n".encode())

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()[-20_000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- starting again: reviving a server that died (back-off: process/backoff.py) ----

    def died(self) -> str | None:
        """Why a spawned server counts as dead now, or None while it lives (always None
        when attached: :meth:`is_alive` says whether an attached one answers).

        Dead: its process has ended (or was never started, or was stopped), or its
        port refuses connections while the process is still there: a killed process
        closes its listening socket before its exit can be seen, and a client that
        was refused may ask in between."""
        if self.attached:
            return None
        if self._proc is None:
            return "it is not running"
        code = self.poll()
        if code is not None:
            return f"it {describe_exit(code)}"
        if self.refuses_connections():
            return (f"{self.url} refuses connections while process {self.pid} is still there "
                    "(killed, or its listener closed)")
        return None

    def revive(self, attempts: int, backoff: float, logger: logging.Logger = log) -> str | None:
        """Start a spawned server that died (:meth:`died`) again on its port, with
        :func:`~pytest_agentgym.process.backoff.start_with_backoff`; return why it was restarted, or None when it was
        alive and nothing was done. Callers that find it dead at the same time restart
        it once: the others wait for that restart and find it alive. Raises
        :class:`ServerStartError` when it did not come back, and :class:`ServerError`
        for an attached server that stopped answering (it is not ours to restart)."""
        if self.attached:
            if self.is_alive():
                return None
            raise ServerError(f"{self.label} at {self.url} stopped answering; it is attached, "
                              "not started here: restart it where it runs")
        with self._revive_lock:
            why = self.died()
            if why is None:
                return None
            self.note(f"restarting: {why}")
            logger.warning("%s died (%s); restarting it on %s (log: %s)", self.label, why, self.url,
                           self.log_path)
            self.stop()
            started = time.monotonic()
            start_with_backoff(self, attempts, backoff, logger)
            self.restarts += 1
            logger.warning("%s restarted at %s in %.1f s (%d restart(s) so far)", self.label, self.url,
                           time.monotonic() - started, self.restarts)
            return why

    # -- restarting and stopping ----------------------------------------------------

    def restart(self) -> "ManagedServer":
        """Stop the process (if any) and start it again on the same port."""
        if self.attached:
            raise ServerError(
                f"{self.label} at {self.url} is attached, not started here, so it cannot be "
                "restarted from here; restart it where it runs"
            )
        self.stop()
        return self.start()

    def stop(self, grace: float | None = None) -> int | None:
        """Stop a spawned server and everything it started; return its exit code.

        SIGTERM to its process group, SIGKILL after ``grace`` seconds (default
        ``stop_grace``). None, doing nothing, when attached or already stopped.
        """
        grace = self.stop_grace if grace is None else grace
        proc, self._proc = self._proc, None
        reaper, self._reaper = self._reaper, None
        _live.discard(self)
        own, self._own_http = self._own_http, None
        if own is not None:
            own.close()
        if proc is None:
            return None
        # Everything it started: its session (it is the session leader, sid == pid),
        # plus descendants that moved to a session of their own.
        family = session_members(proc.pid, self._spawned_at)
        if reaper is not None:
            reaper.stopping()  # it notes the shared memory the family uses before any of it exits
        if proc.poll() is None:
            family += descendants(proc.pid)
            signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        self._last_exit = proc.returncode
        sweep([p for p in {p.pid: p for p in family}.values() if p.pid != proc.pid], grace)
        if reaper is not None:
            reaper.finish()  # deletes what the family left in /dev/shm
        return self._last_exit

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
