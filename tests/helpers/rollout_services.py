"""Real processes for the rollout service's tests: the service itself
(``python -m pytest_agentgym rollout-server``), the reference agent and the
logprob test endpoint, each on a free loopback port."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

from pytest_agentgym.process.managed import ManagedServer

from helpers import HELPERS, REPO


def _server(name: str, command: list[str], log_dir: Path, cwd: Path | None = None) -> ManagedServer:
    return ManagedServer(name, command=command, log_path=log_dir / f"{name}.log", startup_timeout=60,
                         label=name, cwd=cwd, env={"PYTHONPATH": str(REPO)}).start()


def reference_agent(log_dir: Path) -> ManagedServer:
    return _server("reference-agent", [sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                       "--port", "{port}"], log_dir)


def logprob_model(log_dir: Path) -> ManagedServer:
    return _server("logprob-model", [sys.executable, str(HELPERS / "logprob_model.py"), "{port}"], log_dir)


def rollout_server(workdir: Path, *args: str, run_id: str = "rollouts") -> ManagedServer:
    """The service, started in ``workdir`` (its run directory: workdir/reports/<run_id>)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return _server(f"rollout-server-{run_id}", [sys.executable, "-m", "pytest_agentgym", "rollout-server",
                                                "--port", "{port}", "--run-id", run_id, *args], workdir, cwd=workdir)


def post(service: ManagedServer, body: Any, query: str = "", timeout: float = 120.0) -> httpx.Response:
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx.post(f"{service.url}/rollouts{query}", content=content, timeout=timeout,
                      headers={"Content-Type": "application/json"})
