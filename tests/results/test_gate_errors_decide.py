"""Errors never lift a threshold gate over its floor (issue 40): within the error budget a gate
is judged on the scored episodes, unless counting the errored episodes beyond the share the
budget's rate expects as failures misses it; then the gate is a GATE ERROR that says the errors
decide it and names the command that resumes the run (results/gates.errors_decide). The pin of
benchmarks/gates/errors_study.py --study gates."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_agentgym.results.aggregate import summarize
from pytest_agentgym.results.gates import Gate, check_env, errors_decide

from helpers.report_fixtures import make_episode

RESUME = "pytest suites/lightweight --agentgym-node=4090 --agentgym-resume=reports/r1"


def _summary(outcomes: str, env: str = "BabyAI", rewards: dict[int, float] | None = None):
    """``outcomes``: one letter an episode, P passed, F failed, E errored."""
    words = {"P": "passed", "F": "failed", "E": "error"}
    return summarize([make_episode(env, task, repeat=1, outcome=words[o], reward=(rewards or {}).get(task))
                      for task, o in enumerate(outcomes)])[env]


def _verdict(summary, gate: str, budget: float = 0.05):
    (verdict,) = check_env(summary, (Gate.parse(gate),), budget, resume=RESUME)
    return verdict


def test_failures_recorded_as_errors_cannot_lift_a_rate_over_its_floor():
    """37 of 90 passed (0.411, below 0.45 as played); 8 of the failures recorded as errors make
    it 37 of 82 scored (0.451), within the budget (10 of 90 at 5%)."""
    played = _verdict(_summary("P" * 37 + "F" * 53), "success_rate >= 0.45")
    assert played.outcome == "failed"
    hidden = _verdict(_summary("P" * 37 + "F" * 45 + "E" * 8), "success_rate >= 0.45")
    assert hidden.outcome == "error" and not hidden.passed and hidden.value == pytest.approx(37 / 82)
    assert hidden.detail == (
        "the errors decide this gate: success_rate = 0.451 on the 82 scored of 90 episodes meets >= 0.45, but 8 "
        "errored; counting the 4 beyond the 4 an error rate of 5.0% per episode expects as failures gives 0.431, "
        "which misses it: fix the errors (see the error items and logs/) and resume the run: "
        f"`{RESUME}`")


@pytest.mark.parametrize("passes, errors, outcome", [(39, 4, "passed"), (39, 6, "passed"), (38, 5, "failed"),
                                                     (38, 6, "error")])
def test_the_errors_the_budget_rate_expects_count_at_the_scored_rate(passes, errors, outcome):
    """BabyAI 90, floor 0.45 (40.5 successes of 90). The 4 errors 5% of 90 expects count at the
    scored rate, the rest as failures: 39 passes and 6 errors give 39 + 4 * 39/84 = 40.9 of 90,
    which meets it; 38 and 6 give 39.8, which misses it (38 and 5 already fail as scored)."""
    summary = _summary("P" * passes + "F" * (90 - passes - errors) + "E" * errors)
    assert _verdict(summary, "success_rate >= 0.45").outcome == outcome


def test_a_gate_the_errors_cannot_flip_and_one_already_failed_are_as_scored():
    summary = _summary("P" * 60 + "F" * 20 + "E" * 10)
    assert _verdict(summary, "success_rate >= 0.45").outcome == "passed"  # (60 + 4 * 0.75) / 90 = 0.7
    assert _verdict(summary, "success_rate >= 0.8").outcome == "failed"  # failed as scored: not an error
    # a ceiling: the errors count as successes, the same rule the other way
    low = _summary("P" * 8 + "F" * 72 + "E" * 10)
    verdict = _verdict(low, "success_rate <= 0.1")  # 8 of 80 scored meet it
    assert verdict.outcome == "error" and "gives 0.160" in verdict.detail  # (8 + 4 * 0.1 + 6) / 90
    assert _verdict(low, "success_rate <= 0.2").outcome == "passed"


def test_a_mean_reward_counts_the_errors_at_the_low_end_of_the_reward_range():
    rewards = {task: 0.5 for task in range(80)}
    summary = _summary("P" * 80 + "E" * 10, env="Maze", rewards=rewards)
    assert summary.mean_reward == pytest.approx(0.5) and summary.reward_range == (-1.0, 1.0)  # configs/envs.yaml
    verdict = _verdict(summary, "mean_reward >= 0.41")
    assert verdict.outcome == "error" and "gives 0.400" in verdict.detail  # (0.5 * 84 - 1 * 6) / 90
    assert _verdict(summary, "mean_reward >= 0.40").outcome == "passed"


def test_without_a_resume_command_the_reason_says_how_to_make_one():
    summary = _summary("P" * 37 + "F" * 45 + "E" * 8)
    reason = errors_decide(Gate.parse("success_rate >= 0.45"), summary, 0.05)
    assert reason.endswith("resume the run: the run's command with --agentgym-resume=<its run directory>")


def test_three_percent_errors_rarely_let_the_errors_decide_an_unchanged_run():
    """200 runs of BabyAI (90 tasks, success ~ Beta(2,2)) at its floor's neighbourhood (mean 0.5,
    floor 0.45), each episode erring at 3%, a fixed seed: the errors decide the gate in at most
    3 of them (the study, 1,000 runs a cell: red within 2 points of the runs without errors);
    counting every error as a failure made about 7% of them red on top of the 17-18%."""
    rng = np.random.default_rng(40)
    gate = Gate.parse("success_rate >= 0.45")
    decided = 0
    for _ in range(200):
        won, erred = rng.random(90) < rng.beta(2, 2, size=90), rng.random(90) < 0.03
        summary = _summary("".join("E" if e else "P" if w else "F" for w, e in zip(won, erred)))
        decided += errors_decide(gate, summary, 0.05) is not None and check_env(summary, (gate,), 0.05)[0].outcome \
            == "error"
    assert decided <= 3, decided
