"""A fleet for work-queue tests and benchmarks: `pytest-agentgym worker` processes
on loopback, a coordinator project, and what the queue's streams hold.

    fleet = Fleet(tmp_path, queue_url)
    fleet.start("w1", profile=worker_profile(tmp_path / "w.yaml", concurrency=2))
    fleet.wait_serving("w1")
    ...
    fleet.stop_all()

Workers are real processes (their own reference agent and embedded servers);
each writes its output to ``<base>/<name>.out`` and its log to
``<base>/<name>/worker.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers import REPO
from helpers.waiting import wait_until


def worker_profile(path: Path, *, concurrency: int = 2, latency_ms: int = 0, skip: tuple[str, ...] = (),
                   name: str = "fleetnode") -> Path:
    """A node profile for a worker: the reference agent (``latency_ms`` per reply), spawned servers."""
    skipped = ", ".join(("WebArena", "SciWorld", "WebShop", "SQLGym", "ALFWorld", *skip))
    path.write_text(
        f"name: {name}\n"
        f"model: {{endpoints: [{{kind: reference, latency_ms: {latency_ms}}}], "
        f"sampling: {{temperature: 0.0, max_tokens: 256}}, retries: 2}}\n"
        f"limits: {{max_rounds: 20, episode_timeout: 120, concurrency: {concurrency}}}\n"
        f"envs: {{servers: spawn, skip: [{skipped}]}}\n")
    return path


def suites(root: Path, **tasks: str) -> Path:
    """Suite files under ``root/suites``: ``suites(root, Maze="0-19", Wordle="0-9")``."""
    folder = root / "suites"
    folder.mkdir(parents=True, exist_ok=True)
    for env, selection in tasks.items():
        (folder / f"{env.lower()}.yaml").write_text(f"environment: {env}\ntasks: {selection}\n")
    return folder


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def env_with_repo() -> dict[str, str]:
    """The environment for child processes: this checkout's package first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


class Fleet:
    def __init__(self, base: Path, url: str) -> None:
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.url = url
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *, profile: Path, heartbeat: float = 0.5, nak_delay: float = 0.5,
              extra: tuple[str, ...] = ()) -> subprocess.Popen:
        out = open(self.base / f"{name}.out", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_agentgym", "worker", "--nats", self.url, "--node", str(profile),
             "--name", name, "--log-dir", str(self.base / name), "--heartbeat", str(heartbeat),
             "--nak-delay", str(nak_delay), *extra],
            cwd=self.base, stdout=out, stderr=subprocess.STDOUT, env=env_with_repo(), start_new_session=True)
        out.close()
        self.procs[name] = proc
        return proc

    def output(self, name: str) -> str:
        return (self.base / f"{name}.out").read_text(errors="replace")

    def log(self, name: str) -> str:
        path = self.base / name / "worker.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def wait_serving(self, *names: str, timeout: float = 60.0) -> None:
        for name in names:
            wait_until(lambda: " serving queue " in self.output(name), timeout, f"worker {name} serves",
                       procs=(self.procs[name],))

    def playing(self, name: str) -> set[str]:
        """Msg ids of the episodes ``name`` started and did not finish (from its log)."""
        started, finished = set(), set()
        for line in self.log(name).splitlines():
            if " playing " in line:
                started.add(line.split(" playing ", 1)[1].split(" delivery ")[0])
            elif " played " in line:
                finished.add(line.split(" played ", 1)[1].split(" delivery ")[0])
        return started - finished

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the worker's whole process group (it and the servers it spawned)."""
        proc = self.procs[name]
        os.killpg(proc.pid, sig)
        proc.wait(30)

    def stop_all(self) -> dict[str, int]:
        codes = {}
        for name, proc in self.procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                codes[name] = proc.wait(10)
        return codes
