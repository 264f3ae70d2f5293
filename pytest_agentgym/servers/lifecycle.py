"""Start, watch, restart and stop environment servers. Usable without pytest.

:class:`ManagedServer` is one server: either *attached* (a URL someone else
runs; we only wait for it to answer) or *spawned* (a command we run on a port we
choose, with its output in a log file). Health is any HTTP answer to ``GET /``,
because the original servers differ in what their root route returns.

A spawned server runs in its own session (so its process group can be signalled
as a whole, and a terminal's Ctrl-C reaches only the harness, which then stops
it), gets ``PR_SET_PDEATHSIG`` on Linux (so it dies if the harness is
SIGKILLed), and is stopped with SIGTERM, then SIGKILL after a grace period;
descendants that left its group are found with psutil and stopped too. Servers
still running when the interpreter exits (also after Ctrl-C) are stopped by an
``atexit`` hook.

:class:`ServerPool` starts what a set of :class:`~pytest_agentgym.envs.spec.EnvSpec`
needs, one server per environment: attach when ``url`` is set or something
already answers on the configured port, else spawn the embedded server, else the
real command when it is on PATH, else raise :class:`ServerUnavailable`.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import queue
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

import httpx
import psutil

from pytest_agentgym.envs.spec import EnvSpec

DEFAULT_HOST = "127.0.0.1"
Command = str | Sequence[str]
_POLL_INTERVAL = 0.05  # seconds between health probes while waiting


class ServerError(RuntimeError):
    """An environment server could not be started, reached or restarted."""


class ServerStartError(ServerError):
    """A server did not become healthy; ``exit_code`` is set when its process died."""

    def __init__(self, message: str, *, exit_code: int | None = None, log_tail: str = "") -> None:
        self.exit_code = exit_code
        self.log_tail = log_tail
        super().__init__(message)


class ServerUnavailable(ServerError):
    """Nothing answers where the environment's server should be, and nothing here can start it."""


# -- small helpers ------------------------------------------------------------------


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def server_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def probe(url: str, timeout: float) -> str | None:
    """``None`` when ``GET url/`` gets any HTTP answer, else why not (a short phrase)."""
    try:
        httpx.get(url.rstrip("/") + "/", timeout=timeout)
        return None
    except httpx.ConnectError:
        return "connection refused"
    except httpx.ConnectTimeout:
        return f"connecting took longer than {timeout:g} s"
    except httpx.TimeoutException:
        return f"the port accepts connections but nothing answered within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"


def build_argv(command: Command, *, host: str, port: int, python: str = sys.executable) -> list[str]:
    """The argv of ``command`` with ``{host}``, ``{port}`` and ``{python}`` filled in.

    A string is split like a shell would (no shell runs it); a sequence is used as is.
    """
    parts = shlex.split(command) if isinstance(command, str) else list(command)
    if not parts:
        raise ValueError("empty server command")
    values = {"{host}": host, "{port}": str(port), "{python}": python}
    filled = []
    for part in parts:
        for placeholder, value in values.items():
            part = part.replace(placeholder, value)
        filled.append(part)
    return filled


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# -- spawning ------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)  # loaded here: never dlopen after fork
    except OSError:  # pragma: no cover - no libc symbols available
        _libc = None


def _child_setup(parent_pid: int) -> Callable[[], None]:
    """What the child runs between fork and exec: die with the parent (Linux)."""

    def setup() -> None:
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(1)

    return setup


