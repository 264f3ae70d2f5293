"""Real processes for the tests of the rollout service's guards (its key, its callers,
its queue, its request size, its shutdown): the service started with an environment
of the test's choosing (a key, a token), a reference agent slow enough for work to
queue, and endpoints that write down the headers they get (helpers/header_log.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import httpx

from pytest_agentgym.process.managed import ManagedServer

from helpers import HELPERS, REPO

ROLLOUT_SERVER = [sys.executable, "-m", "pytest_agentgym", "rollout-server"]


def _server(name: str, command: list[str], log_dir: Path, *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None) -> ManagedServer:
    return ManagedServer(name, command=command, log_path=log_dir / f"{name}.log", startup_timeout=60,
                         label=name, cwd=cwd, env={"PYTHONPATH": str(REPO), **(env or {})}).start()


def header_log(log_dir: Path, name: str) -> ManagedServer:
    """An endpoint that answers as a model and lists the headers it got at ``GET /log``."""
    return _server(name, [sys.executable, str(HELPERS / "header_log.py"), "{port}"], log_dir)


def logged(server: ManagedServer) -> list[dict[str, Any]]:
    """What ``server`` (a :func:`header_log`) was sent so far: method, path, headers."""
    return httpx.get(f"{server.url}/log", timeout=10).json()


def slow_agent(log_dir: Path, latency_ms: int) -> ManagedServer:
    """The reference agent, taking ``latency_ms`` per reply."""
    return _server(f"slow-agent-{latency_ms}", [sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                                "--port", "{port}", "--latency-ms", str(latency_ms)], log_dir)


def guarded_service(workdir: Path, *args: str, run_id: str = "guarded",
                    env: Mapping[str, str] | None = None) -> ManagedServer:
    """``pytest-agentgym rollout-server ARGS`` in ``workdir`` on a free loopback port, with
    ``env`` added to its environment; its output is in workdir/rollout-server-<run_id>.log."""
    workdir.mkdir(parents=True, exist_ok=True)
    return _server(f"rollout-server-{run_id}", [*ROLLOUT_SERVER, "--port", "{port}", "--run-id", run_id, *args],
                   workdir, cwd=workdir, env=env)


def start_refused(workdir: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``pytest-agentgym rollout-server ARGS`` for a start that should be refused (it exits by itself)."""
    import os

    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*ROLLOUT_SERVER, *args], cwd=workdir, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
