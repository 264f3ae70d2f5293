"""The low findings of issue 40 in the statistics, each at its boundary: any alpha in
(0, 1) gives quantiles (below about 1.1e-16 the normal quantile raised StatisticsError),
the sample-size advice takes the variance the paired differences show, and no interval
is ever inverted."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest

from pytest_agentgym.compare import compare_runs
from pytest_agentgym.compare import statistics as stats
from pytest_agentgym.results.aggregate import mean_ci95

from helpers.compare_fixtures import paired_run

# -- alpha all the way down -------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 1e-6, 1.2e-16, 1.1e-16, 1e-16, 1e-17, 1e-300, 5e-324])
def test_quantiles_exist_for_any_alpha(alpha):
    z = stats._z(alpha)
    assert math.isfinite(z) and z > 0
    for df in (1, 5, 89):
        t = stats._t(alpha, df)
        assert math.isfinite(t) and t >= z * (1 - 1e-9)  # t's tails are heavier than the normal's


def test_the_quantiles_are_continuous_and_monotone_across_the_switch():
    """Both ways of computing them agree where they switch, and smaller alpha is wider."""
    from statistics import NormalDist

    below, at = stats.SMALL_ALPHA * (1 - 1e-12), stats.SMALL_ALPHA
    assert stats._z(below) == pytest.approx(NormalDist().inv_cdf(1 - at / 2), rel=1e-8)
    assert stats._t(below, 7) == pytest.approx(stats._t(at, 7), rel=1e-8)
    alphas = [0.2, 1e-3, 2e-6, 1e-6, 5e-7, 1e-12, 1.1e-16, 1e-17, 1e-100, 1e-300]
    for df in (2, 30):
        values = [stats._t(a, df) for a in alphas]
        assert values == sorted(values)
    assert [stats._z(a) for a in alphas] == sorted(stats._z(a) for a in alphas)
    # the tail of the t quantile is the asked one: P(T > t) = alpha / 2
    t = stats._t(1e-20, 10)
    assert 0.5 * stats.regularized_beta(5, 0.5, 10 / (10 + t * t)) == pytest.approx(0.5e-20, rel=1e-9)


def _two_runs(tmp_path):
    rng = random.Random(7)
    marks = "".join(rng.choice("PF") for _ in range(40))
    dropped = "".join("F" if m == "P" and rng.random() < 0.5 else m for m in marks)
    base = paired_run(tmp_path, "base", {"BabyAI": marks, "Maze": marks[:25]})
    cand = paired_run(tmp_path, "cand", {"BabyAI": dropped, "Maze": marks[:25]})
    return base.path, cand.path


@pytest.mark.parametrize("alpha", [1.1e-16, 1e-17, 1e-300])
def test_compare_at_a_tiny_alpha_judges_from_python(tmp_path, alpha):
    """What raised a raw StatisticsError from compare_runs: a verdict, and nothing is
    regressed at an alpha no test on 40 tasks can reach."""
    base, cand = _two_runs(tmp_path)
    comparison = compare_runs(base, cand, alpha=alpha)
    assert {e.verdict for e in comparison.environments.values()} <= {"ok", "inconclusive"}
    assert comparison.environments["BabyAI"].delta == pytest.approx(-0.3)


def test_compare_at_a_tiny_alpha_from_the_command_line(tmp_path):
    base, cand = _two_runs(tmp_path)
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "compare", "--alpha", "1e-17",
                           str(base), str(cand)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "StatisticsError" not in done.stderr and "INCONCLUSIVE" in done.stdout


# -- the sample-size advice -------------------------------------------------------------------------


def test_paired_variance_of_one_binary_repeat_is_the_discordance_over_two():
    b, c, n = 7, 3, 50
    differences = [-1.0] * b + [1.0] * c + [0.0] * (n - b - c)
    shown = stats.paired_variance(differences, 1)
    assert shown == pytest.approx(((b + c) / n - ((c - b) / n) ** 2) * n / (n - 1) / 2)
    assert stats.paired_variance([0.5], 3) is None


def test_the_advice_on_near_deterministic_tasks_uses_the_variance_within_tasks():
    """p ~ Beta(0.3,0.3), one repeat: the pooled p(1 - p) (about 0.25) is 2.7 times the
    variance within a task (about 0.094); with the differences given, the advice follows
    the latter, and with nothing paired to show it, the old bound stays."""
    rng = random.Random(40)
    p = [rng.betavariate(0.3, 0.3) for _ in range(2000)]
    differences = [float(rng.random() < q) - float(rng.random() < q) for q in p]
    pooled = 0.25
    old = stats.tasks_needed(pooled, 1, 0.05, 0.05, binary=True)
    new = stats.tasks_needed(pooled, 1, 0.05, 0.05, binary=True, differences=differences)
    within = sum(q * (1 - q) for q in p) / len(p)
    assert stats.paired_variance(differences, 1) == pytest.approx(within, rel=0.15)
    assert new == pytest.approx(old * within / pooled, rel=0.15) and new < 0.5 * old
    assert stats.tasks_needed(pooled, 1, 0.05, 0.05, binary=True, differences=[0.0]) == old
    assert stats.repeats_needed(pooled, 1, 0.05, 0.05, 25, binary=True, differences=differences) < \
        stats.repeats_needed(pooled, 1, 0.05, 0.05, 25, binary=True)


# -- intervals are never inverted ---------------------------------------------------------------------


@pytest.mark.parametrize("shift", [-4.0, -1.0001, -1.0, -0.99, 0.0, 0.99, 1.0, 1.0001, 4.0])
def test_a_reward_interval_clipped_to_the_range_is_never_inverted(shift):
    """Rewards outside the shipped range (span 1) move the mean difference past the limit:
    the interval holds the mean and is never [-1.00, -3.87]."""
    rng = random.Random(int(shift * 1000))
    differences = [shift + rng.uniform(-0.2, 0.2) for _ in range(30)]
    low, high = stats.floored_t_interval(differences, 0.05, 1.0, limit=1.0)
    mean = sum(differences) / len(differences)
    assert low <= mean <= high
    assert -max(1.0, max(abs(d) for d in differences)) <= low <= high
    unclipped = stats.floored_t_interval(differences, 0.05, 1.0)
    if abs(shift) < 0.5:  # well inside the range, the limit changes nothing
        assert (low, high) == unclipped


@pytest.mark.parametrize("values,bounds", [([-3.0, -4.5, -2.0], (0.0, 1.0)), ([5.0, 6.0, 7.5], (0.0, 1.0)),
                                           ([0.0, 1.0, 0.5], (0.0, 1.0)), ([1.0, 1.0, 0.2], (0.0, 1.0)),
                                           ([-1.0, -1.0, -1.0, -0.9], (-1.0, 1.0))])
def test_the_summary_interval_is_never_inverted(values, bounds):
    mean, low, high = mean_ci95(values, bounds)
    assert low <= mean <= high


def test_with_repeats_the_advice_keeps_the_baselines_variance_within_tasks():
    differences = [(-1) ** i / 3 for i in range(30)]
    assert stats.tasks_needed(0.2, 3, 0.05, 0.05, binary=True, differences=differences) == \
        stats.tasks_needed(0.2, 3, 0.05, 0.05, binary=True)


def test_compare_with_rewards_outside_the_shipped_range_prints_no_inverted_interval(tmp_path):
    """BabyAI's shipped range is [0, 1]; a baseline scoring about 4 (a changed reward
    function) against a candidate near 0 printed `[-1.00, -3.87]`."""
    from pytest_agentgym.results import fingerprint
    from helpers.compare_fixtures import ENV_SETTINGS
    from helpers.report_fixtures import make_episode, make_info, write_run

    rng = random.Random(387)
    paths = []
    for run_id, scale in (("base", 4.0), ("cand", 0.1)):
        fp = fingerprint.build(model="qwen3.5-9b", endpoint_kind="tensorzero", checkpoint=None,
                               envs={"BabyAI": ENV_SETTINGS})
        info = make_info(run_id=run_id, environments=("BabyAI",), checkpoint=None, fingerprint=fp, gates=())
        records = [make_episode("BabyAI", task, run_id=run_id, outcome="failed", reward=scale * rng.uniform(0.9, 1.1))
                   for task in range(30)]
        paths.append(write_run(tmp_path, info, records).path)
    babyai = compare_runs(*paths, metric="reward").environments["BabyAI"]
    low, high = babyai.ci
    assert low <= babyai.delta <= high and babyai.delta < -3.5
    assert babyai.verdict == "regressed"
