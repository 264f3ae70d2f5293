"""compare/sequential.py on crafted figures and records: the look points at their
boundaries, the alpha each look spends, a threshold gate decided exactly at its
boundary for each operator, and the interim baseline decision at the exact
sign-test boundary."""

from __future__ import annotations

import pytest

from pytest_agentgym.compare.sequential import (Decision, SequentialPlan, completed_tasks,
                                                decide_against_baseline, gate_decided, play_order)
from pytest_agentgym.results.gates import Gate

from helpers.report_fixtures import make_episode

PLAN = SequentialPlan(alpha=0.05, margin=0.05)


def test_the_alpha_of_each_look_and_of_the_final_comparison():
    assert PLAN.regressed_level == pytest.approx(0.05 * 0.02)
    assert SequentialPlan(alpha=0.05, margin=0.05, n_envs=4).regressed_level == pytest.approx(0.05 * 0.02 / 4)
    assert SequentialPlan(alpha=0.05, margin=0.05, n_envs=0).regressed_level == pytest.approx(0.001)
    assert PLAN.ok_alpha == pytest.approx(0.001)
    assert PLAN.final_alpha == pytest.approx(0.047)  # 0.05 * (1 - 3 * 0.02)


@pytest.mark.parametrize("planned, points", [
    (0, ()), (1, ()), (2, (1,)), (3, (1, 2)), (4, (1, 2, 3)), (5, (2, 3, 4)),
    (40, (10, 20, 30)), (41, (11, 21, 31)), (100, (25, 50, 75)), (101, (26, 51, 76)),
])
def test_look_points_at_their_boundaries(planned, points):
    """A quarter of 40 is 10 exactly (not 11); of 41 it is 10.25, so the look waits for 11;
    a point equal to every task (the end) is no interim look."""
    assert PLAN.look_points(planned) == points


def test_play_order_is_a_seeded_permutation():
    first = play_order(range(50), 7)
    assert sorted(first) == list(range(50)) and first != list(range(50))
    assert play_order(reversed(range(50)), 7) == first  # the order of the input does not matter
    assert play_order(range(50), "7") == first and play_order(range(50), 8) != first


def test_completed_tasks_need_every_repeat():
    records = [make_episode("W", 0, repeat=1), make_episode("W", 0, repeat=2), make_episode("W", 1, repeat=1)]
    assert completed_tasks(records, {0: 2, 1: 2, 2: 1}) == [0]
    assert completed_tasks(records, {0: 2, 1: 1}) == [0, 1]


@pytest.mark.parametrize("op, values, remaining, expected", [
    # >=: the lowest the rest can make it is exactly the threshold: passes either way
    (">=", [1.0, 1.0], 2, True),
    (">=", [1.0, 1.0], 3, None),
    # >=: the highest is exactly the threshold: still passes at the top, so open
    (">=", [0.0, 0.0, 0.0], 3, None),
    (">=", [0.0, 0.0, 0.0], 2, False),
    # >: the lowest at the threshold does not pass, the highest does: open
    (">", [1.0, 1.0], 2, None),
    (">", [1.0, 1.0, 1.0], 2, True),
    (">", [0.0, 0.0], 2, False),
    # <=: the highest exactly at the threshold passes
    ("<=", [0.0, 0.0], 2, True),
    ("<=", [0.0, 0.0], 3, None),
    ("<=", [1.0, 1.0, 1.0], 2, False),
    # <: the highest at the threshold does not pass
    ("<", [0.0, 0.0], 2, None),
    ("<", [0.0, 0.0, 0.0], 2, True),
    ("<", [1.0, 1.0], 2, False),
    # nothing left: the value itself, at the threshold
    (">=", [1.0, 0.0], 0, True),
    (">", [1.0, 0.0], 0, False),
    ("<=", [1.0, 0.0], 0, True),
    ("<", [1.0, 0.0], 0, False),
])
def test_gate_decided_at_the_exact_boundary(op, values, remaining, expected):
    assert gate_decided(Gate("success_rate", op, 0.5), values, remaining, 0.0, 1.0) is expected


