"""What the run summary and the gates decide that issue 39's mutation pass found no test
for (benchmarks/gates/mutations.py): errors are no failures in the success rate, a
caller's reward range wins over the shipped one also when other environments take the
shipped ones, a gate on no scored episode is an error, and a gate that was not judged
never passes."""

from __future__ import annotations

import pytest

from pytest_agentgym.results.aggregate import summarize
from pytest_agentgym.results.gates import Gate, check_env

from helpers.report_fixtures import make_episode


def test_the_success_rate_leaves_errored_episodes_out():
    records = [make_episode("Maze", n) for n in range(8)] + [make_episode("Maze", n, outcome="error")
                                                             for n in (8, 9)]
    maze = summarize(records)["Maze"]
    assert (maze.episodes, maze.scored, maze.errors, maze.success_rate) == (10, 8, 2, 1.0)


def test_a_callers_reward_range_wins_while_another_environment_takes_the_shipped_one():
    """TextCraft ships [0, 1]; the caller gives [-1, 1] for it alone, so BabyAI's comes
    from the shipped configs/envs.yaml and TextCraft's must still be the caller's."""
    records = [make_episode("TextCraft", n, reward=r) for n, r in enumerate([0.2] * 24 + [0.5])]
    records += [make_episode("BabyAI", n, reward=0.5) for n in range(3)]
    alone = summarize(records[:25], {"TextCraft": (-1.0, 1.0)})["TextCraft"]
    mixed = summarize(records, {"TextCraft": (-1.0, 1.0)})
    assert mixed["TextCraft"].reward_range == alone.reward_range == (-1.0, 1.0)
    assert mixed["TextCraft"].reward_ci95 == alone.reward_ci95
    assert mixed["BabyAI"].reward_range == (0.0, 1.0)


def test_a_gate_on_no_scored_episode_is_an_error_not_a_failure():
    """With a budget that lets every episode error, the gate still cannot be judged."""
    summary = summarize([make_episode("Maze", n, outcome="error") for n in range(3)])["Maze"]
    (verdict,) = check_env(summary, (Gate.parse("success_rate >= 0.5"),), 1.0)
    assert (verdict.outcome, verdict.passed, verdict.value) == ("error", False, None)
    assert "no scored episode of Maze (3 error(s)); the gate cannot be judged" in verdict.detail


@pytest.mark.parametrize("rewards", [[1.0] * 5, [0.0] * 5])
def test_a_gate_not_judged_never_passes_whatever_it_measured(rewards):
    summary = summarize([make_episode("Maze", n, reward=r, outcome="passed" if r else "failed")
                         for n, r in enumerate(rewards)])["Maze"]
    (verdict,) = check_env(summary, (Gate.parse("success_rate >= 0.5"),), 0.05)
    partial = verdict.not_judged("run interrupted after 5 of 10 episodes")
    assert (partial.outcome, partial.passed, partial.value) == ("not-judged", False, None)
    assert partial.word == "GATE NOT JUDGED" and partial.detail == "run interrupted after 5 of 10 episodes"