class _SpawnThread:
    """One long-lived daemon thread that forks every child not forked on the main thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the
    process. A child forked from a short-lived thread (``asyncio.to_thread``, a
    pool worker) would be killed as soon as that thread finished. A daemon
    thread lives until the process exits.
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, function: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="agentgym-spawner", daemon=True
                )
                self._thread.start()
        result: Future = Future()
        self._requests.put((function, result))
        return result.result()

    def _serve(self) -> None:
        while True:
            function, result = self._requests.get()
            try:
                result.set_result(function())
            except BaseException as exc:  # handed back to the caller
                result.set_exception(exc)


_spawner = _SpawnThread()


def _popen(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    kwargs["preexec_fn"] = _child_setup(os.getpid())
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(argv, **kwargs)
    return _spawner.call(lambda: subprocess.Popen(argv, **kwargs))


#: Spawned servers not yet stopped; stopped at interpreter exit (also after Ctrl-C).
_live: "set[ManagedServer]" = set()


@atexit.register
def _stop_all_live() -> None:
    for server in list(_live):
        server.stop()


# -- one server ----------------------------------------------------------------------


class ManagedServer:
    """One environment server: attached to ``url``, or spawned from ``command``.

    ``command`` is a shell-like string or an argv list with ``{host}``,
    ``{port}`` and ``{python}`` placeholders; the port is chosen here unless
    ``port`` is given. Output goes to ``log_path`` (default: a file in a fresh
    temporary directory). Call :meth:`start` (or use it as a context manager).
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
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._proc: subprocess.Popen | None = None
        self._spawned_at = 0.0
        self._last_exit: int | None = None
        if url is not None:
            self.url = url.rstrip("/")
            self.port = httpx.URL(self.url).port
            self.log_path: Path | None = None
        else:
            self.port = port or free_port(host)
            self.url = server_url(host, self.port)
            if log_path is None:
                log_dir = Path(tempfile.mkdtemp(prefix="agentgym-servers-"))
                log_path = log_dir / f"{name}-{self.port}.log"
            self.log_path = Path(log_path)

    def __repr__(self) -> str:
        how = "attached" if self.attached else f"pid {self.pid}"
        return f"<ManagedServer {self.name} {self.url} {how}>"

    @property
    def attached(self) -> bool:
        return self.command is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def argv(self) -> list[str] | None:
        if self.command is None:
            return None
        return build_argv(self.command, host=self.host, port=self.port, python=self.python)

    # -- starting ---------------------------------------------------------------------

    def start(self) -> "ManagedServer":
        """Spawn (if ours) and wait until it answers; raise :class:`ServerStartError` if not."""
        if self.attached:
            self._wait_healthy(self.startup_timeout)
            return self
        if self._proc is not None and self._proc.poll() is not None:
            self.stop()  # it died: clear away whatever it left behind
        if self._proc is None:
            self._spawn()
        self._wait_healthy(self.startup_timeout)
        return self

    def _spawn(self) -> None:
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv
        assert argv is not None
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with self.log_path.open("ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} starting: {shlex.join(argv)}\n".encode())
            log.flush()
            self._spawned_at = time.time()
            try:
                self._proc = _popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, env=env, cwd=self.cwd,
                )
            except OSError as exc:
                raise ServerStartError(
                    f"environment server {self.name}: cannot run `{shlex.join(argv)}`: {exc}; "
                    "is it installed, and is the command in envs.yaml right?"
                ) from exc
        _live.add(self)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None and (code := self._proc.poll()) is not None:
                self.stop()  # whatever it started before dying
                tail = self.log_tail()
                raise ServerStartError(
                    f"environment server {self.name} {_describe_exit(code)} before it answered "
                    f"at {self.url}; command: `{shlex.join(self.argv or [])}`; "
                    f"last lines of {self.log_path}:\n{tail}",
                    exit_code=code, log_tail=tail,
                )
            remaining = deadline - time.monotonic()
            reason = probe(self.url, max(0.05, min(self.probe_timeout, remaining)))
            if reason is None and self._owns_port():
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_INTERVAL)  # polling the health condition until the deadline
        if self.attached:
            raise ServerStartError(
                f"environment server {self.name} at {self.url} did not answer GET / within "
                f"{timeout:g} s ({reason}); is it running and healthy? start it, or point "
                f"envs.{self.name}.url at one that is"
            )
        tail = self.log_tail()
        self.stop()
        raise ServerStartError(
            f"environment server {self.name} (`{shlex.join(self.argv or [])}`) did not answer "
            f"GET / at {self.url} within {timeout:g} s ({reason or 'another process owns the port'}); "
            f"it was stopped; raise envs.{self.name}.startup_timeout if it is slow to start; "
            f"last lines of {self.log_path}:\n{tail}",
            log_tail=tail,
        )

    def _owns_port(self) -> bool:
        """For a spawned server: is the answer coming from our process tree?

        Guards against another program that grabbed the port between our choice
        and the server's bind. Unknowable without permission: then assume yes.
        """
        if self._proc is None:
            return True
        try:
            root = psutil.Process(self._proc.pid)
            for proc in [root, *root.children(recursive=True)]:
                for conn in proc.net_connections(kind="inet"):
                    if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == self.port:
                        return True
        except (psutil.AccessDenied, psutil.ZombieProcess):
            return True
        except psutil.NoSuchProcess:
            return False
        return False

    # -- watching ---------------------------------------------------------------------

    def is_alive(self) -> bool:
        """Spawned: the process is running. Attached: the URL answers."""
        if self.attached:
            return probe(self.url, self.probe_timeout) is None
        return self._proc is not None and self._proc.poll() is None

    def poll(self) -> int | None:
        """The exit code once the spawned process has ended (negative: killed by
        that signal), else None. Always None for an attached server."""
        if self._proc is not None:
            code = self._proc.poll()
            if code is not None:
                self._last_exit = code
            return code
        return self._last_exit

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()[-20_000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    # -- restarting and stopping ----------------------------------------------------

    def restart(self) -> "ManagedServer":
        """Stop the process (if any) and start it again on the same port."""
        if self.attached:
            raise ServerError(
                f"environment server {self.name} at {self.url} is attached, not started here, "
                "so it cannot be restarted from here; restart it where it runs"
            )
        self.stop()
        return self.start()

    def stop(self) -> None:
        """Stop a spawned server and everything it started; no-op when attached or stopped."""
        proc, self._proc = self._proc, None
        _live.discard(self)
        if proc is None:
            return
        # Everything it started: its session (it is the session leader, sid == pid),
        # plus descendants that moved to a session of their own.
        family = _session_members(proc.pid, self._spawned_at)
        if proc.poll() is None:
            family += _descendants(proc.pid)
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(self.stop_grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        self._last_exit = proc.returncode
        left = [p for p in {p.pid: p for p in family}.values() if p.pid != proc.pid and _running(p)]
        for p in left:
            _quietly(p.terminate)
        _, alive = psutil.wait_procs(left, timeout=self.stop_grace)
        for p in alive:
            _quietly(p.kill)
        psutil.wait_procs(alive, timeout=self.stop_grace)

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _session_members(sid: int, since: float) -> list[psutil.Process]:
    """Processes in session ``sid`` created after ``since`` (guards against pid reuse)."""
    members = []
    for proc in psutil.process_iter(["create_time"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["create_time"] >= since - 1.0:
                members.append(proc)
        except (OSError, psutil.Error):
            continue
    return members


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _quietly(action: Callable[[], None]) -> None:
    try:
        action()
    except psutil.NoSuchProcess:
        pass


# -- what to do for an environment -------------------------------------------------


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


def _embedded_available(name: str) -> bool:
    from pytest_agentgym.servers.embedded import EMBEDDED_SERVERS

    module = EMBEDDED_SERVERS.get(name)
    try:
        return module is not None and importlib.util.find_spec(module) is not None
    except ImportError:
        return False


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
        argv = ("{python}", "-m", "pytest_agentgym", "serve", spec.embedded,
                "--host", "{host}", "--port", "{port}")
        return ServerPlan(spec.name, "embedded", url, argv,
                          f"embedded server: pytest-agentgym serve {spec.embedded}")
    executable = None
    if spec.command:
        executable = build_argv(spec.command, host=host, port=spec.port, python=python)[0]
        found = which(executable)
        if found:
            return ServerPlan(spec.name, "command", url, tuple(shlex.split(spec.command)),
                              f"command `{executable}` ({found})")
    if executable:
        todo = f"install agentenv-{Path(executable).name} (its `{Path(executable).name}` command)"
    else:
        todo = "configure a command for it"
    if spec.embedded:
        todo = f"this installation lacks the embedded server {spec.embedded!r}; {todo}"
    return ServerPlan(
        spec.name, "unavailable", url, None,
        f"environment server {spec.name} is not running at {url} and cannot be started here: "
        f"{todo} or set envs.{spec.name}.url",
    )


class ServerPool:
    """The servers a run needs, one per environment, started on first use.

    ``attach_running``: when ``url`` is not set but something already answers on
    the environment's configured port, use it instead of spawning another.
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
    ) -> None:
        items = specs.values() if isinstance(specs, Mapping) else specs
        self.specs = {spec.name: spec for spec in items}
        self.host = host
        self.python = python
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="agentgym-servers-"))
        self.attach_running = attach_running
        self.probe_timeout = probe_timeout
        self.stop_grace = stop_grace
        self._servers: dict[str, ManagedServer] = {}
        self._lock = threading.RLock()

    def _spec(self, env: str) -> EnvSpec:
        try:
            return self.specs[env]
        except KeyError:
            raise KeyError(f"no environment {env!r} configured; known: {', '.join(sorted(self.specs))}") from None

    def _make(self, spec: EnvSpec) -> ManagedServer:
        plan = plan_server(spec, host=self.host, python=self.python)
        common = dict(startup_timeout=spec.startup_timeout, stop_grace=self.stop_grace,
                      probe_timeout=self.probe_timeout, python=self.python)
        if plan.how == "attach":
            return ManagedServer(spec.name, url=plan.url, **common)
        if self.attach_running and probe(plan.url, self.probe_timeout) is None:
            return ManagedServer(spec.name, url=plan.url, **common)
        if plan.command is None:
            raise ServerUnavailable(plan.detail)
        port = free_port(self.host)
        return ManagedServer(spec.name, command=list(plan.command), host=self.host, port=port,
                             log_path=self.log_dir / f"{spec.name}-{port}.log", **common)

    def start(self, env: str) -> ManagedServer:
        """The running server of ``env``, started (or attached) on first call."""
        with self._lock:
            server = self._servers.get(env)
            if server is None:
                server = self._make(self._spec(env))
                server.start()
                self._servers[env] = server
            return server

    def base_url(self, env: str) -> str:
        """The URL the protocol client uses for ``env`` (server URL + path prefix)."""
        return self._spec(env).base_url(self.start(env).url)

    def ensure(self, env: str) -> ManagedServer:
        """Like :meth:`start`, but a spawned server that has died is restarted
        (same port); an attached one that stopped answering is an error."""
        with self._lock:
            server = self.start(env)
            if server.is_alive():
                return server
            if server.attached:
                raise ServerError(
                    f"environment server {env} at {server.url} stopped answering; it is attached, "
                    "not started here: restart it where it runs"
                )
            return server.restart()

    def restart(self, env: str) -> ManagedServer:
        with self._lock:
            return self.start(env).restart() if env in self._servers else self.start(env)

    def stop_all(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.stop()
            self._servers.clear()

    @property
    def servers(self) -> dict[str, ManagedServer]:
        return dict(self._servers)

    def __enter__(self) -> "ServerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
