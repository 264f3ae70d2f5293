"""What stopping early and the partial-run rule decide that issue 39's mutation pass found
no test for (benchmarks/gates/mutations.py): a gate is never decided while the errors
exceed its budget, a record of a task the run did not plan is no record of the plan, and
a run stopped on purpose (a full disk) is partial even when every episode has a record.
On crafted records, in-process (the whole runs are tests/run/test_stop_when_decided.py)."""

from __future__ import annotations

from pytest_agentgym.results.gates import Gate
from pytest_agentgym.run.ending import partial_reason
from pytest_agentgym.run.plans import EnvPlan
from pytest_agentgym.run.stopping import Stopper

from helpers.report_fixtures import make_episode


def _stopper(gate: str, tasks: int = 40) -> Stopper:
    return Stopper({"W": EnvPlan(gates=(Gate.parse(gate),))}, [("W", t, 1) for t in range(tasks)],
                   baseline=None, margin=0.05, reward_ranges={"W": (0.0, 1.0)})


def test_a_gate_is_not_decided_while_the_errors_exceed_the_budget():
    """At the look of 10 of 40 tasks 6 passed and 4 errored: more than the 3 of 10 the 5%
    budget allows (results/error_budget.py); the look before it, at 5, had 4 errors of 5.
    Scored alone, 6 passes of 36 would already decide ``success_rate >= 0.1`` passing."""
    stopper = _stopper("success_rate >= 0.1")
    for task in range(10):
        stopper.recorded(make_episode("W", task, repeat=1, outcome="error" if task < 4 else "passed"))
    assert stopper.look("W") is None
    assert stopper.watches["W"].used_points == {5, 10} and stopper.stops == {}


def test_the_same_look_within_the_budget_decides():
    """The control of the test above: all ten scored, the gate is decided at that look."""
    stopper = _stopper("success_rate >= 0.2")
    for task in range(10):
        stopper.recorded(make_episode("W", task, repeat=1, outcome="passed"))
    stop = stopper.look("W")
    assert stop is not None and stop.decided == {"success_rate >= 0.2": True}


def test_a_record_of_a_task_the_run_did_not_plan_is_not_counted():
    stopper = _stopper("success_rate >= 0.5")
    stopper.recorded(make_episode("W", 100, repeat=1))
    stopper.recorded(make_episode("W", 3, repeat=1))
    assert stopper.has_record(("W", 3, 1)) and not stopper.has_record(("W", 100, 1))
    assert set(stopper.watches["W"].records) == {(3, 1)}


def test_a_run_stopped_on_purpose_is_partial_with_every_episode_recorded():
    reason = partial_reason("failed", "the disk is full (No space left on device)\nfree some space", 10, 10)
    assert reason == "run stopped after 10 of 10 episodes (the disk is full (No space left on device))"
    assert partial_reason("failed", None, 10, 10) is None
    assert partial_reason("interrupted", None, 10, 10) == "run interrupted after 10 of 10 episodes"
