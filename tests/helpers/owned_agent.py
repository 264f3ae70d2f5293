"""The reference agent as a model endpoint of the test's own, on a port it keeps: started,
killed with SIGKILL and started again on the same port, as a user's gateway is when it
is restarted (the harness never restarts an endpoint it did not launch). For the outage
tests of every door (tests/run/test_endpoint_outage.py, tests/rollouts/test_rollout_outage.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pytest_agentgym.process.health import free_port

from helpers.waiting import wait_until


class Agent:
    """The reference agent as a process of the test's own, on a fixed port."""

    def __init__(self, tmp: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"agent-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Agent":
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                          "--host", "127.0.0.1", "--port", str(self.port), "--latency-ms", "300"],
                                         stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._healthy, 60, f"the reference agent answers on {self.url}", procs=(self.proc,))
        return self

    def _healthy(self) -> bool:
        # urllib, not httpx: pytester puts back sys.modules after each test, and httpx's
        # exception classes imported since would no longer be those it raises
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1.0) as answer:
                return answer.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def agents(tmp_path):
    started: list[Agent] = []

    def make(port: int | None = None) -> Agent:
        agent = Agent(tmp_path, port).start()
        started.append(agent)
        return agent

    yield make
    for agent in started:
        agent.stop()
