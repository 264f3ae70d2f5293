"""Every rule that decides a verdict, pinned at its boundary: a test here fails
when a comparison is off by one (``>`` for ``>=``, ``<=`` for ``<``, ``== 1``
for ``> 0``). The unit tests pin the rules; the runs below pin them where users
meet them, on BabyAI and TextCraft as well as Maze."""

from __future__ import annotations

import pytest

from helpers.projects import episodes, make_project, run, suite
from pytest_agentgym.results.aggregate import summarize
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.results.records import outcome_of
from pytest_agentgym.results.gates import Gate, check, check_env, error_budget_exceeded
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

pytestmark = pytest.mark.heavy

SPECS = load_default_specs()


# -- success rules -------------------------------------------------------------------------


@pytest.mark.parametrize("reward, success", [(0.0, False), (1e-9, True), (0.0625, True), (0.8875, True),
                                             (1.0, True), (-0.1, False)])
def test_babyai_success_is_a_positive_reward(reward, success):
    # minigrid pays 1 - 0.9 * steps / max_steps on success and 0 otherwise; ">= 0"
    # would count every failure, "== 1" almost no success.
    assert SPECS["BabyAI"].success(reward, reward) is success


@pytest.mark.parametrize("env", ["TextCraft", "Maze", "Wordle", "ALFWorld", "SQLGym", "WebShop"])
@pytest.mark.parametrize("reward, success", [(1.0, True), (0.999, False), (0.0, False), (1.001, False)])
def test_the_other_environments_succeed_on_reward_exactly_1(env, reward, success):
    assert SPECS[env].success(reward, None) is success


@pytest.mark.parametrize("score, success", [(100, True), (99, False), (-100, False)])
def test_sciworld_succeeds_on_score_100(score, success):
    assert SPECS["SciWorld"].success(0.0, score) is success


# -- an episode's outcome ----------------------------------------------------------------------


@pytest.mark.parametrize("reward, min_reward, success, outcome", [
    (0.5, 0.5, False, "passed"),     # the threshold itself meets it
    (0.4999, 0.5, False, "failed"),
    (0.0, 0.0, False, "passed"),     # an explicit min_reward of 0 asks for nothing more
    (1.0, None, True, "passed"),
    (0.0, None, False, "unsolved"),  # nothing asserted and no success: never green
    (0.8, None, False, "unsolved"),
])
def test_the_outcome_rule(reward, min_reward, success, outcome):
    assert outcome_of(None, reward, min_reward, success) == outcome


def test_an_error_is_an_error_whatever_the_reward():
    assert outcome_of(ErrorInfo("EnvTimeout", "x", "env"), None, 0.5, False) == "error"


# -- gates -------------------------------------------------------------------------------------------


def records(env: str, rewards: list[float | None], success=lambda r: r == 1.0) -> list[EpisodeRecord]:
    out = []
    for task, reward in enumerate(rewards):
        error = ErrorInfo("EnvUnreachable", "gone", "env") if reward is None else None
        out.append(EpisodeRecord(run_id="r", env=env, task_index=task, repeat=1, reward=reward,
                                 success=reward is not None and success(reward), rounds=1,
                                 stop_reason="error" if error else "done", started_at="t",
                                 duration_s=0.0, model="m", error=error))
    return out


@pytest.mark.parametrize("gate, passed", [
    ("success_rate >= 0.85", True), ("success_rate > 0.85", False), ("success_rate <= 0.85", True),
    ("success_rate < 0.85", False), ("success_rate == 0.85", True), ("success_rate >= 0.86", False),
])
def test_gates_at_their_threshold(gate, passed):
    # 17 of 20 is 0.85, a different float from the literal 0.85 in general: the
    # comparison must treat them as equal.
    summary = summarize(records("Maze", [1.0] * 17 + [0.0] * 3))["Maze"]
    assert check(Gate.parse(gate), summary).passed is passed


