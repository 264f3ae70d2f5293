"""The run summary's 95% intervals: Clopper-Pearson when every reward is 0 or 1 (and
for the success rate), else Student's t with one pseudo-reward at each end of the
reward range, clipped to it; they stay inside the range, and nothing the summary or
the charts show is ever NaN. Their coverage is measured by
benchmarks/gates/interval_coverage.py (docs/results.md); here each rule is pinned by its
values at known inputs.

Padded t, worked by hand for rewards ``[0.2]*24 + [0.5]`` in [0, 1]: the 27 values
with 0 and 1 added sum to 6.3, centre 0.23333; squared deviations 24 * 0.0011111 +
0.071111 + 0.054444 + 0.587778 = 0.74, variance 0.74 / 26 = 0.028462, t(24) = 2.064,
half width 2.064 * sqrt(0.028462 / 27) = 0.067013: [0.16632, 0.30035] (the mean
0.212 lies inside). The old clipped t would give 0.212 -+ 2.064 * 0.06 / 5 =
[0.18723, 0.23677], far narrower.
"""

from __future__ import annotations

import math
import random
import re

import pytest
from scipy.stats import beta

from pytest_agentgym.results.aggregate import (
    CI_BINARY,
    CI_CLIPPED_TO_OBSERVED,
    CI_CLIPPED_TO_RANGE,
    CI_SINGLE,
    clopper_pearson_ci95,
    mean_ci95,
    shipped_reward_ranges,
    summarize,
    summarize_env,
)
from pytest_agentgym.envs.spec import EnvConfigError, load_default_specs, spec_from_mapping
from pytest_agentgym.results.events import batch_completed
from pytest_agentgym.report import charts
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo
from helpers.report_fixtures import make_episode, make_info, write_run

PADDED = (0.16632, 0.30035)


def episodes(env: str, rewards, **changes) -> list[EpisodeRecord]:
    return [EpisodeRecord(run_id="r", env=env, task_index=n, repeat=0, reward=reward,
                          success=reward is not None and reward >= 1, rounds=2, stop_reason="done",
                          started_at="t", duration_s=1.0, model="m", **changes)
            for n, reward in enumerate(rewards)]


