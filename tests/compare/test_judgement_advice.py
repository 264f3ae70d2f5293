"""compare_runs after issue 40's statistics (40a requests 1 and 2, wired in judgement.py): at
one repeat the sample-size advice takes the variance the paired differences show, and a
reward interval is clipped to the reward's range widened to the differences seen, never
inverted."""

from __future__ import annotations

from pathlib import Path

from pytest_agentgym.compare import compare_runs
from pytest_agentgym.compare import statistics as stats

from helpers.compare_fixtures import paired_run
from helpers.report_fixtures import make_episode, make_info, write_run

def test_the_advice_at_one_repeat_uses_the_paired_differences(tmp_path: Path):
    """Identical runs: the paired differences show no variance, so the advice is the score
    floor z^2 (1 - m) / m = 73 tasks, not the 2018 the baseline's pooled 0.6 * 0.4 asks."""
    base = paired_run(tmp_path, "base", {"Maze": "PPFPF"})
    cand = paired_run(tmp_path, "cand", {"Maze": "PPFPF"})
    maze = compare_runs(base, cand).environments["Maze"]
    assert maze.verdict == "inconclusive"
    assert stats.tasks_needed(0.24, 1, 0.05, 0.05, binary=True) == 2018
    assert maze.needed_for_margin == 73 and maze.repeats_for_margin == 15


def test_the_advice_with_discordant_tasks_follows_their_variance(tmp_path: Path):
    """12 of 30 tasks discordant each way: the advice is tasks_needed with those differences."""
    base_marks = "PF" * 6 + "P" * 18
    cand_marks = "FP" * 6 + "P" * 18
    base = paired_run(tmp_path, "base", {"Maze": base_marks})
    cand = paired_run(tmp_path, "cand", {"Maze": cand_marks})
    maze = compare_runs(base, cand).environments["Maze"]
    differences = [(c == "P") - (b == "P") for b, c in zip(base_marks, cand_marks)]
    pooled = 0.8 * 0.2
    assert maze.verdict == "inconclusive"
    assert maze.needed_for_margin == stats.tasks_needed(pooled, 1, 0.05, 0.05, binary=True,
                                                        differences=differences)
    assert maze.needed_for_margin != stats.tasks_needed(pooled, 1, 0.05, 0.05, binary=True)


def _reward_run(root: Path, run_id: str, rewards: list[float]):
    info = make_info(run_id=run_id, environments=("Wordle",), gates=())
    records = [make_episode("Wordle", task, run_id=run_id, outcome="failed", reward=reward)
               for task, reward in enumerate(rewards)]
    return write_run(root, info, records)


def test_a_reward_far_outside_the_range_never_inverts_the_interval(tmp_path: Path):
    """Wordle's rewards lie in [0, 1]; a candidate scoring about -3 on every task moves the
    mean difference to about -3.4. The interval holds it (clipped to [-1, 1] it was
    [-1.00, -3.87]) and the verdict is regressed."""
    base = _reward_run(tmp_path, "base", [0.3 + 0.01 * (t % 7) for t in range(30)])
    cand = _reward_run(tmp_path, "cand", [-3.0 - 0.02 * (t % 5) for t in range(30)])
    wordle = compare_runs(base, cand, metric="reward", allow_mismatch=True).environments["Wordle"]
    low, high = wordle.ci
    assert low <= wordle.delta <= high and wordle.delta < -3
    assert wordle.verdict == "regressed"
