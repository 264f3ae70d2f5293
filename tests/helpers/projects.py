"""A user's project for tests that run pytest with the plugin in a subprocess:
a node profile whose model is the real reference agent, suite files, and the
run's records."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from helpers import REPO
from helpers.run_dirs import read_episodes

NODE = """\
name: testnode
model:
  endpoints:
    - kind: reference
      policy: {policy}
      latency_ms: {latency_ms}
limits: {{max_rounds: 15, episode_timeout: 60, concurrency: 2}}
envs: {{servers: spawn}}
"""


def make_project(pytester: pytest.Pytester, *, policy: str = "reference", latency_ms: int = 0) -> Path:
    (pytester.path / "nodes").mkdir()
    (pytester.path / "nodes" / "testnode.yaml").write_text(NODE.format(policy=policy, latency_ms=latency_ms))
    (pytester.path / "suites").mkdir()
    return pytester.path / "nodes" / "testnode.yaml"


def suite(pytester: pytest.Pytester, name: str, body: str) -> Path:
    path = pytester.path / "suites" / f"{name}.yaml"
    path.write_text(body)
    return path


def copy_shipped_suite(pytester: pytest.Pytester, relative: str) -> Path:
    """Copy the repository's suite file ``relative`` (e.g. ``suites/moderate/sqlgym.yaml``)
    to the same place in the test project, so the run reads the suite as shipped."""
    target = pytester.path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / relative, target)
    return target


def run(pytester: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, timeout=timeout)


def episodes(pytester: pytest.Pytester, run_id: str) -> list[dict]:
    """The records of the project's run ``run_id`` (its reports/<run_id>/episodes.jsonl)."""
    return read_episodes(pytester.path / "reports" / run_id)


def run_json(pytester: pytest.Pytester, run_id: str) -> dict:
    """The run.json of the project's run ``run_id``."""
    return json.loads((pytester.path / "reports" / run_id / "run.json").read_text())


class ConnectionCounter:
    """A TCP listener that counts every connection made to it (and answers nothing)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()
