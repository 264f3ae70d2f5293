"""An embedded server of one's own, for tests that kill it or start it with their own
environment (the conftest's ``embedded_server`` fixture shares one per session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer, free_port


def start_embedded(name: str, env_name: str, log_dir: Path, env: dict[str, str] | None = None,
                   startup_timeout: float = 120) -> ManagedServer:
    """``pytest-agentgym serve <name>`` as a real process on a free port, started."""
    port = free_port()
    return ManagedServer(
        env_name, command=embedded_command(name), port=port, env=env,
        log_path=log_dir / f"{name}-{port}.log", startup_timeout=startup_timeout,
        label=f"embedded server {name}",
    ).start()


def pid_serving(port: str) -> int:
    """The pid of the `pytest-agentgym serve ... --port PORT` process (a server a run spawned,
    found from its log's name, to kill it with a real signal)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"--port" in argv and argv[argv.index(b"--port") + 1] == port.encode():
            return int(entry.name)
    raise AssertionError(f"no server process on port {port}")


@dataclass
class KilledRun:
    returncode: int
    output: str
    #: records written when the server was killed
    killed_at: int
    #: the killed server's log (reports/<run>/logs/<env>-<port>.log)
    log: Path


def run_killing_a_server(cwd: Path, args: list[str], run_dir: Path, *, after_records: int,
                         pick: Callable[[Path], Path]) -> KilledRun:
    """``pytest ARGS`` in ``cwd`` as a real process; once ``run_dir`` holds ``after_records``
    records, SIGKILL the spawned server whose log ``pick(logs_dir)`` names; the run to its end."""
    from helpers.run_dirs import written_lines
    from helpers.waiting import wait_until

    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: written_lines(run_dir / "episodes.jsonl") >= after_records, 120,
                   f"{after_records} episodes recorded", procs=(proc,))
        log = pick(run_dir / "logs")
        os.kill(pid_serving(log.stem.split("-")[1]), signal.SIGKILL)
        killed_at = written_lines(run_dir / "episodes.jsonl")
        output = proc.communicate(timeout=300)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    return KilledRun(proc.returncode, output, killed_at, log)
