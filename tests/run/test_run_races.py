"""One writer per run directory: two processes on the same run directory, released
at the same instant by one barrier, never both write it. Real pytest processes with
the real reference agent and embedded servers."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from helpers.barrier import install_pytest_plugin, start_together
from helpers.projects import episodes, make_project, run, run_json, suite

pytestmark = [pytest.mark.faults, pytest.mark.heavy]


def _both(pytester, *args: str) -> list[tuple[int, str]]:
    plugin = install_pytest_plugin(pytester.path)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", plugin, *args]
    procs = start_together([command, command], cwd=pytester.path, fifo_dir=pytester.path)
    outputs = [proc.communicate(timeout=300)[0].decode() for proc in procs]
    return [(proc.returncode, output) for proc, output in zip(procs, outputs)]


def _one_ran_one_refused(results: list[tuple[int, str]]) -> tuple[str, str]:
    codes = sorted(code for code, _ in results)
    assert codes == [0, 4], results  # one run, one usage error
    ran = next(out for code, out in results if code == 0)
    refused = next(out for code, out in results if code == 4)
    return ran, refused


def test_two_runs_with_one_run_id_started_at_the_same_instant_write_it_once(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    results = _both(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=twin")
    ran, refused = _one_ran_one_refused(results)
    assert "in use by process" in refused and "on host" in refused or "is taken" in refused, refused
    records = episodes(pytester, "twin")
    keys = Counter((r["env"], r["task_index"], r["repeat"]) for r in records)
    assert len(records) == 25 and set(keys.values()) == {1}
    info = run_json(pytester, "twin")
    assert info["status"] == "finished" and info["counts"]["episodes"] == 25


def test_two_resumes_of_one_run_started_at_the_same_instant_play_each_missing_episode_once(pytester):
    """The run to resume is a real killed one (SIGKILL after 3 episodes): a resume plays the
    run's whole selection, so a run narrowed with -k would not do (its resume may not widen it)."""
    import signal

    from helpers.run_dirs import written_lines
    from helpers.waiting import wait_until

    node = make_project(pytester, latency_ms=60)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=half"], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: written_lines(pytester.path / "reports" / "half" / "episodes.jsonl") >= 3, 180,
                   "3 episodes recorded", procs=(proc,))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    played = len(episodes(pytester, "half"))
    assert 0 < played < 25
    results = _both(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/half")
    ran, refused = _one_ran_one_refused(results)
    assert "in use by process" in refused, refused
    records = episodes(pytester, "half")
    newest = Counter((r["env"], r["task_index"], r["repeat"], r["generation"]) for r in records)
    assert set(newest.values()) == {1}, [k for k, n in newest.items() if n > 1]
    assert len({(r["env"], r["task_index"]) for r in records}) == 25
    assert run_json(pytester, "half")["generation"] == 2


def test_a_resume_of_a_live_run_names_its_holder_and_a_dead_holder_is_taken_over(pytester):
    """The lock names the pid and host of the live writer; once that process is gone
    (SIGKILL: no clean-up) the next resume takes the lock over."""
    import signal

    from helpers.run_dirs import written_lines
    from helpers.waiting import wait_until

    node = make_project(pytester, latency_ms=60)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=held"], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = pytester.path / "reports" / "held" / "episodes.jsonl"
    try:
        wait_until(lambda: written_lines(results) >= 3, 180, "3 episodes recorded", procs=(proc,))
        refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/held")
        assert refused.ret == 4
        refused.stderr.fnmatch_lines([f"*reports/held is in use by process {proc.pid} on host *"])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/held")
    assert resumed.ret == 0, resumed.stdout.str()
    info = run_json(pytester, "held")
    assert info["status"] == "finished" and info["counts"]["episodes"] == 25