def exact(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson from its definition, the beta quantiles (scipy.stats, not the code's scipy.special)."""
    return (0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1), 1.0 if k == n else beta.ppf(0.975, k + 1, n - k))


@pytest.mark.parametrize("k, n", [(0, 25), (1, 25), (24, 25), (25, 25), (60, 90), (2, 3)])
def test_binary_rewards_get_clopper_pearson_as_does_the_success_rate(k, n):
    summary = summarize(episodes("TextCraft", [1.0] * k + [0.0] * (n - k)))["TextCraft"]
    assert summary.reward_ci_method == CI_BINARY
    assert summary.reward_ci95 == pytest.approx(exact(k, n), abs=1e-9)
    assert summary.success_ci95 == pytest.approx(exact(k, n), abs=1e-9)
    assert summary.mean_reward == pytest.approx(k / n)


def test_one_success_in_25_known_values():
    # beta.ppf(0.025, 1, 25) = 1 - 0.975 ** (1 / 25) = 0.0010122; the old clipped t said [0, 0.12256],
    # which missed a true rate of 0.15 that Clopper-Pearson's 0.20352 holds
    summary = summarize(episodes("TextCraft", [0.0] * 24 + [1.0]))["TextCraft"]
    assert summary.reward_ci95 == pytest.approx((1 - 0.975 ** (1 / 25), 0.203517), abs=1e-6)
    assert clopper_pearson_ci95(0, 25) == (0.0, pytest.approx(1 - 0.025 ** (1 / 25)))  # 0.13719
    assert clopper_pearson_ci95(0, 0) is None
    with pytest.raises(ValueError, match=r"successes must lie in \[0, 25\], not 26"):
        clopper_pearson_ci95(26, 25)


def test_binary_is_every_reward_0_or_1_whatever_the_range():
    # Maze's range is [-1, 1], but rewards of 0 and 1 alone are a proportion
    assert summarize(episodes("Maze", [0.0] * 24 + [1.0]))["Maze"].reward_ci_method == CI_BINARY
    assert summarize(episodes("TextCraft", [0.0] * 24 + [0.5]))["TextCraft"].reward_ci_method == CI_CLIPPED_TO_RANGE


def test_continuous_rewards_get_t_padded_at_both_ends_of_the_range():
    summary = summarize(episodes("TextCraft", [0.2] * 24 + [0.5]))["TextCraft"]
    assert summary.mean_reward == pytest.approx(0.212)
    assert summary.reward_ci95 == pytest.approx(PADDED, abs=1e-5)
    assert (summary.reward_ci_method, summary.reward_range) == (CI_CLIPPED_TO_RANGE, (0.0, 1.0))


def test_the_range_is_each_environments_own():
    # [0]*24 + [0.5] padded with Maze's -1 and 1: sum 0.5, centre 0.018519, squared deviations
    # 24 * 0.000343 + 0.231824 + 1.037380 + 0.963306 = 2.24074, variance / 26 = 0.086182,
    # half 2.064 * sqrt(0.086182 / 27) = 0.116610: [-0.09809, 0.13513], below 0 as Maze may go
    maze = summarize(episodes("Maze", [0.0] * 24 + [0.5]))["Maze"]
    assert maze.reward_ci95 == pytest.approx((-0.09809, 0.13513), abs=1e-5)
    assert maze.reward_range == (-1.0, 1.0)
    # the same rewards in TextCraft's [0, 1]: padded with 0 and 1, low end clipped at 0
    textcraft = summarize(episodes("TextCraft", [0.0] * 24 + [0.5]))["TextCraft"]
    assert textcraft.reward_ci95 == (0.0, pytest.approx(0.13970, abs=1e-5))
    sciworld = summarize(episodes("SciWorld", [100.0, 100.0, -100.0]))["SciWorld"]
    low, high = sciworld.reward_ci95
    assert -100.0 <= low < sciworld.mean_reward < high <= 100.0


def test_an_unknown_environment_is_padded_and_clipped_by_its_observed_rewards():
    summary = summarize(episodes("Custom", [0.5] * 9 + [0.9]))["Custom"]
    # padded with 0.5 and 0.9: 12 values summing to 6.8, centre 0.56667, squared deviations
    # 10 * 0.0044444 + 2 * 0.111111 = 0.266667, variance / 11 = 0.024242, t(9) = 2.262,
    # half 2.262 * sqrt(0.024242 / 12) = 0.101671 -> [0.46500, 0.66834]; the low end clipped to 0.5
    assert summary.reward_ci95 == (0.5, pytest.approx(0.66834, abs=1e-5))
    assert (summary.reward_ci_method, summary.reward_range) == (CI_CLIPPED_TO_OBSERVED, (0.5, 0.9))


def test_ranges_given_by_the_caller_win_and_observed_rewards_outside_widen_them():
    records = episodes("TextCraft", [0.2] * 24 + [0.5])
    # with the range [-1, 1] the pads are -1 and 1: a different, wider interval than PADDED
    wide = summarize(records, {"TextCraft": (-1.0, 1.0)})["TextCraft"].reward_ci95
    assert wide[0] < PADDED[0] and wide[1] > PADDED[1]
    widened = summarize(records, {"TextCraft": (0.0, 0.3)})["TextCraft"]
    assert widened.reward_range == (0.0, 0.5)
    assert widened.reward_ci95[0] <= widened.mean_reward <= widened.reward_ci95[1]


def test_the_mean_always_lies_inside_its_interval():
    rng = random.Random(23)
    for _ in range(300):
        n = rng.choice((2, 3, 5, 25, 90))
        values = [rng.choice((0.0, 1.0, rng.random(), rng.random() ** 8)) for _ in range(n)]
        mean, low, high = mean_ci95(values, (0.0, 1.0))
        assert 0.0 <= low <= mean <= high <= 1.0, values


def test_one_episode_and_no_scored_episode():
    single = summarize_env("Maze", episodes("Maze", [0.25]), (-1.0, 1.0))
    assert (single.reward_ci95, single.reward_ci_method) == ((0.25, 0.25), CI_SINGLE)
    error = ErrorInfo("EnvServerError", "down", "env")
    none = summarize_env("Maze", episodes("Maze", [None, None], error=error), (-1.0, 1.0))
    assert (none.mean_reward, none.reward_ci95, none.reward_ci_method, none.reward_range) == (None,) * 4
    assert mean_ci95([]) is None


def test_non_finite_rewards_are_left_out_so_no_figure_is_nan():
    records = episodes("BabyAI", [1.0, 0.0, math.nan, math.inf, 0.5])
    summary = summarize(records)["BabyAI"]
    assert (summary.episodes, summary.scored) == (5, 3)
    assert summary.mean_reward == pytest.approx(0.5)
    figures = [summary.mean_reward, *summary.reward_ci95, summary.success_rate, *summary.success_ci95,
               summary.mean_rounds, summary.wall_s]
    assert all(math.isfinite(value) for value in figures), figures
    payload = batch_completed("r", summary, [], node=None, model="m", checkpoint=None).data().decode()
    assert "NaN" not in payload and "Infinity" not in payload
    assert f'"reward_ci_method":"{CI_CLIPPED_TO_RANGE}"' in payload


def test_every_shipped_environment_has_a_reward_range_and_bad_ranges_are_refused():
    specs = load_default_specs()
    assert {name: spec.reward_range for name, spec in specs.items()} == {
        "BabyAI": (0.0, 1.0), "TextCraft": (0.0, 1.0), "Maze": (-1.0, 1.0), "Wordle": (0.0, 1.0),
        "ALFWorld": (0.0, 1.0), "SQLGym": (0.0, 1.0), "WebShop": (0.0, 1.0), "SciWorld": (-100.0, 100.0),
        "AgentBench-ALFWorld": (0.0, 1.0), "AgentBench-WebShop": (0.0, 1.0)}
    assert shipped_reward_ranges()["Maze"] == (-1.0, 1.0)
    for bad in ([1, 0], [0], "0-1", [0, math.inf], [True, 2]):
        with pytest.raises(EnvConfigError, match=r"envs.yaml: environments.X.reward_range must be \[low, high\]"):
            spec_from_mapping("X", {"category": "heavy", "port": 1, "reward_range": bad}, "envs.yaml")


NUMERIC_ATTRIBUTE = re.compile(r'\b(x|y|x1|x2|y1|y2|width|height)="([^"]*)"')


def assert_finite_svg(svg: str) -> None:
    values = NUMERIC_ATTRIBUTE.findall(svg)
    assert values, "no coordinates found"
    for name, value in values:
        assert math.isfinite(float(value)), f'{name}="{value}"'
    assert not re.search(r"\b(nan|inf)\b", svg, re.IGNORECASE), svg
    path = " ".join(re.findall(r' d="([^"]*)"', svg))
    assert "nan" not in path.lower() and "inf" not in path.lower()


@pytest.mark.parametrize("rewards", [[], [1.0], [0.5], [0.0] * 24 + [1.0], [math.nan, 1.0], [-100.0, 100.0]],
                         ids=["all-errors", "single-1", "single-half", "one-in-25", "nan", "sciworld"])
def test_charts_never_draw_nan(rewards):
    env = "SciWorld" if -100.0 in rewards else "BabyAI"
    records = episodes(env, rewards) or episodes(env, [None], error=ErrorInfo("E", "m", "env"))
    summary = summarize(records)[env]
    assert_finite_svg(charts.reward_histogram(env, [r for r in rewards if math.isfinite(r)]))
    assert_finite_svg(charts.env_bars([charts.EnvBar(env, summary.mean_reward, summary.reward_ci95,
                                                     summary.success_rate, summary.success_ci95)]))


def test_the_report_of_edge_cases_shows_no_nan(tmp_path):
    error = ErrorInfo("EnvServerError", "server down", "env")
    runs = [make_episode("Maze", 0, outcome="error", error=error, reward=None),  # all errors
            make_episode("Wordle", 0, reward=1.0),                              # a single episode
            make_episode("BabyAI", 0, reward=0.0), make_episode("BabyAI", 1, reward=0.0)]
    html = render_run_dir(write_run(tmp_path, make_info(environments=("Maze", "Wordle", "BabyAI")), runs).path)
    text = html.read_text()
    for svg in re.findall(r"<svg.*?</svg>", text, re.DOTALL):
        assert_finite_svg(svg)
    cells = re.findall(r'<td class="num[^"]*">([^<]*)', text)
    assert cells and not [c for c in cells if re.search(r"nan|inf", c, re.IGNORECASE)]


@pytest.mark.parametrize("successes, n", [(0, 25), (1, 25), (24, 25), (25, 25), (60, 90), (2, 3),
                                          (500, 1000), (3, 10000), (9990, 10000)])
def test_clopper_pearson_without_scipy_matches_the_beta_quantiles(successes, n):
    """The interval is found by bisection on binomial tails (no scipy import at the run's
    end or in compare); its ends are the beta quantiles that define it."""
    from scipy.stats import beta

    low, high = clopper_pearson_ci95(successes, n)
    assert low == pytest.approx(0.0 if successes == 0 else beta.ppf(0.025, successes, n - successes + 1), abs=1e-9)
    assert high == pytest.approx(1.0 if successes == n else beta.ppf(0.975, successes + 1, n - successes), abs=1e-9)
