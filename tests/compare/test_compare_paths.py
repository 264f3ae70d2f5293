"""The comparison's own paths (issue 23): margin 0, the reward metric's intervals, the
sample-size advice, each verdict rule at its boundary, the scipy-free statistics
and the exit codes of `compare`, `trend` and `merge` when something inside breaks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_agentgym.cli import main as cli
from pytest_agentgym.compare import compare_runs
from pytest_agentgym.compare import statistics as stats
from pytest_agentgym.compare.judgement import _Estimate, _judge
from pytest_agentgym.compare.pairing import EnvPairs
from pytest_agentgym.results.gates import TOLERANCE

from helpers.marked_runs import write_run


# -- the statistics without scipy ---------------------------------------------------------------------


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 24, 89, 99, 1000])
@pytest.mark.parametrize("q", [0.5, 0.6, 0.9, 0.975, 0.995, 0.025])
def test_t_quantile_matches_scipy(q, df):
    scipy_stats = pytest.importorskip("scipy.stats")
    assert stats.t_quantile(q, df) == pytest.approx(float(scipy_stats.t.ppf(q, df)), rel=1e-9, abs=1e-12)
    assert stats.t_cdf(1.7, df) == pytest.approx(float(scipy_stats.t.cdf(1.7, df)), rel=1e-10)


@pytest.mark.parametrize("a,b", [(1, 25), (3, 23), (12.5, 0.5), (89, 2), (40, 61), (0.5, 0.5)])
@pytest.mark.parametrize("q", [0.025, 0.5, 0.975])
def test_the_beta_quantile_matches_scipy(q, a, b):
    special = pytest.importorskip("scipy.special")
    assert stats.beta_quantile(q, a, b) == pytest.approx(float(special.betaincinv(a, b, q)), rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("k,n", [(0, 0), (1, 1), (3, 5), (10, 12), (40, 70), (0, 9), (9, 9), (130, 240)])
def test_the_binomial_tail_matches_scipy(k, n):
    scipy_stats = pytest.importorskip("scipy.stats")
    expected = 1.0 if n == 0 else float(scipy_stats.binomtest(k, n, 0.5, alternative="greater").pvalue)
    assert stats.mcnemar_drop_p(k, n - k) == pytest.approx(expected, rel=1e-12)


def test_the_binomial_tail_is_exact_at_small_counts():
    assert stats.binomial_upper_tail(3, 3) == 1 / 8
    assert stats.binomial_upper_tail(2, 3) == 4 / 8
    assert stats.binomial_upper_tail(0, 3) == 1.0 and stats.binomial_upper_tail(4, 3) == 0.0


@pytest.mark.parametrize("b,c,n", [(0, 0, 25), (3, 1, 25), (12, 2, 90), (0, 5, 6), (6, 0, 6), (40, 35, 100)])
def test_the_score_interval_is_the_same_with_bisection(b, c, n):
    pytest.importorskip("scipy.optimize")
    from scipy.optimize import brentq

    low, high = stats.paired_score_interval(b, c, n, 0.05)
    # the interval's ends are where the score statistic equals -+z: scipy's brentq finds them too
    z, estimate = stats._z(0.05), (c - b) / n

    def score(d: float) -> float:
        return stats.tango_score(b, c, n, d)

    if low > -1:
        assert low == pytest.approx(brentq(lambda d: score(d) - z, -1 + 1e-12, estimate, xtol=1e-12), abs=1e-9)
    if high < 1:
        assert high == pytest.approx(brentq(lambda d: score(d) + z, estimate, 1 - 1e-12, xtol=1e-12), abs=1e-9)


def test_the_normal_quantile_is_the_standard_librarys():
    assert stats._z(0.05) == pytest.approx(1.959963984540054, abs=1e-12)


def test_bisect_root_refuses_a_bracket_without_a_sign_change():
    with pytest.raises(ValueError, match="same sign"):
        stats.bisect_root(lambda x: x * x + 1, -1.0, 1.0)


def test_compare_and_trend_import_no_scipy():
    code = ("import sys; import pytest_agentgym.cli, pytest_agentgym.compare.judgement, "
            "pytest_agentgym.compare.statistics as s; s.t_quantile(0.975, 5); s.mcnemar_drop_p(3, 1); "
            "s.paired_score_interval(3, 1, 25, 0.05); s.tasks_needed(0.2, 1, 0.05, 0.05, binary=True); "
            "print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the sample-size advice ----------------------------------------------------------------------------


def test_tasks_needed_is_the_90_percent_power_size():
    # n = 2 (z_0.975 + z_0.9)^2 v / (r m^2) = 2 * 3.24151^2 * 0.2 / (1 * 0.0025) = 1681.2
    assert stats.tasks_needed(0.2, 1, 0.05, 0.05, binary=False) == 1682
    assert stats.tasks_needed(0.2, 2, 0.05, 0.05, binary=False) == 841
    assert stats.tasks_needed(0.2, 1, 0.05, 0.05, binary=False, power=0.8) == 1256
    # success never needs fewer keys than the score interval's floor: 1.96^2 * 0.95 / 0.05 = 72.99
    assert stats.tasks_needed(0.0, 1, 0.05, 0.05, binary=True) == 73
    assert stats.tasks_needed(0.0, 3, 0.05, 0.05, binary=True) == 25
    assert stats.tasks_needed(0.0, 1, 0.05, 0.05, binary=False) == 6  # the sign-flip test's least


def test_margin_0_needs_no_finite_sample():
    assert stats.tasks_needed(0.25, 1, 0.0, 0.05, binary=True) is None
    assert stats.tasks_needed(0.0, 1, 0.0, 0.05, binary=False) is None


def test_repeats_needed_when_the_tasks_run_out():
    # deterministic tasks: the score interval's floor, 73 episodes = 3 repeats of 25 tasks
    assert stats.repeats_needed(0.0, 1, 0.05, 0.05, 25, binary=True) == 3
    # variance 0.2 on 25 tasks: 2 (t_0.975,24 + t_0.9,24)^2 0.2 / 0.05^2 = 1835.6 episodes -> 74 repeats
    assert stats.repeats_needed(0.2, 1, 0.05, 0.05, 25, binary=True) == 74
    assert stats.repeats_needed(0.0, 1, 0.05, 0.05, 73, binary=True) is None  # the tasks suffice
    assert stats.repeats_needed(0.2, 1, 0.0, 0.05, 25, binary=True) is None  # margin 0
    assert stats.repeats_needed(0.2, 1, 0.05, 0.05, 1, binary=True) is None


def test_the_fewest_tasks_for_an_interval_is_where_the_exact_test_can_reject():
    n = stats.fewest_units_for_sign_flip(0.05)
    assert n == 6 and 2 / 2 ** n < 0.05 <= 2 / 2 ** (n - 1)


# -- each verdict rule at its boundary -------------------------------------------------------------------


def _pairs(n: int = 25, variance: float | None = 0.0) -> EnvPairs:
    units = {task: ((1.0,), (1.0,)) for task in range(n)}
    return EnvPairs(env="Maze", metric="success", flips=(), units=units, baseline_variance=variance)


def _verdict(delta: float, ci: tuple[float, float] | None, p: float, margin: float = 0.05,
             alpha: float = 0.05) -> str:
    estimate = _Estimate(0.5, 0.5 + delta, delta, ci, p, "test")
    return _judge(_pairs(), estimate, p, None, margin=margin, alpha=alpha).verdict


def test_regressed_needs_p_strictly_below_alpha():
    assert _verdict(-0.2, (-0.3, -0.1), 0.049999) == "regressed"
    assert _verdict(-0.2, (-0.3, -0.1), 0.05) == "inconclusive"


def test_regressed_needs_a_drop_beyond_the_margin_past_the_tolerance():
    assert _verdict(-0.05 - 2 * TOLERANCE, (-0.1, -0.01), 0.001) == "regressed"
    assert _verdict(-0.05, (-0.1, -0.01), 0.001) == "inconclusive"
    assert _verdict(-0.05 - TOLERANCE / 2, (-0.1, -0.01), 0.001) == "inconclusive"


def test_regressed_needs_an_interval():
    assert _verdict(-0.5, None, 0.001) == "inconclusive"


def test_ok_needs_the_lower_end_strictly_above_minus_the_margin():
    assert _verdict(0.0, (-0.05 + 2 * TOLERANCE, 0.05), 0.5) == "ok"
    assert _verdict(0.0, (-0.05, 0.05), 0.5) == "inconclusive"
    assert _verdict(0.0, (-0.05 + TOLERANCE / 2, 0.05), 0.5) == "inconclusive"


def test_a_significant_drop_within_the_margin_is_ok_and_says_so():
    estimate = _Estimate(0.5, 0.47, -0.03, (-0.045, -0.015), 0.001, "test")
    judged = _judge(_pairs(), estimate, 0.001, None, margin=0.05, alpha=0.05)
    assert judged.verdict == "ok" and "significant" in judged.detail and "within the margin" in judged.detail


def test_margin_0_is_inconclusive_without_a_crash_and_says_why():
    estimate = _Estimate(0.5, 0.5, 0.0, (-0.1, 0.1), 1.0, "test")
    judged = _judge(_pairs(variance=0.25), estimate, 1.0, None, margin=0.0, alpha=0.05)
    assert judged.verdict == "inconclusive" and judged.needed_for_margin is None
    assert "no finite sample can show ok at margin 0" in judged.detail
    assert judged.line().endswith("(no finite sample can show ok at margin 0)")
    # at margin 0, a significant rise still clears it
    rise = _Estimate(0.5, 0.8, 0.3, (0.1, 0.5), 1.0, "test")
    assert _judge(_pairs(), rise, 1.0, None, margin=0.0, alpha=0.05).verdict == "ok"


def test_margin_0_on_run_directories(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPFPF" * 5})
    cand = write_run(tmp_path, "cand", {"Maze": "PPFPF" * 5})
    comparison = compare_runs(base, cand, margin=0.0)
    maze = comparison.environments["Maze"]
    assert maze.verdict == "inconclusive" and maze.needed_for_margin is None
    assert "no finite sample" in maze.detail
    assert cli(["compare", str(base), str(cand), "--margin", "0"]) == 0
    assert cli(["compare", str(base), str(cand), "--margin", "0", "--strict"]) == 1


# -- the reward metric -----------------------------------------------------------------------------------


def test_binary_rewards_take_the_exact_path_of_success(tmp_path):
    marks = "PPPPPF"  # 6 tasks, nothing changed: a t interval would be [0, 0] and say ok
    base = write_run(tmp_path, "base", {"Maze": marks})
    cand = write_run(tmp_path, "cand", {"Maze": marks})
    reward = compare_runs(base, cand, metric="reward").environments["Maze"]
    success = compare_runs(base, cand, metric="success").environments["Maze"]
    assert "exact McNemar" in reward.method and "reward == 1" in reward.method
    assert reward.ci == success.ci and reward.verdict == success.verdict == "inconclusive"
    assert reward.ci[0] < -0.3


def test_binary_rewards_with_repeats_take_the_success_path(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": ["PPPPPPPP", "PPPPPPPF"]})
    cand = write_run(tmp_path, "cand", {"Maze": ["PPPPPPPF", "PPPPPPPF"]})
    reward = compare_runs(base, cand, metric="reward").environments["Maze"]
    success = compare_runs(base, cand, metric="success").environments["Maze"]
    assert reward.ci == success.ci and reward.p_raw == success.p_raw and "Tango" in reward.method


def test_tied_continuous_rewards_keep_an_interval_as_wide_as_the_floor(tmp_path):
    rewards = [0.5] * 25
    base = write_run(tmp_path, "base", {"Wordle": "F" * 25, "Maze": "F" * 25},
                     rewards={"Wordle": rewards, "Maze": rewards})
    cand = write_run(tmp_path, "cand", {"Wordle": "F" * 25, "Maze": "F" * 25},
                     rewards={"Wordle": rewards, "Maze": rewards})
    comparison = compare_runs(base, cand, metric="reward")
    wordle, maze = comparison.environments["Wordle"], comparison.environments["Maze"]
    floor = stats._z(0.05) ** 2 / (25 + stats._z(0.05) ** 2)
    assert wordle.ci == pytest.approx((-floor, floor))  # Wordle's reward spans [0, 1]
    assert maze.ci == pytest.approx((-2 * floor, 2 * floor))  # Maze's spans [-1, 1]
    assert wordle.verdict == maze.verdict == "inconclusive"  # a plain t interval was [0, 0]: "ok"


def test_the_floor_gives_way_to_a_wider_t_interval():
    differences = [0.9, -0.9, 0.8, -1.0, 0.6, 0.0, -0.7, 0.7]
    assert stats.floored_t_interval(differences, 0.05, 1.0) == pytest.approx(stats.t_interval(differences, 0.05))
    assert stats.floored_t_interval([0.0], 0.05, 1.0) is None


def test_the_reward_metric_never_says_regressed_without_an_interval(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "FFFFF"}, rewards={"Maze": [0.9, 0.8, 0.7, 0.9, 0.8]})
    cand = write_run(tmp_path, "cand", {"Maze": "FFFFF"}, rewards={"Maze": [0.2, 0.1, 0.3, 0.2, 0.1]})
    maze = compare_runs(base, cand, metric="reward").environments["Maze"]
    assert maze.p_raw < 0.05 and maze.delta < -0.5  # significant, far beyond the margin
    assert maze.ci is None and maze.verdict == "inconclusive" and "too few" in maze.detail


# -- --strict on an unchanged battery ------------------------------------------------------------------


def test_strict_passes_an_unchanged_deterministic_battery_at_three_repeats(tmp_path):
    """The 25-task environments rule out 5 points only with 73 paired episodes: 3 repeats."""
    battery = {"Maze": "P" * 20 + "F" * 5, "Wordle": "P" * 15 + "F" * 10}
    once = {"Maze": "P" * 25, "Wordle": "P" * 25}  # one repeat: the within-task variance is unknown
    thrice = {env: [marks] * 3 for env, marks in battery.items()}
    base1, cand1 = write_run(tmp_path / "a", "base", once), write_run(tmp_path / "a", "cand", once)
    base3, cand3 = write_run(tmp_path / "b", "base", thrice), write_run(tmp_path / "b", "cand", thrice)
    one = compare_runs(base1, cand1)
    assert one.verdict == "inconclusive" and one.exit_code(strict=True) == 1
    assert all(e.repeats_for_margin == 3 for e in one.environments.values())
    assert "or 3 repeats of the 25 tasks" in one.lines()[0]
    three = compare_runs(base3, cand3)
    assert three.verdict == "ok" and three.exit_code(strict=True) == 0


# -- exit codes when something inside breaks ----------------------------------------------------------


def _boom(*_, **__):
    raise ZeroDivisionError("float division by zero")


def test_an_internal_error_in_compare_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    base = write_run(tmp_path, "base", {"Maze": "PPFPF" * 5})
    cand = write_run(tmp_path, "cand", {"Maze": "PPFPF" * 5})
    monkeypatch.setattr("pytest_agentgym.compare.compare_runs", _boom)
    assert cli(["compare", str(base), str(cand)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError" in err and "Traceback" not in err


def test_an_internal_error_in_trend_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    base = write_run(tmp_path, "base", {"Maze": "PPFPF" * 5})
    cand = write_run(tmp_path, "cand", {"Maze": "PPFPF" * 5})
    monkeypatch.setattr("pytest_agentgym.report.trend.build_trend", _boom)
    assert cli(["trend", str(base), str(cand)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pytest-agentgym trend: internal error: ZeroDivisionError")


def test_an_internal_error_in_merge_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("pytest_agentgym.run.merge.merge", _boom)
    assert cli(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pytest-agentgym merge: internal error: ZeroDivisionError")


def test_trend_at_margin_0_exits_by_its_verdict(tmp_path, capsys):
    base = write_run(tmp_path, "base", {"Maze": "PPFPF" * 5})
    cand = write_run(tmp_path, "cand", {"Maze": "PPFPF" * 5})
    assert cli(["trend", str(base), str(cand), "--margin", "0"]) == 0  # inconclusive: no crash, no exit 1
    assert "internal error" not in capsys.readouterr().err
