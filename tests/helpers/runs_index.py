"""A reports directory of several runs for the runs index and ``pytest-agentgym view``
tests, and the view server as a real subprocess.

Runs are written through :class:`~pytest_agentgym.results.store.RunDir` as the plugin
writes them: a finished run's run.json carries its summaries, counts and gates (what the
end of a run writes), a running run's carries this process as its writer (so it is told
live) and no end.
"""

from __future__ import annotations

import dataclasses
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pytest_agentgym.results.aggregate import summaries_record, summarize
from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.lock import this_process
from pytest_agentgym.results.store import RunDir

from helpers import REPO
from helpers.compare_fixtures import paired_run


def finished_run(root: Path, run_id: str, envs: dict[str, str], *, started_at: str, checkpoint: str | None = None,
                 model: str = "qwen3.5-9b", node: str = "4090", gate: float = 0.5) -> RunDir:
    """A finished run (marks as :func:`helpers.compare_fixtures.paired_run`: P, F, E, -) whose
    run.json holds what a run's end writes: summaries, counts, a success-rate gate per environment."""
    run = paired_run(root, run_id, envs, checkpoint=checkpoint, started_at=started_at, model=model)
    info, records = run.read_info(), current_records(run.read_episodes())
    summaries = summarize(records)
    gates = tuple({"env": env, "gate": f"success_rate >= {gate}", "value": s.success_rate,
                   "passed": (s.success_rate or 0) >= gate,
                   "outcome": "passed" if (s.success_rate or 0) >= gate else "failed",
                   "detail": f"success_rate = {s.success_rate}"} for env, s in summaries.items())
    run.write_info(dataclasses.replace(
        info, node=node, status="finished", summaries=summaries_record(summaries), gates=gates,
        counts={"episodes": len(records), "errors": sum(1 for r in records if r.error), "planned": len(records)}))
    return run


def running_run(root: Path, run_id: str, envs: dict[str, str], *, started_at: str,
                checkpoint: str | None = None, model: str = "qwen3.5-9b") -> RunDir:
    """A run still being written: no end time, status running, this process its writer."""
    run = paired_run(root, run_id, envs, checkpoint=checkpoint, started_at=started_at, model=model)
    run.write_info(dataclasses.replace(run.read_info(), status="running", ended_at=None, process=this_process(),
                                       summaries={}, counts={}))
    return run


def start_view(reports: Path, *args: str, timeout: float = 60.0) -> tuple[subprocess.Popen, str]:
    """``pytest-agentgym view REPORTS --port 0`` as a subprocess; returns it and the URL it
    printed once it listens (it prints the line after binding)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "pytest_agentgym", "view", str(reports), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    assert proc.stdout is not None
    deadline, seen = time.monotonic() + timeout, b""
    while b"\n" not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"pytest-agentgym view did not say where it listens: {seen.decode(errors='replace')}"
                                 f"{proc.stdout.read().decode(errors='replace')}")
        if select.select([proc.stdout], [], [], left)[0]:
            chunk = os.read(proc.stdout.fileno(), 4096)
            seen += chunk
    line = seen.decode().splitlines()[0]
    url = next(word for word in line.split() if word.startswith("http://"))
    return proc, url


def stop_view(proc: subprocess.Popen, signum: int = 2) -> tuple[int, str]:
    """Send ``signum`` (SIGINT: Ctrl-C) and return the exit status and the rest of the output."""
    if proc.poll() is None:
        proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"pytest-agentgym view did not stop on signal {signum}: {out!r}")
    return proc.returncode, out.decode(errors="replace")


def get(url: str) -> tuple[int, Any]:
    """GET ``url`` (loopback, no proxy): the status and the body (JSON decoded when it is JSON)."""
    import json
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=60) as answer:
            status, kind, body = answer.status, answer.headers.get("Content-Type", ""), answer.read()
    except urllib.error.HTTPError as error:
        status, kind, body = error.code, error.headers.get("Content-Type", ""), error.read()
    return status, json.loads(body) if kind.startswith("application/json") else body.decode("utf-8")
