"""A run stopped by SIGTERM: pytest's summary and run.json count the same episodes. The
engine plays episodes ahead of their items; those recorded before the stop are reported as
their items' results (plugin/ahead.py), so the two agree (issue 39: 39 passed and 21
unsolved in the summary, 42 and 21 in run.json). A real run, a real signal."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

from helpers.projects import make_project, run_json, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]


def test_after_sigterm_the_summary_and_run_json_agree(pytester):
    node = make_project(pytester, latency_ms=30)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\nrepeat: 2\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-24\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=stopped", "--agentgym-concurrency=8"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    results = pytester.path / "reports" / "stopped" / "episodes.jsonl"
    wait_until(lambda: written_lines(results) >= 20, 180, "20 episodes recorded", procs=(proc,))
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 2, output
    counts = run_json(pytester, "stopped")["counts"]
    summary = [line for line in output.splitlines() if re.match(r"^=+ .* in [\d.]+s", line)][-1]
    said = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|unsolved|error)", summary)}
    assert 20 <= counts["episodes"] < 75, counts
    assert (said.get("passed", 0), said.get("unsolved", 0), said.get("failed", 0)) == (
        counts["passed"], counts["unsolved"], counts["failed"]), (summary, counts)