def test_gate_decided_uses_the_reward_range_and_never_decides_equality_or_nothing():
    gate = Gate("mean_reward", ">=", 0.0)
    # rewards in [-1, 1]: two at 0.5 and two left could make it -0.25 or 0.75
    assert gate_decided(gate, [0.5, 0.5], 2, -1.0, 1.0) is None
    assert gate_decided(gate, [0.5, 0.5], 1, -1.0, 1.0) is True  # (1 - 1) / 3 = 0
    assert gate_decided(Gate("success_rate", "==", 1.0), [1.0] * 10, 0, 0.0, 1.0) is None
    assert gate_decided(Gate("success_rate", ">=", 0.0), [], 5, 0.0, 1.0) is None


def _runs(failed: int, *, planned: int = 40, errored: int = 0):
    base = [make_episode("W", t) for t in range(planned)]
    cand = [make_episode("W", t, outcome="failed") for t in range(failed)]
    cand += [make_episode("W", failed + t, outcome="error") for t in range(errored)]
    return base, cand, list(range(failed + errored))


def test_a_regression_is_decided_at_the_exact_level_of_a_look():
    """Every paired task lost: the exact one-sided sign test gives 2^-n; 2^-9 = 0.00195 is
    above the level 0.001 of a look, 2^-10 = 0.00098 below it."""
    assert decide_against_baseline("W", *_runs(9), PLAN, metric="success", max_error_rate=0.05) is None
    verdict, why = decide_against_baseline("W", *_runs(10), PLAN, metric="success", max_error_rate=0.05)
    assert verdict == "regressed"
    assert why == ("success fell by 1.000 over 10 paired tasks (p=0.00098 <= 0.001, the level of an "
                   "interim look)")
    # two environments compared together halve the level: 10 tasks are no longer enough
    two = SequentialPlan(alpha=0.05, margin=0.05, n_envs=2)
    assert decide_against_baseline("W", *_runs(10), two, metric="success", max_error_rate=0.05) is None
    assert decide_against_baseline("W", *_runs(11), two, metric="success", max_error_rate=0.05)[0] == "regressed"


def test_over_the_error_budget_nothing_is_decided():
    base, cand, tasks = _runs(20, errored=2)  # 2 of 22 errored: 9% > 5%
    assert decide_against_baseline("W", base, cand, tasks, PLAN, metric="success", max_error_rate=0.05) is None
    assert decide_against_baseline("W", base, cand, tasks, PLAN, metric="success",
                                   max_error_rate=0.10)[0] == "regressed"


def test_an_unchanged_candidate_is_ok_once_the_interval_is_narrow_enough():
    """The 99.9% score interval of no change over n tasks is +-z^2/(n + z^2): -0.051 at 200
    tasks (a drop of 5 points not ruled out), -0.045 at 230."""
    same = [make_episode("W", t) for t in range(230)]
    assert decide_against_baseline("W", same, same, range(200), PLAN, metric="success",
                                   max_error_rate=0.05) is None
    verdict, why = decide_against_baseline("W", same, same, range(230), PLAN, metric="success",
                                           max_error_rate=0.05)
    assert verdict == "ok"
    assert why.startswith("the 99.9% interval [-0.045, 0.045] over 230 paired tasks rules out a drop")


def test_a_decision_says_what_was_decided_where():
    decision = Decision("Wordle", "regressed", 10, 20, 40, 80, "success fell")
    assert decision.line == "Wordle stopped after 10 of 40 tasks (20 of 80 episodes): regressed: success fell"
    assert decision.to_dict() == {"verdict": "regressed", "tasks": 10, "episodes": 20, "planned_tasks": 40,
                                  "planned_episodes": 80, "why": "success fell"}


def test_an_interim_regression_needs_a_drop_beyond_the_margin():
    """10 of 200 tasks lost (p = 2^-10, under the look's level): a drop of exactly the margin
    0.05 is not beyond it, so nothing is decided; 11 of 200 (0.055) is a regression."""
    base = [make_episode("W", t) for t in range(200)]
    for lost, expected in ((10, None), (11, "regressed")):
        cand = [make_episode("W", t, outcome="failed" if t < lost else "passed") for t in range(200)]
        found = decide_against_baseline("W", base, cand, range(200), PLAN, metric="success", max_error_rate=0.05)
        assert (found[0] if found else None) == expected, (lost, found)
