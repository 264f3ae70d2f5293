"""An environment in which no key was scored in both runs, because every key the two runs
share errored in one of them, gets an ``error`` verdict that says so and names the resume,
never an AssertionError (issue 40: one errored key of one is within the binomial error
budget, so the budget alone let such an environment through to the estimate, which has
nothing to pair; tests/results/test_readers_property.py found it)."""

from __future__ import annotations

import pytest

from helpers.report_fixtures import make_episode, make_info, write_run
from pytest_agentgym.compare import compare_runs
from pytest_agentgym.results import fingerprint


def _run(root, run_id: str, envs: dict[str, str]) -> str:
    """A finished run, repeat 1 of each task: P passed, F failed, E an infrastructure error,
    - no record of that task."""
    settings = {"max_rounds": 15, "sampling": {"temperature": 0.0}, "prompt_sha256": "cd" * 32,
                "server": "embedded"}
    info = make_info(run_id=run_id, environments=tuple(envs), gates=(),
                     fingerprint=fingerprint.build(model="qwen3.5-9b", endpoint_kind="tensorzero",
                                                   checkpoint="ckpt/step-1200", envs={e: settings for e in envs}))
    outcome = {"P": "passed", "F": "failed", "E": "error"}
    records = [make_episode(env, task, run_id=run_id, repeat=1, outcome=outcome[m])
               for env, marks in envs.items() for task, m in enumerate(marks) if m != "-"]
    return str(write_run(root, info, records).path)


@pytest.mark.parametrize("base, cand, where, erred_in", [
    ("P", "E", "tasks 0", "candidate"),            # the only key errored in the candidate
    ("E", "P", "tasks 0", "baseline"),             # ... in the baseline
    ("PPPP", "E---", "tasks 0", "candidate"),      # the property test's run: the rest missing
    ("PEP", "EPE", "tasks 0-2", "candidate"),      # every key errored in one run or the other
    ("EE", "EE", "tasks 0-1", "candidate"),        # errored in both runs
], ids=["one key, candidate", "one key, baseline", "one shared key, rest missing", "each side", "both runs"])
def test_an_environment_with_nothing_scored_in_both_runs_is_an_error_with_the_reason(tmp_path, base, cand,
                                                                                      where, erred_in):
    base_dir = _run(tmp_path, "base", {"Maze": base, "BabyAI": "P" * 100})
    cand_dir = _run(tmp_path, "cand", {"Maze": cand, "BabyAI": "P" * 100})
    comparison = compare_runs(base_dir, cand_dir, allow_mismatch=True)
    maze = comparison.environments["Maze"]
    shared = sum(1 for b, c in zip(base, cand) if "-" not in (b, c))
    assert maze.verdict == "error" and maze.n_matched == 0 and maze.n_errors == shared
    assert maze.delta is None and maze.ci is None
    assert maze.detail.startswith(f"no episode was scored in both runs: all {shared} in both errored in one of "
                                  f"them ({where}), so nothing is left to compare; fix the errors")
    run_dir = cand_dir if erred_in == "candidate" else base_dir
    assert f"resume the {erred_in} with `" in maze.detail and f"--agentgym-resume={run_dir}`" in maze.detail
    # the other environment is judged as ever: the empty one takes nothing from it
    assert comparison.environments["BabyAI"].verdict == "ok"
    assert comparison.verdict == "error"
    assert "Maze" in "\n".join(comparison.lines())
