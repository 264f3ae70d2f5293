"""The JVMs of the embedded SciWorld server: started on demand, kept for reuse.

AgentGym's server starts a JVM for every ``/create`` (about 2-3 s and a few
hundred MB each) and shuts it down on ``/close``. Here a closed environment's
simulator goes back to a small pool of spares instead, and the next ``/create``
takes it; ``/reset`` loads the task afresh (``load`` rebuilds the whole world
and zeroes score and moves), so an episode cannot tell. The JVM that enumerates
the tasks at start-up is the first spare.

``spares`` is how many idle JVMs are kept (environment variable
``AGENTGYM_SCIWORLD_SPARE_JVMS``, default 2); ``0`` behaves like the original:
one new JVM per ``/create``, shut down on ``/close``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from pytest_agentgym.servers.embedded.sciworld_tasks import start_simulator

SPARES_ENV = "AGENTGYM_SCIWORLD_SPARE_JVMS"
DEFAULT_SPARES = 2


def spares_from_env(environ: dict[str, str] | None = None) -> int:
    raw = (os.environ if environ is None else environ).get(SPARES_ENV, "").strip()
    if not raw:
        return DEFAULT_SPARES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{SPARES_ENV}={raw!r}: expected a whole number >= 0 (idle JVMs kept for reuse)")
    return value


def jvm_alive(simulator: Any) -> bool:
    """Whether the JVM behind a ``ScienceWorldEnv`` is still running."""
    process = getattr(getattr(simulator, "_gateway", None), "java_process", None)
    return process is None or process.poll() is None


class SimulatorPool:
    """Hands out simulators (one JVM each) and takes them back."""

    def __init__(self, spares: int = DEFAULT_SPARES,
                 start: Callable[[], Any] = start_simulator) -> None:
        self.spares = spares
        self._start = start
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.started = 0

    def take(self) -> Any:
        """An idle simulator if there is one, else a new JVM (blocking for its start)."""
        with self._lock:
            while self._idle:
                simulator = self._idle.pop()
                if jvm_alive(simulator):
                    return simulator
            self.started += 1
        return self._start()

    def give_back(self, simulator: Any) -> None:
        """Keep ``simulator`` for a later :meth:`take`; shut it down when the pool is
        full, and drop it when its JVM has died (killed, crashed)."""
        alive = jvm_alive(simulator)
        with self._lock:
            if alive and len(self._idle) < self.spares:
                self._idle.append(simulator)
                return
        simulator.close()

    @property
    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        """Shut down every idle JVM (those in use belong to their environments)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for simulator in idle:
            simulator.close()
