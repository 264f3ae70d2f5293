"""A run that stops early is never recorded as finished and its gates are never
judged as passed: Ctrl-C once or twice, SIGTERM, a crash found later. Real pytest
processes with the real reference agent and embedded servers; real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from helpers.projects import make_project, run_json, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

#: 25 Maze episodes with a gate the first episodes meet (the reference agent solves Maze).
SUITE = "environment: Maze\ntasks: 0-24\nrepeat: 2\ngates: [success_rate >= 0.5]\n"

#: A conftest that sends this process a second, real SIGINT while pytest is still
#: handling the first one (its KeyboardInterrupt report): the user pressing Ctrl-C twice.
SECOND_CTRL_C = """
import os, signal, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo):
    os.kill(os.getpid(), signal.SIGINT)
"""


def _start(pytester, node, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=partial",
                             "--junitxml=junit.xml", *extra],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _stop_after(pytester, proc, sig, episodes: int = 8) -> str:
    results = pytester.path / "reports" / "partial" / "episodes.jsonl"
    wait_until(lambda: written_lines(results) >= episodes, 180, f"{episodes} episodes recorded", procs=(proc,))
    proc.send_signal(sig)
    return proc.communicate(timeout=120)[0].decode()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_stopped_runs_gates_are_not_judged_anywhere(pytester, sig):
    node = make_project(pytester, latency_ms=30)
    suite(pytester, "maze", SUITE)
    proc = _start(pytester, node)
    output = _stop_after(pytester, proc, sig)
    assert proc.returncode == 2, output
    info = run_json(pytester, "partial")
    played = info["counts"]["episodes"]
    assert info["status"] == "interrupted" and 8 <= played < 50 and info["counts"]["planned"] == 50
    gate = info["gates"][0]
    assert gate["outcome"] == "not-judged" and gate["passed"] is False and gate["value"] is None
    assert gate["detail"] == f"run interrupted after {played} of 50 episodes"
    assert "GATE PASSED" not in output
    assert f"GATE NOT JUDGED: Maze success_rate >= 0.5: run interrupted after {played} of 50 episodes" in output
    junit = (pytester.path / "junit.xml").read_text()
    assert f'message="NOT JUDGED: run interrupted after {played} of 50 episodes"' in junit
    report = (pytester.path / "reports" / "partial" / "report.html").read_text()
    assert "gates passed" not in report and "GATES NOT JUDGED" in report
    assert f"{played} of 50" in report


def test_ctrl_c_twice_is_still_interrupted(pytester):
    """The second Ctrl-C arrives while pytest reports the first: pytest then ends the
    session as if nothing had happened (exit status 0 reaches sessionfinish)."""
    node = make_project(pytester, latency_ms=30)
    suite(pytester, "maze", SUITE)
    (pytester.path / "conftest.py").write_text(SECOND_CTRL_C)
    proc = _start(pytester, node)
    output = _stop_after(pytester, proc, signal.SIGINT)
    assert proc.returncode != 0, output
    info = run_json(pytester, "partial")
    assert info["status"] == "interrupted", (info["status"], output[-2000:])
    assert info["ended_at"] and info["gates"][0]["outcome"] == "not-judged"
    assert info["counts"]["episodes"] < 50


def test_a_complete_run_is_judged(pytester):
    """The control: the same suite played to the end passes its gate."""
    node = make_project(pytester)
    suite(pytester, "maze", SUITE)
    proc = _start(pytester, node)
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, output
    info = run_json(pytester, "partial")
    assert info["status"] == "finished" and info["gates"][0]["outcome"] == "passed"
    assert "GATE PASSED: Maze success_rate >= 0.5" in output


def test_a_run_stopped_by_x_is_not_judged(pytester):
    """-x stops at the first failing episode: the gate is not judged on what was played."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\nrepeat: 2\nmin_reward: 2\n"
                            "gates: [mean_reward >= 0.5]\n")  # no reward reaches 2: every episode fails
    proc = _start(pytester, node, "-x")
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 1, output
    info = run_json(pytester, "partial")
    played = info["counts"]["episodes"]
    assert played < 50 and info["status"] != "interrupted"
    assert info["gates"][0]["outcome"] == "not-judged"
    assert info["gates"][0]["detail"] == f"run ended early after {played} of 50 episodes"


HANGING_SERVER = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).touch(); time.sleep(600)"


def test_ctrl_c_during_start_up_stops_quietly_and_never_records_a_finished_or_unscored_run(pytester):
    """Ctrl-C while the environment server still boots (here: one that never answers):
    exit 2, no traceback, and no run.json that says the run ended any other way."""
    import yaml

    node = make_project(pytester)
    marker = pytester.path / "server-started"
    profile = yaml.safe_load(node.read_text())
    profile["envs"] = {"servers": "spawn", "overrides": {"Maze": {
        "embedded": None, "command": f"{{python}} -c '{HANGING_SERVER}' {marker}", "startup_timeout": 120}}}
    node.write_text(yaml.safe_dump(profile))
    suite(pytester, "maze", SUITE)
    proc = _start(pytester, node)
    wait_until(marker.exists, 120, "the environment server started booting", procs=(proc,))
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 2, output
    assert "Traceback" not in output, output
    run_file = pytester.path / "reports" / "partial" / "run.json"
    if run_file.exists():
        info = json.loads(run_file.read_text())
        assert info["status"] == "interrupted", info
        assert all(g["outcome"] == "not-judged" for g in info["gates"])
