"""pytest-xdist (-n N): the same rewards per task as one process, and workers that read
ahead (each submits the episodes of later items to its engine) yet play each episode once."""

from __future__ import annotations

import pytest
from helpers.projects import episodes, make_project, run, suite

pytestmark = pytest.mark.heavy


def test_xdist_gives_the_same_reward_per_task_as_a_single_process(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-5\ngates: [success_rate >= 0.5]\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-5\n")
    suites = str(pytester.path / "suites")  # absolute: node ids must not depend on how paths are given
    single = run(pytester, suites, f"--agentgym-node={node}", "--agentgym-run-id=single",
                 "--junitxml=single.xml")
    assert single.ret == 0, single.stdout.str()
    parallel = run(pytester, suites, f"--agentgym-node={node}", "--agentgym-run-id=parallel", "-n", "2",
                   "--junitxml=parallel.xml")
    assert parallel.ret == 0, parallel.stdout.str()

    def gate_cases(report: str) -> list[str]:
        import re

        return re.findall(r'<testcase classname="[^"]*" name="gate\[[^"]*\]"', (pytester.path / report).read_text())

    assert gate_cases("single.xml") == gate_cases("parallel.xml") == [
        '<testcase classname="suites.maze.yaml.Maze" name="gate[success_rate &gt;= 0.5]"']

    def rewards(run_id: str) -> dict:
        return {(r["env"], r["task_index"]): r["reward"] for r in episodes(pytester, run_id)}

    assert len(rewards("single")) == 12
    assert rewards("parallel") == rewards("single")


READ_AHEAD_CONFTEST = """
import os
from pytest_agentgym.plugin.stash import RUN_KEY

def pytest_runtest_setup(item):
    engine = item.config.stash[RUN_KEY].resources.engine
    if engine is None or not hasattr(item.config, "workerinput"):
        return
    ahead = sum(engine.submitted(other.nodeid) for other in item.session.items if other is not item)
    with open(os.environ["AHEAD_LOG"], "a") as log:
        log.write(f"{item.config.workerinput['workerid']} {ahead}\\n")
"""


def test_xdist_workers_read_ahead_and_play_each_episode_once(pytester, monkeypatch):
    node = make_project(pytester, latency_ms=50)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-11\n")
    pytester.makeconftest(READ_AHEAD_CONFTEST)
    log = pytester.path / "ahead.log"
    monkeypatch.setenv("AHEAD_LOG", str(log))
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=ahead", "-n", "2",
                 "--agentgym-concurrency=4", "--agentgym-max-rounds=3")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    seen: dict[str, list[int]] = {}
    for line in log.read_text().split("\n"):
        if line:
            worker, ahead = line.split()
            seen.setdefault(worker, []).append(int(ahead))
    assert sorted(seen) == ["gw0", "gw1"]
    for worker, counts in seen.items():
        assert max(counts) >= 2, f"{worker} did not read ahead: {counts}"
    played = [(r["env"], r["task_index"], r["repeat"]) for r in episodes(pytester, "ahead")]
    assert sorted(played) == [("Maze", task, 1) for task in range(12)]
