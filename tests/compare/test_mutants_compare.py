"""What a comparison decides that issue 39's mutation pass found no test for
(benchmarks/gates/mutations.py): a reward that is not a number in a run read in memory,
an environment named that neither run holds, and how the verdicts of several
environments make the comparison's."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_agentgym.compare import CompareError, compare_runs
from pytest_agentgym.compare.comparison import worst
from pytest_agentgym.compare.runs import load_run

from helpers.compare_fixtures import paired_run

TWENTY = "P" * 20


def test_a_reward_that_is_not_a_number_is_an_error_in_a_run_read_in_memory(tmp_path):
    """episodes.jsonl holds such a reward as null; a run read once and handed over (trend,
    the stop-when-decided looks) may hold the number itself: still an error, not a pass."""
    base = paired_run(tmp_path, "base", {"BabyAI": TWENTY})
    cand = load_run(paired_run(tmp_path, "cand", {"BabyAI": TWENTY}).path, "candidate")
    odd = {0: math.nan, 1: math.inf}
    records = tuple(dataclasses.replace(r, reward=odd[r.task_index]) if r.task_index in odd else r
                    for r in cand.records)
    babyai = compare_runs(base.path, dataclasses.replace(cand, records=records)).environments["BabyAI"]
    assert (babyai.n_errors, babyai.n_matched) == (2, 18)
    assert {(f.task_index, f.cand) for f in babyai.flips if f.cand == "error"} == {(0, "error"), (1, "error")}


def test_an_environment_neither_run_holds_is_refused_by_name(tmp_path):
    base = paired_run(tmp_path, "base", {"BabyAI": TWENTY})
    cand = paired_run(tmp_path, "cand", {"BabyAI": TWENTY})
    with pytest.raises(CompareError, match=r"environment\(s\) WebShop are in neither run; the runs hold BabyAI"):
        compare_runs(base.path, cand.path, envs=["BabyAI", "WebShop"])


def test_an_error_outranks_a_regression_and_nothing_compared_is_no_pass():
    assert worst(["ok", "error", "regressed", "inconclusive"]) == "error"
    assert worst(["regressed", "ok", "inconclusive"]) == "regressed"
    assert worst([]) == "error"


def test_a_regressed_and_an_errored_environment_make_an_error_comparison(tmp_path):
    base = paired_run(tmp_path, "base", {"BabyAI": TWENTY * 3, "Maze": TWENTY})
    cand = paired_run(tmp_path, "cand", {"BabyAI": "F" * 30 + "P" * 30, "Maze": "E" * 20})
    comparison = compare_runs(base.path, cand.path)
    assert {e: c.verdict for e, c in comparison.environments.items()} == {"BabyAI": "regressed", "Maze": "error"}
    assert comparison.verdict == "error" and comparison.exit_code() == 1
