"""--agentgym-stop-when-decided with episodes in flight (issue 40), in real runs: pytest in a
subprocess, the real reference agent (30 ms a reply, so episodes overlap) against the
embedded Wordle server. A look is made at exactly its task count whatever the concurrency
(the same seed stops at the same place with 1 and 6 episodes at once); no episode begins
after the decision (those in flight then finish: at most concurrency - 1 more records than
the environment had when it was decided); and a stopped environment keeps every gate in
run.json, the baseline comparison included (not judged when a threshold gate decided)."""

from __future__ import annotations

import pytest

from helpers.projects import episodes, make_project, run, run_json, suite

pytestmark = pytest.mark.heavy

STOP = "--agentgym-stop-when-decided"


def _project(pytester: pytest.Pytester, body: str = "environment: Wordle\ntasks: 0-39\n") -> str:
    node = make_project(pytester, latency_ms=30)
    suite(pytester, "wordle", body)
    return f"--agentgym-node={node}"


#: A project hook that makes pytest report each item slowly (a slow terminal, a plugin that
#: uploads reports): the engine then runs far ahead of the items, and a stop decided only
#: when its item is reported would let many more episodes begin.
SLOW_REPORTS = """
import time

def pytest_runtest_teardown(item):
    time.sleep(0.15)
"""


def test_no_episode_begins_after_the_decision_and_the_look_is_the_same_at_any_concurrency(pytester):
    node = _project(pytester)
    pytester.makeconftest(SLOW_REPORTS)
    assert run(pytester, "suites", node, "--agentgym-run-id=base").ret == 0
    stops = {}
    for concurrency in (1, 6):
        run_id = f"cand{concurrency}"
        result = run(pytester, "suites", node, f"--agentgym-run-id={run_id}", "--agentgym-model=random",
                     "--agentgym-baseline=base", STOP, f"--agentgym-concurrency={concurrency}")
        assert result.ret == 1, result.stdout.str()[-2000:]
        stop = run_json(pytester, run_id)["stopped_early"]["Wordle"]
        played = episodes(pytester, run_id)
        assert stop["episodes"] == stop["tasks"] < 40  # the look used exactly its tasks
        # nothing began after the decision: only the episodes then in flight were added, and
        # the decision came as the look's last task finished (before its 40 items were all
        # reported): beyond the look's tasks, those the other slots held then and their
        # successors at most
        assert stop["recorded"] <= len(played) <= stop["recorded"] + concurrency - 1, (stop, len(played))
        assert len(played) <= stop["tasks"] + 2 * (concurrency - 1), (stop, len(played))
        stops[concurrency] = stop
    assert stops[6]["recorded"] >= stops[6]["tasks"]
    same = ("verdict", "tasks", "episodes", "why")
    assert {k: stops[1][k] for k in same} == {k: stops[6][k] for k in same}  # one seed, one place


def test_a_stopped_environment_keeps_its_baseline_gate_in_run_json(pytester):
    """The threshold gate fails at the first look (5 of 40 tasks); the baseline comparison
    is still open there (5 losses: p = 2^-5 is above that look's boundary), so it is listed
    not judged, with why, instead of missing from run.json."""
    node = _project(pytester, "environment: Wordle\ntasks: 0-39\ngates: ['success_rate >= 0.9']\n")
    assert run(pytester, "suites", node, "--agentgym-run-id=base").ret == 0
    result = run(pytester, "suites", node, "--agentgym-run-id=cand", "--agentgym-model=random",
                 "--agentgym-baseline=base", STOP)
    assert result.ret == 1
    info = run_json(pytester, "cand")
    stop = info["stopped_early"]["Wordle"]
    assert stop["verdict"] == "failed" and stop["tasks"] == 5
    assert stop["open"] == ["baseline success, margin 0.05"]
    gates = {g["gate"]: g for g in info["gates"] if g["env"] == "Wordle"}
    assert set(gates) == {"success_rate >= 0.9", "baseline success, margin 0.05"}
    assert gates["success_rate >= 0.9"]["outcome"] == "failed"
    assert gates["baseline success, margin 0.05"]["outcome"] == "not-judged"
    assert gates["baseline success, margin 0.05"]["detail"] == "stopped early: 'success_rate >= 0.9' decided it"
