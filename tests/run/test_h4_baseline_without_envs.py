"""A baseline that did not play this run's environments is refused for that, not as an
older run (issue 39, finding 4).

Real runs (the plugin in pytest subprocesses: embedded servers, the reference agent over
HTTP): a baseline that played Wordle, then a run of Maze with that baseline. Before, the run
was refused with "baseline has no fingerprint (a run from an older pytest-agentgym)" and
"candidate has no fingerprint" (both runs had one: the check had narrowed both to the
environments they share, none); now the refusal says the baseline played no Maze, what it
played, and what to do.
"""

from __future__ import annotations

import pytest

from helpers.small_project import make_project, pytest_run

pytestmark = pytest.mark.faults


def test_a_baseline_without_this_runs_environments_is_refused_for_that(tmp_path):
    root = make_project(tmp_path, {"wordle": "environment: Wordle\ntasks: 0-1\n",
                                   "maze": "environment: Maze\ntasks: 0-1\n"})
    base = pytest_run(root, "--agentgym-run-id=words", "--agentgym-no-nats", "-k", "Wordle")
    assert base.returncode == 0, base.stdout + base.stderr
    result = pytest_run(root, "--agentgym-run-id=mazes", "--agentgym-no-nats", "-k", "Maze",
                        "--agentgym-baseline=reports/words")
    assert result.returncode == 4, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "older pytest-agentgym" not in said and "candidate has no" not in said
    # (names Maze once run/checks.py passes plays=: /work/briefs/out/h4-requests.md)
    assert "the baseline has no episodes and no fingerprint of " in said, said
    assert ("this run plays (it played Wordle); pick a baseline that played them, or leave them out of this run "
            "(--agentgym-envs, -k)") in said, said
