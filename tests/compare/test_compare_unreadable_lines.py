"""A line of episodes.jsonl that names its episode but is no record (a NaN reward written by
another tool) is paired as that episode recorded with an error, never as a key the run lacks
(issue 40): six such failures in a 25-task environment are judged by the error rule, not
passed as `ok`; such keys count in the error budget; a line that names nothing is left out as
before. Real run directories written to tmp_path."""

from __future__ import annotations

import json

import pytest

from pytest_agentgym.cli import main as cli
from pytest_agentgym.compare import CompareError, compare_runs
from pytest_agentgym.compare.error_rule import ERRORS_DECIDE
from pytest_agentgym.compare.runs import load_run
from pytest_agentgym.report.compare_view import build_view
from pytest_agentgym.results.reading import UNREADABLE_RECORD

from helpers.marked_runs import write_run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the reader warns about each such line

#: The lines the candidate's six NaN rewards are on (tasks 19-24 after 19 passed episodes)
NAN_LINES = "20, 21, 22, 23, 24, 25"


def test_six_nan_failures_in_25_tasks_are_judged_by_the_error_rule_not_passed_as_ok(tmp_path, capsys):
    base = write_run(tmp_path, "base", {"Maze": "P" * 25})
    cand = write_run(tmp_path, "cand", {"Maze": "P" * 19 + "U" * 6})
    played = write_run(tmp_path, "played", {"Maze": "P" * 19 + "F" * 6})
    assert compare_runs(base, played).environments["Maze"].verdict == "regressed"  # p = 0.5^6 = 0.016

    compared = compare_runs(base, cand, allow_mismatch=True)
    maze = compared.environments["Maze"]
    assert compared.verdict == maze.verdict == "error" and maze.detail.startswith(ERRORS_DECIDE)
    assert (maze.n_errors, maze.n_matched, maze.n_only_base) == (6, 19, 0)
    assert "scored as failures in both runs it is regressed" in maze.detail
    assert (f"6 of the errored episode(s) are lines that name their episode but are no record, counted as "
            f"errors: the candidate's {cand / 'episodes.jsonl'} line(s) {NAN_LINES} (line 20: TypeError: "
            f"'reward' must be a finite number or null, got NaN") in maze.detail
    assert compared.mismatches == ()  # the run holds every key it selected: nothing to allow
    assert compare_runs(base, cand).verdict == "error"

    assert cli(["compare", str(base), str(cand), "--allow-mismatch", "--html", str(tmp_path / "c.html")]) == 1
    out = capsys.readouterr().out
    assert "-> ERROR (margin 0.05): the errors decide the verdict" in out and f"line(s) {NAN_LINES}" in out
    assert (tmp_path / "c.html").is_file()  # the compare view shows the errored keys without a trajectory


def test_a_key_named_by_a_nan_line_counts_in_the_error_budget(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "P" * 25})
    within = write_run(tmp_path, "within", {"Maze": "EEEE" + "P" * 21})
    over = write_run(tmp_path, "over", {"Maze": "EEEE" + "UUU" + "P" * 18})
    assert "error budget" not in compare_runs(base, within).environments["Maze"].detail  # 4 of 25: within

    maze = compare_runs(base, over).environments["Maze"]
    assert maze.verdict == "error" and maze.n_errors == 7
    assert maze.detail.startswith("7 of 25 episodes errored in either run (28.0%; tasks 0-6): more than an "
                                  "error rate of 5.0% per run (the error budget)")
    assert "3 of the errored episode(s) are lines that name" in maze.detail and "line(s) 5, 6, 7 (" in maze.detail


def test_a_line_that_names_no_episode_leaves_its_key_missing_as_before(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "P" * 25})
    cand = write_run(tmp_path, "cand", {"Maze": "P" * 24})
    with (cand / "episodes.jsonl").open("a") as handle:
        record = json.loads((cand / "episodes.jsonl").read_text().splitlines()[0])
        handle.write(json.dumps({**record, "task_index": 24, "reward": "abc"}) + "\n")  # a field of the wrong type
    assert load_run(cand, "candidate").unreadable == {}
    with pytest.raises(CompareError, match="not run the same way"):
        compare_runs(base, cand)
    maze = compare_runs(base, cand, allow_mismatch=True).environments["Maze"]
    assert (maze.n_errors, maze.n_only_base, maze.n_matched) == (0, 1, 24)
    assert "name their episode" not in maze.detail


def test_the_newest_generation_counts_and_in_it_a_record_before_a_line_naming_one(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PP"})
    cand = write_run(tmp_path, "cand", {"Maze": "PU"})  # task 1: a NaN line in generation 1
    lines = (cand / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    info = json.loads((cand / "run.json").read_text())
    (cand / "run.json").write_text(json.dumps({**info, "generation": 2}))
    with (cand / "episodes.jsonl").open("a") as handle:  # a resume: task 1 played again, task 0 a NaN
        # a NaN line of a generation that has a record, before it: the record counts, as for every reader
        handle.write(json.dumps({**first, "task_index": 1, "reward": float("nan"), "generation": 2}) + "\n")
        handle.write(json.dumps({**first, "task_index": 1, "generation": 2}) + "\n")
        handle.write(json.dumps({**first, "reward": float("nan"), "generation": 2}) + "\n")
    loaded = load_run(cand, "candidate")
    assert {r.task_index: (r.generation, r.error.type if r.error else None) for r in loaded.records} == {
        0: (2, UNREADABLE_RECORD), 1: (2, None)}
    assert set(loaded.unreadable) == {("Maze", 0, 1)} and loaded.unreadable[("Maze", 0, 1)].line == 5
    assert loaded.whole(("Maze", 0, 1)).error.type == UNREADABLE_RECORD  # the compare view's reading
    flips = compare_runs(base, loaded).environments["Maze"].flips
    assert [(f.task_index, f.cand) for f in flips] == [(0, "error"), (1, "pass")]
    assert build_view(compare_runs(base, loaded)).envs[0].rows[0].cand == "error"
