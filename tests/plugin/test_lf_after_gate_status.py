"""``--lf`` after a gate failed: pytest's own "run-last-failure" line counts what failed
last time (the gate, and any episode that failed), not every episode the gate brings
back, and says why those episodes run again. Real runs with pytest's cache."""

from __future__ import annotations

import sys

import pytest

from helpers.projects import make_project, suite

pytestmark = pytest.mark.heavy

#: Maze 0 needs 12 moves: unsolved in 4 rounds, so the gate (2 of 3 solved) fails
MAZE = "environment: Maze\ntasks: [0, 17, 18]\nmax_rounds: 4\ngates: [success_rate >= 0.9]\n"


def _lf(pytester, maze: str, *flags: str) -> pytest.RunResult:
    node = make_project(pytester)
    suite(pytester, "maze", maze)
    suite(pytester, "wordle", "environment: Wordle\ntasks: [1, 2]\nmax_rounds: 8\n")
    args = [sys.executable, "-m", "pytest", "-p", "cacheprovider", "suites", f"--agentgym-node={node}"]
    first = pytester.run(*args, "--agentgym-run-id=first")
    assert first.ret == 1, first.stdout.str()
    return pytester.run(*args, *flags, "--agentgym-run-id=again")


def test_lf_counts_the_failed_gate_once_and_names_the_episodes_it_brings_back(pytester):
    again = _lf(pytester, MAZE, "--lf")
    again.stdout.fnmatch_lines([
        "run-last-failure: rerun previous 1 failure: the gate Maze::gate[[]success_rate >= 0.9[]], with the 3 "
        "episodes of suites/maze.yaml it is judged on (skipped 1 file)"])
    assert "rerun previous 3" not in again.stdout.str()


def test_lf_counts_a_failed_episode_and_the_gate_of_its_environment(pytester):
    again = _lf(pytester, MAZE + "min_reward: 1\n", "--lf")  # Maze 0 fails as an episode too
    again.stdout.fnmatch_lines([
        "run-last-failure: rerun previous 2 failures: 1 episode; the gate Maze::gate[[]success_rate >= 0.9[]], "
        "with the 3 episodes of suites/maze.yaml it is judged on (skipped 1 file)"])


def test_ff_says_the_same_with_first(pytester):
    again = _lf(pytester, MAZE, "--ff")
    again.stdout.fnmatch_lines([
        "run-last-failure: rerun previous 1 failure first: the gate Maze::gate[[]success_rate >= 0.9[]], with "
        "the 3 episodes of suites/maze.yaml it is judged on"])
