"""compare/sequential.py on crafted figures and records: the look points at their
boundaries, the alpha each look spends, a threshold gate decided exactly at its
boundary for each operator, and the interim baseline decision at the exact
sign-test boundary."""

from __future__ import annotations

import pytest

from pytest_agentgym.compare.boundaries import spend
from pytest_agentgym.compare.sequential import (Decision, SequentialPlan, completed_tasks,
                                                decide_against_baseline, gate_decided, play_order)
from pytest_agentgym.results.gates import Gate

from helpers.report_fixtures import make_episode

PLAN = SequentialPlan(alpha=0.05, margin=0.05)


def test_the_alpha_of_each_look_and_of_the_final_comparison():
    assert PLAN.regressed_level == pytest.approx(0.05)
    assert SequentialPlan(alpha=0.05, margin=0.05, n_envs=4).regressed_level == pytest.approx(0.0125)
    assert SequentialPlan(alpha=0.05, margin=0.05, n_envs=0).regressed_level == pytest.approx(0.05)
    assert PLAN.final_alpha == pytest.approx(0.049)  # what the ok looks may spend: 2% of alpha
    # the ok looks spend 0.001 in the O'Brien-Fleming shape: little early, more later
    spent = [PLAN.ok_alpha(0.25), PLAN.ok_alpha(0.5, 0.25), PLAN.ok_alpha(0.75, 0.5)]
    assert spent[0] < spent[1] < spent[2] and sum(spent) < 0.001
    assert sum(spent) == pytest.approx(0.02 * spend(0.75, 0.05))


@pytest.mark.parametrize("planned, points", [
    (0, ()), (1, ()), (2, (1,)), (3, (1, 2)), (4, (1, 2, 3)), (5, (1, 2, 3, 4)),
    (40, (5, 10, 15, 20, 25, 30)), (41, (6, 11, 16, 21, 26, 31)),
    (100, (13, 25, 38, 50, 63, 75)), (101, (13, 26, 38, 51, 64, 76)),
])
def test_look_points_at_their_boundaries(planned, points):
    """Each eighth up to three quarters: an eighth of 40 is 5 exactly (not 6); of 41 it is
    5.125, so the look waits for 6; looks that fall on one count are one look, and a point
    equal to every task (the end) is no interim look."""
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
    return base, cand


def _decide(base, cand, points, plan=PLAN, *, planned=40, budget=0.05):
    return decide_against_baseline("W", base, cand, list(range(planned)), points, plan, metric="success",
                                   max_error_rate=budget)


def test_a_regression_is_decided_at_the_exact_boundary_of_a_look():
    """Every task lost: the sum of the differences is -n. The boundary of a look is the
    lowest sums whose null mass (paths that crossed no earlier look excluded) fits the
    O'Brien-Fleming-like spend 0.05 t^4: at 10 of 40 tasks 0.000195 < 2^-10, so no 10
    losses decide; at 20 of 40 (spend 0.003125) all 20 lost do."""
    assert _decide(*_runs(10), (10,)) is None
    verdict, why = _decide(*_runs(20), (10, 20))
    assert verdict == "regressed"
    assert why.startswith("success fell by 1.000 over 20 paired tasks (p=9.5e-07 <= ")
    assert "the O'Brien-Fleming boundary of the look at 20 of 40 tasks, exact" in why
    # 20 tasks played, the first n lost and the rest still passed: p = 2^-n, and the first
    # look had no boundary, so the second spends all of 0.003125: 2^-9 = 0.00195 fits, 2^-8 not
    base = _runs(0)[0]
    for lost, expected in ((8, None), (9, "regressed")):
        cand = [make_episode("W", t, outcome="failed" if t < lost else "passed") for t in range(20)]
        found = _decide(base, cand, (10, 20))
        assert (found[0] if found else None) == expected, (lost, found)
    assert spend(0.5, 0.05) == pytest.approx(0.003125) and spend(0.25, 0.05) == pytest.approx(0.05 / 256)


def test_the_family_shares_the_level():
    """Four environments compared together: each spends alpha / 4 (0.00078 at half way,
    where one alone spends 0.0031), so 11 losses of 20 (2^-11) decide and 10 (2^-10 =
    0.00098) no longer do."""
    four = SequentialPlan(alpha=0.05, margin=0.05, n_envs=4)
    base = _runs(0)[0]
    for lost, expected in ((10, None), (11, "regressed")):
        cand = [make_episode("W", t, outcome="failed" if t < lost else "passed") for t in range(20)]
        found = _decide(base, cand, (10, 20), four)
        assert (found[0] if found else None) == expected, (lost, found)


def test_over_the_error_budget_nothing_is_decided():
    base, cand = _runs(10, errored=10)  # half the tasks errored: over any budget
    assert _decide(base, cand, (10, 20)) is None
    assert _decide(*_runs(20), (10, 20))[0] == "regressed"  # the same losses, no errors


def test_an_unchanged_candidate_is_ok_once_the_interval_is_narrow_enough():
    """The score interval of no change over n tasks is +-z^2/(n + z^2) at the look's ok
    level: the first look of 800 tasks (200) spends 3.9e-6 (z^2 = 21.3: +-0.096, open), the
    second (400) 5.9e-5 (z^2 = 16.1: +-0.039, ok)."""
    same = [make_episode("W", t) for t in range(800)]
    order = list(range(800))
    assert decide_against_baseline("W", same, same, order, (200,), PLAN, metric="success",
                                   max_error_rate=0.05) is None
    verdict, why = decide_against_baseline("W", same, same, order, (200, 400), PLAN, metric="success",
                                           max_error_rate=0.05)
    assert verdict == "ok"
    assert why.startswith("the 99.994% interval [-0.039, 0.039] over 400 paired tasks rules out a drop")


def test_a_decision_says_what_was_decided_where():
    decision = Decision("Wordle", "regressed", 10, 20, 40, 80, "success fell")
    assert decision.line == "Wordle stopped after 10 of 40 tasks (20 of 80 episodes): regressed: success fell"
    assert decision.to_dict() == {"verdict": "regressed", "tasks": 10, "episodes": 20, "planned_tasks": 40,
                                  "planned_episodes": 80, "why": "success fell"}


def test_an_interim_regression_needs_a_drop_beyond_the_margin():
    """At the look at 400 of 800 tasks, 20 lost (under the boundary): a drop of exactly the
    margin 0.05 is not beyond it, so nothing is decided; 21 of 400 (0.0525) is a regression."""
    base = [make_episode("W", t) for t in range(800)]
    for lost, expected in ((20, None), (21, "regressed")):
        cand = [make_episode("W", t, outcome="failed" if t < lost else "passed") for t in range(400)]
        found = decide_against_baseline("W", base, cand, list(range(800)), (200, 400), PLAN, metric="success",
                                        max_error_rate=0.05)
        assert (found[0] if found else None) == expected, (lost, found)
