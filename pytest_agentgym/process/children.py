"""Child processes: forking one that dies with the harness, and stopping one's whole family.

:func:`popen` starts a child in its own session with ``PR_SET_PDEATHSIG`` (Linux),
forking it from a thread that lives as long as the process. Stopping is
:func:`signal_group` (SIGTERM, then SIGKILL, to its process group), then
:func:`sweep` of what is left of its session (:func:`session_members`) and its
descendants (:func:`descendants`). :func:`in_parallel` stops several at once.
:class:`~pytest_agentgym.process.managed.ManagedServer` is the one user; no HTTP here.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import psutil

__all__ = ["descendants", "in_parallel", "popen", "session_members", "signal_group", "sweep"]


# -- spawning: a death signal, from a thread that lives as long as the process -------

_PR_SET_PDEATHSIG = 1
_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)  # loaded here: never dlopen after fork
    except OSError:  # pragma: no cover - no libc symbols available
        _libc = None


#: Signals that stop the harness. Python runs its at-fork hooks (``logging``'s, for one)
#: in the parent right after a ``preexec_fn`` fork; a SIGINT handled inside one of them
#: raises there, is printed as "Exception ignored" and is lost, so Ctrl-C during a
#: server's start-up went unheard. :func:`popen` holds them (blocked, left pending)
#: across the fork on the main thread; they are handled once the fork is done.
_HELD_ACROSS_FORK = frozenset({signal.SIGINT, signal.SIGTERM})


def _child_setup(parent_pid: int, death_signal: int,
                 mask: "set[signal.Signals] | None" = None) -> Callable[[], None]:
    """What the child runs between fork and exec: the parent's signal mask as it was
    before :func:`popen` held the stop signals, and death with the parent (Linux)."""

    def setup() -> None:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, death_signal)
            if os.getppid() != parent_pid:  # the parent died before prctl took effect
                os._exit(1)

    return setup


# PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the
# process, so a child forked from a short-lived thread (``asyncio.to_thread``, a
# pool worker) would die with that thread. Children not forked on the main thread
# are therefore forked by one daemon thread that lives until the process exits.
_spawn_requests: queue.SimpleQueue = queue.SimpleQueue()
_spawner_lock = threading.Lock()
_spawner: list[threading.Thread] = []


def _serve_spawn_requests() -> None:
    while True:
        function, result = _spawn_requests.get()
        try:
            result.set_result(function())
        except BaseException as exc:  # handed back to the caller
            result.set_exception(exc)


def popen(argv: list[str], death_signal: int, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(argv, **kwargs)`` for a child that gets ``death_signal`` when
    the harness dies: forked here on the main thread, else by the spawner thread."""
    if threading.current_thread() is threading.main_thread():
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_ACROSS_FORK)
        try:
            kwargs["preexec_fn"] = _child_setup(os.getpid(), death_signal, mask)
            child = subprocess.Popen(argv, **kwargs)
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a held Ctrl-C is handled here
        except BaseException:  # nobody will hold this child: it goes with the interrupt
            child.kill()
            child.wait()
            raise
        return child
    kwargs["preexec_fn"] = _child_setup(os.getpid(), death_signal)
    with _spawner_lock:
        if not _spawner:
            _spawner.append(threading.Thread(target=_serve_spawn_requests, name="agentgym-spawner",
                                             daemon=True))
            _spawner[0].start()
    result: Future = Future()
    _spawn_requests.put((lambda: subprocess.Popen(argv, **kwargs), result))
    return result.result()


# -- stopping: the whole family -----------------------------------------------------


def in_parallel(calls: "list[Callable[[], object]]") -> None:
    """Run ``calls`` side by side, one thread each, and wait for all (the first failure is
    raised). Stopping a server waits for it to exit (uvicorn takes 0.1-0.2 s); stopping
    several one after another would add those waits up."""
    if len(calls) <= 1:
        for call in calls:
            call()
        return
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="agentgym-stop") as pool:
        futures = [pool.submit(call) for call in calls]
    for future in futures:
        future.result()


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def session_members(sid: int, since: float) -> list[psutil.Process]:
    """Processes in session ``sid`` created after ``since`` (guards against pid reuse)."""
    members = []
    for proc in psutil.process_iter(["create_time"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["create_time"] >= since - 1.0:
                members.append(proc)
        except (OSError, psutil.Error):
            continue
    return members


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def sweep(processes: list[psutil.Process], grace: float) -> None:
    """Terminate the processes still running, then kill those left after ``grace`` s."""
    left = processes
    for stage in ("terminate", "kill"):
        for proc in left:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    getattr(proc, stage)()
            except psutil.NoSuchProcess:
                pass
        _, left = psutil.wait_procs(left, timeout=grace)


def tree_listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` or one of its descendants listens on ``port``. Unknowable
    without permission: then yes; a process that is gone: no."""
    try:
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                    return True
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return True
    except psutil.NoSuchProcess:
        return False
    return False
