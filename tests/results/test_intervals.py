"""The mean reward's 95% interval stays inside the environment's reward range,
and nothing the summary or the charts show is ever NaN.

Expected values are worked out by hand in the comments: for rewards
``[0]*24 + [1]`` the mean is 0.04, the sample standard deviation 0.2, t(24) is
2.064, so the half width is 2.064 * 0.2 / 5 = 0.08256 and Student's t interval
is [-0.04256, 0.12256].
"""

from __future__ import annotations

import math
import re

import pytest

from pytest_agentgym.results.aggregate import (
    CI_CLIPPED_TO_OBSERVED,
    CI_CLIPPED_TO_RANGE,
    CI_SINGLE,
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

T_INTERVAL = (0.04 - 0.08256, 0.04 + 0.08256)


def episodes(env: str, rewards, **changes) -> list[EpisodeRecord]:
    return [EpisodeRecord(run_id="r", env=env, task_index=n, repeat=0, reward=reward,
                          success=reward is not None and reward >= 1, rounds=2, stop_reason="done",
                          started_at="t", duration_s=1.0, model="m", **changes)
            for n, reward in enumerate(rewards)]


def test_the_interval_of_one_success_in_25_stays_in_0_1():
    summary = summarize(episodes("TextCraft", [0.0] * 24 + [1.0]))["TextCraft"]
    assert summary.mean_reward == pytest.approx(0.04)
    assert summary.reward_ci95 == (0.0, pytest.approx(T_INTERVAL[1], abs=1e-4))  # -0.04256 clipped to 0
    assert (summary.reward_ci_method, summary.reward_range) == (CI_CLIPPED_TO_RANGE, (0.0, 1.0))


def test_the_range_is_each_environments_own():
    # Maze pays -1.0 for the 51st step, so its interval may go below 0
    summary = summarize(episodes("Maze", [0.0] * 24 + [1.0]))["Maze"]
    assert summary.reward_ci95 == (pytest.approx(T_INTERVAL[0], abs=1e-4), pytest.approx(T_INTERVAL[1], abs=1e-4))
    assert summary.reward_range == (-1.0, 1.0)
    sciworld = summarize(episodes("SciWorld", [100.0, 100.0, -100.0]))["SciWorld"]
    low, high = sciworld.reward_ci95
    assert -100.0 <= low < sciworld.mean_reward < high == 100.0


def test_an_unknown_environment_is_clipped_to_its_observed_rewards():
    summary = summarize(episodes("Custom", [0.5] * 9 + [0.9]))["Custom"]
    # mean 0.54, s = sqrt(0.016) = 0.12649, t(9) = 2.262: half width 0.09048 -> [0.4495, 0.6305];
    # within the observed [0.5, 0.9] the low end becomes 0.5
    assert summary.reward_ci95 == (0.5, pytest.approx(0.6305, abs=1e-4))
    assert (summary.reward_ci_method, summary.reward_range) == (CI_CLIPPED_TO_OBSERVED, (0.5, 0.9))


def test_ranges_given_by_the_caller_win_and_observed_rewards_outside_widen_them():
    records = episodes("TextCraft", [0.0] * 24 + [1.0])
    assert summarize(records, {"TextCraft": (-1.0, 1.0)})["TextCraft"].reward_ci95[0] == pytest.approx(
        T_INTERVAL[0], abs=1e-4)
    widened = summarize(records, {"TextCraft": (0.0, 0.5)})["TextCraft"]
    assert widened.reward_range == (0.0, 1.0)
    assert widened.reward_ci95[0] <= widened.mean_reward <= widened.reward_ci95[1]


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
    assert '"reward_ci_method":"student-t clipped to the reward range"' in payload


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