@pytest.mark.parametrize("gate", ["mean_reward >= 0.4", "mean_reward == 0.4", "mean_reward <= 0.4"])
def test_a_mean_a_rounding_error_away_from_its_threshold_meets_it(gate):
    # (0.1 + 0.7) / 2 is 0.39999999999999997 in floating point, not 0.4
    summary = summarize(records("Maze", [0.1, 0.7], success=lambda r: False))["Maze"]
    assert summary.mean_reward != 0.4 and abs(summary.mean_reward - 0.4) < 1e-12
    assert check(Gate.parse(gate), summary).passed


@pytest.mark.parametrize("errors, episodes, over", [(1, 20, False), (4, 19, False), (5, 19, True), (0, 5, False),
                                                    (2, 5, False), (3, 5, True), (5, 5, True)])
def test_the_error_budget_boundary(errors, episodes, over):
    summary = summarize(records("Maze", [None] * errors + [1.0] * (episodes - errors)))["Maze"]
    assert (error_budget_exceeded(summary, 0.05) is not None) is over
    verdicts = check_env(summary, (Gate.parse("success_rate >= 0.5"),), 0.05)
    assert [v.outcome for v in verdicts] == (["error"] if over else ["passed"])


def test_without_gates_only_an_exceeded_budget_gives_a_verdict():
    fine = summarize(records("Maze", [1.0] * 20))["Maze"]
    assert check_env(fine, (), 0.05) == []
    broken = summarize(records("Maze", [None] * 3 + [1.0] * 2))["Maze"]
    (verdict,) = check_env(broken, (), 0.05)
    assert verdict.outcome == "error" and "only 2 of 5 episodes scored" in verdict.detail


# -- the same rules where users meet them ----------------------------------------------------------


def test_babyai_successes_below_reward_1_pass_and_failures_are_unsolved(pytester):
    node = make_project(pytester)
    # Tasks 1 and 4 are solved by the reference agent; 25 (KeyInBox) is not.
    suite(pytester, "babyai", "environment: BabyAI\ntasks: [1, 4, 25]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=baby")
    assert result.ret == 0
    by_task = {r["task_index"]: r for r in episodes(pytester, "baby")}
    solved = [r for r in by_task.values() if r["success"]]
    assert solved and all(0 < r["reward"] < 1 and r["outcome"] == "passed" for r in solved)
    unsolved = [r for r in by_task.values() if not r["success"]]
    assert unsolved and all(r["reward"] == 0 and r["outcome"] == "unsolved" for r in unsolved)
    result.stdout.fnmatch_lines([f"*{len(solved)} passed, {len(unsolved)} unsolved*"])


def test_min_reward_is_met_by_a_reward_equal_to_it_and_gates_by_a_rate_equal_to_theirs(pytester):
    node = make_project(pytester)
    # The reference agent solves TextCraft 0-4 and Maze 0-4: reward 1.0, success rate 1.0.
    suite(pytester, "textcraft", "environment: TextCraft\ntasks: 0-4\nmin_reward: 1.0\n"
                                 "gates: [success_rate >= 1.0, mean_reward >= 1.0]\n")
    suite(pytester, "maze", "environment: Maze\ntasks: 0-4\nmin_reward: 1.0\ngates: [success_rate <= 1.0]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["GATE PASSED: Maze success_rate <= 1:*",
                                 "GATE PASSED: TextCraft success_rate >= 1: success_rate = 1.000*",
                                 "GATE PASSED: TextCraft mean_reward >= 1: mean_reward = 1.000*",
                                 "*13 passed*"])


def test_a_reward_just_below_min_reward_fails_with_the_threshold_in_the_message(pytester):
    node = make_project(pytester)
    suite(pytester, "babyai", "environment: BabyAI\ntasks: [1]\nmin_reward: 0.95\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=below")
    (record,) = episodes(pytester, "below")
    assert record["success"] and record["reward"] < 0.95  # solved, but not quickly enough
    assert result.ret == 1 and record["outcome"] == "failed"
    result.stdout.fnmatch_lines([f"BabyAI[[]1]: reward {record['reward']} < min_reward 0.95*"])
