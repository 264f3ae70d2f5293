"""Fixtures shared by the project's tests: real servers on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One embedded server started with `python -m pytest_agentgym serve NAME`."""

    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / f"{name}-{self.port}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest_agentgym", "serve", name,
                 "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT,
            )
        self._wait_ready(timeout=60)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} server exited: {self.log.read_text()[-2000:]}")
            try:
                httpx.get(self.url + "/", timeout=1.0)
                return
            except httpx.TransportError:
                time.sleep(0.05)  # polling for readiness, not standing in for sync
        self.stop()
        raise RuntimeError(f"{self.name} server did not answer within {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """Factory: ``embedded_server("babyai")`` -> a running ServerProcess (one per name)."""
    started: dict[str, ServerProcess] = {}
    log_dir = tmp_path_factory.mktemp("server-logs")

    def get(name: str) -> ServerProcess:
        if name not in started:
            started[name] = ServerProcess(name, log_dir)
        return started[name]

    yield get
    for server in started.values():
        server.stop()


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run tests marked slow (vLLM on CPU, long runs)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: pass --run-slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
