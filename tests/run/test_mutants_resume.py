"""Mutation-pass tests for the resume that never narrows (run/resuming.py; benchmarks/gates/
mutations_resume.py): what run.json keeps of the run's first start (its selection and command,
its fingerprint), the command that resumes the whole run, and a resume refused when the paths
it is given hold no suite of an environment it keeps. The first three on run.json's values as
the plugin writes them; the last a real pytest run and its resume."""

from __future__ import annotations

import dataclasses

import pytest

from helpers.projects import make_project, run, suite
from helpers.report_fixtures import make_info
from pytest_agentgym.run.resuming import kept_of_run, recorded_keys, selection_record, whole_command

FIRST = "pytest suites --agentgym-node=nodes/n.yaml --agentgym-run-id=r"
RESUMED = "pytest suites --agentgym-node=nodes/n.yaml --agentgym-resume=reports/r --agentgym-envs=Maze"
SELECTED = {("Maze", 0, 1), ("Maze", 1, 1), ("Wordle", 0, 1)}


def test_a_resume_keeps_the_selection_and_command_of_the_runs_start():
    """The second generation of a run started with FIRST, resumed with RESUMED (which plays
    Maze only: Wordle is kept): run.json's selection is the first start's, word for word."""
    entry = selection_record(SELECTED, FIRST)
    previous = make_info("r", command=RESUMED, settings={"selection": entry})
    kept = kept_of_run(previous, {}, ["Maze"], {("Maze", 0, 1), ("Maze", 1, 1)}, RESUMED)
    assert kept["selection"] == entry and kept["selection"]["command"] == FIRST
    assert recorded_keys(dataclasses.replace(previous, settings={"selection": kept["selection"]})) == SELECTED


def test_a_resume_never_rewrites_the_fingerprint_and_adds_only_what_it_lacked():
    then = {"model": "m", "envs": {"Maze": {"max_rounds": 15, "server": "maze@1"}}}
    now = {"model": "m", "checkpoint": "c", "envs": {"Maze": {"max_rounds": 15, "server": "maze@2"},
                                                     "Wordle": {"max_rounds": 8, "server": "wordle@2"}}}
    previous = make_info("r", fingerprint=then, environments=("Maze",),
                         settings={"selection": selection_record(SELECTED, FIRST)})
    kept = kept_of_run(previous, now, ["Maze", "Wordle"], SELECTED, RESUMED)
    assert kept["fingerprint"] == {"model": "m", "checkpoint": "c",
                                   "envs": {"Maze": {"max_rounds": 15, "server": "maze@1"},
                                            "Wordle": {"max_rounds": 8, "server": "wordle@2"}}}
    assert kept["environments"] == ("Maze", "Wordle")


def test_the_whole_runs_command_holds_one_resume_flag():
    """A run of an older version recorded no selection: its first resume records one from the
    command it finds (the last generation's, a resume's), and the advice drops that resume flag."""
    older = make_info("r", command="pytest suites --agentgym-resume=reports/r", settings={})
    entry = kept_of_run(older, {}, ["Maze"], SELECTED, RESUMED)["selection"]
    resumed = dataclasses.replace(older, settings={"selection": entry})
    assert whole_command(resumed, "/runs/r") == "pytest suites --agentgym-resume=/runs/r"


@pytest.mark.heavy
def test_a_resume_whose_paths_hold_no_suite_of_a_kept_environment_is_refused(pytester):
    """Every episode left to play is under suites/maze.yaml (none is: the run is whole), but
    the run's Wordle gate cannot be judged without Wordle's suite: refused, naming it."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\ngates: [mean_reward >= 0]\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-1\ngates: [mean_reward >= 0]\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=two")
    assert first.ret == 0, first.stdout.str()
    refused = run(pytester, "suites/maze.yaml", f"--agentgym-node={node}", "--agentgym-resume=two")
    assert refused.ret == 4, refused.stdout.str() + refused.stderr.str()
    refused.stderr.fnmatch_lines(["*cannot resume run two*no suite of Wordle (the run's) is under the paths "
                                  "given, so its gates cannot be judged; resume the whole run with: pytest *"])
