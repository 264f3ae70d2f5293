"""Issue 23, points 6 and 7: the step-down across environments for discrete tests, and
errors that could hide a drop. Each rule is pinned at its boundary on real run directories."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pytest_agentgym.compare import compare_runs
from pytest_agentgym.compare import statistics as stats

from helpers.marked_runs import write_run


# -- the discrete step-down (point 6) -----------------------------------------------------------------


def test_without_supports_it_is_holms_adjustment():
    rng = random.Random(7)
    for _ in range(200):
        family = {f"e{i}": rng.choice([rng.random(), rng.random() / 50, 1.0]) for i in range(rng.randint(1, 6))}
        ordered = sorted(family.items(), key=lambda item: item[1])
        running, expected = 0.0, {}
        for rank, (name, p) in enumerate(ordered):
            running = max(running, min(1.0, (len(ordered) - rank) * p))
            expected[name] = running
        assert stats.discrete_holm(family, {}) == pytest.approx(expected, rel=1e-12)
        assert stats.holm(family) == pytest.approx(expected, rel=1e-12)


def test_attainable_below_counts_a_value_equal_to_t_and_nothing_above():
    support = stats.mcnemar_support(6)  # 1/64, 7/64, 22/64, ...
    assert support[0] == 1 / 64 and support[-1] == 1.0
    assert stats.attainable_below(support, 1 / 64) == 1 / 64
    assert stats.attainable_below(support, 1 / 64 * (1 - 1e-9)) == 0.0
    assert stats.attainable_below(support, 0.1) == 1 / 64
    assert stats.attainable_below(support, 7 / 64) == 7 / 64
    assert stats.attainable_below(None, 0.03) == 0.03


def test_sign_flip_supports_hold_the_observed_p_and_start_at_one_in_two_to_the_n():
    for differences, lattice in (([-1.0, -0.5, -0.25, 0.4], ()), ([-1 / 3, -2 / 3, 1 / 3, -1.0, 0.0], (3,))):
        p, _, support = stats.sign_flip_test(differences, lattice)
        assert p in support and support[-1] == pytest.approx(1.0)
        nonzero = sum(1 for d in differences if d != 0)
        assert support[0] == pytest.approx(2.0 ** -nonzero)
    assert stats.sign_flip_test([0.0, 0.0])[2] == (1.0,)


def _fwer(discordant: tuple[int, ...], alpha: float = 0.05) -> float:
    """The exact chance, with no true change anywhere, that the discrete step-down
    rejects at least one of environments with these numbers of discordant keys."""
    total = 0.0
    for drops in itertools.product(*(range(d + 1) for d in discordant)):
        chance = math.prod(math.comb(d, k) / 2 ** d for d, k in zip(discordant, drops))
        p = {f"e{i}": stats.mcnemar_drop_p(k, d - k) for i, (d, k) in enumerate(zip(discordant, drops))}
        supports = {f"e{i}": stats.mcnemar_support(d) for i, d in enumerate(discordant)}
        total += chance * any(v < alpha for v in stats.discrete_holm(p, supports).values())
    return total


@pytest.mark.parametrize("discordant", [(6, 6, 6, 6), (5, 9, 2, 14), (3, 4, 20), (7, 1, 1, 30)])
def test_its_false_alarm_rate_is_at_most_alpha_exactly(discordant):
    assert _fwer(discordant) <= 0.05 + 1e-12


def test_a_maze_drop_of_six_tasks_is_regressed_in_the_battery(tmp_path):
    """Maze 25/25 -> 19/25 (6 pass->fail, p = 1/64) beside three environments with few
    changed tasks: Holm charges each of them a full share (4/64 = 0.0625, inconclusive);
    none of them can reach p = 1/64, so the step-down charges them nothing."""
    others = {"BabyAI": "PF" * 45, "TextCraft": "P" * 100, "Wordle": "PF" * 12 + "P"}
    base = write_run(tmp_path, "base", {"Maze": "P" * 25, **others})
    cand = write_run(tmp_path, "cand", {"Maze": "F" * 6 + "P" * 19, "BabyAI": "FP" * 2 + "PF" * 43,
                                        "TextCraft": "F" * 2 + "P" * 98, "Wordle": "PF" * 12 + "P"})
    comparison = compare_runs(base, cand)
    maze = comparison.environments["Maze"]
    assert maze.p_raw == pytest.approx(1 / 64) and maze.p_value == pytest.approx(1 / 64)
    assert maze.verdict == comparison.verdict == "regressed"
    holm = stats.holm({env: e.p_raw for env, e in comparison.environments.items()})
    assert holm["Maze"] == pytest.approx(4 / 64) and holm["Maze"] > 0.05


def test_an_environment_that_can_reach_the_p_value_is_charged_for_it(tmp_path):
    """The boundary: a neighbour with 6 discordant keys can reach 1/64 and is charged it
    (2/64), one with 5 cannot (its smallest attainable p is 1/32) and costs nothing."""
    base = write_run(tmp_path, "base", {"Maze": "P" * 25, "Wordle": "PF" * 12 + "P"})
    six = write_run(tmp_path, "six", {"Maze": "F" * 6 + "P" * 19, "Wordle": "FP" * 3 + "PF" * 9 + "P"})
    five = write_run(tmp_path, "five", {"Maze": "F" * 6 + "P" * 19, "Wordle": "FP" * 2 + "FF" + "PF" * 9 + "P"})
    assert compare_runs(base, six).environments["Maze"].p_value == pytest.approx(2 / 64)
    assert compare_runs(base, five).environments["Maze"].p_value == pytest.approx(1 / 64)


# -- errors that could hide a drop (point 7) -------------------------------------------------------------

BASE = "P" * 60 + "F" * 30  # BabyAI-like: 60 of 90 solved


def test_errors_on_tasks_the_baseline_solved_cannot_make_a_drop_vanish(tmp_path):
    """The issue's case: the 4 tasks the candidate now fails are recorded as errors (4 of
    90, within the error budget). Left out, nothing changed and the verdict would be ok;
    counted as the failures they may be, a drop beyond the margin is possible."""
    base = write_run(tmp_path, "base", {"BabyAI": BASE})
    cand = write_run(tmp_path, "cand", {"BabyAI": "E" * 4 + BASE[4:]})
    comparison = compare_runs(base, cand)
    babyai = comparison.environments["BabyAI"]
    assert babyai.verdict == "inconclusive" and babyai.n_errors == 4 and babyai.delta == 0.0
    # Tango's interval under the worst case counts the 90 paired keys, not the 86 matched
    assert babyai.detail.startswith(
        "the errors leave it open: 4 episode(s) errored in one run and scored in the other (4 in the "
        "candidate; tasks 0-3); left out, the verdict is ok, counted against the candidate it is "
        "inconclusive (Δ -0.044 [-0.109, -0.002]): play them again: resume the candidate with `")
    assert babyai.detail.endswith(f"--agentgym-resume={cand}`")
    assert babyai.line().endswith("-> INCONCLUSIVE (margin 0.05) (the 4 errored episode(s) leave it open: "
                                  "resume to play them)")
    assert comparison.exit_code() == 0 and comparison.exit_code(strict=True) == 1


def test_errors_that_could_make_a_regression_are_an_error(tmp_path):
    """12 of 90 solved tasks errored (inside a 15% budget): counted as failures they are a
    significant drop of 13 points, so the errors decide the verdict: error, exit 1."""
    base = write_run(tmp_path, "base", {"BabyAI": "P" * 90})
    cand = write_run(tmp_path, "cand", {"BabyAI": "E" * 12 + "P" * 78})
    comparison = compare_runs(base, cand, max_error_rate=0.15)
    babyai = comparison.environments["BabyAI"]
    assert babyai.verdict == "error" and babyai.detail.startswith(
        "the errors decide the verdict: 12 episode(s) errored in one run and scored in the other (12 in "
        "the candidate; tasks 0-11); left out, the verdict is ok, scored as failures in both runs it is regressed")
    assert comparison.exit_code() == 1


def test_errors_that_cannot_change_the_verdict_leave_it(tmp_path):
    """Errors on tasks the baseline failed: counted as failures of the candidate they change
    nothing; errors in the baseline on tasks the candidate passed, likewise."""
    base = write_run(tmp_path, "base", {"BabyAI": BASE})
    on_failed = write_run(tmp_path, "failed", {"BabyAI": BASE[:86] + "EEEE"})
    judged = compare_runs(base, on_failed).environments["BabyAI"]
    assert judged.verdict == "ok" and "4 episode(s) errored in either run and were left out" in judged.detail
    base_errors = write_run(tmp_path, "base-errors", {"BabyAI": "EEEE" + BASE[4:]})
    assert compare_runs(base_errors, base).environments["BabyAI"].verdict == "ok"


def test_the_baselines_error_on_a_task_the_candidate_fails_counts_as_a_drop(tmp_path):
    base = write_run(tmp_path, "base", {"BabyAI": "EEEE" + BASE[4:]})
    cand = write_run(tmp_path, "cand", {"BabyAI": "FFFF" + BASE[4:]})
    assert compare_runs(base, cand).environments["BabyAI"].verdict == "inconclusive"


def test_one_error_more_or_less_is_where_the_verdict_turns(tmp_path):
    """With margin 0.1 and 90 tasks, counting 3 candidate errors as failures keeps the score
    interval above -0.1 (-0.093) and the verdict ok; 4 do not (-0.109)."""
    base = write_run(tmp_path, "base", {"BabyAI": "P" * 90})
    verdicts = {}
    for errors in (3, 4):
        cand = write_run(tmp_path, f"cand{errors}", {"BabyAI": "E" * errors + "P" * (90 - errors)})
        verdicts[errors] = compare_runs(base, cand, margin=0.1, max_error_rate=0.1).environments["BabyAI"]
    assert verdicts[3].verdict == "ok" and verdicts[4].verdict == "inconclusive"


def test_keys_errored_in_both_runs_are_left_out(tmp_path):
    base = write_run(tmp_path, "base", {"BabyAI": "EEEE" + BASE[4:]})
    cand = write_run(tmp_path, "cand", {"BabyAI": "EEEE" + BASE[4:]})
    judged = compare_runs(base, cand).environments["BabyAI"]
    assert judged.verdict == "ok" and judged.n_errors == 4


def test_the_reward_metric_counts_an_error_as_the_lowest_reward(tmp_path):
    """100 tasks at reward 0.5 in both runs: ok (the interval's floor is 0.037). Two candidate
    errors counted as reward 0 (BabyAI's lowest) still leave it ok (lower end -0.047); four do not."""
    rewards = [0.5] * 100
    base = write_run(tmp_path, "base", {"BabyAI": "F" * 100}, rewards={"BabyAI": rewards})
    judged = {}
    for errors in (2, 4):
        cand = write_run(tmp_path, f"cand{errors}", {"BabyAI": "E" * errors + "F" * (100 - errors)},
                         rewards={"BabyAI": rewards})
        judged[errors] = compare_runs(base, cand, metric="reward").environments["BabyAI"]
    assert judged[2].verdict == "ok"
    assert judged[4].verdict == "inconclusive" and "(4 in the candidate; tasks 0-3)" in judged[4].detail
