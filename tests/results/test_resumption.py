"""One command resumes a run (results/resumption.py): what a refused resume prints
(run/resuming.py) and what a comparison's error verdict names (compare/error_rule.py) are
the same string, read from run.json alone."""

from __future__ import annotations

from helpers.report_fixtures import make_episode, make_info, write_run
from pytest_agentgym.compare import compare_runs
from pytest_agentgym.results.resumption import resume_command
from pytest_agentgym.run import resuming

SELECTION = {"episodes": {"Maze": {"1": "0-24"}}, "count": 25,
             "command": "pytest suites -k 'maze or wordle' --agentgym-resume=old --agentgym-seed=7"}


def test_the_command_that_started_the_run_without_its_old_resume_flag():
    started = make_info("r", settings={"selection": SELECTION}, command="pytest --agentgym-resume=r")
    assert resume_command(started, "/runs/r") == \
        "pytest suites -k 'maze or wordle' --agentgym-seed=7 --agentgym-resume=/runs/r"
    older = make_info("r", settings={}, command="pytest suites --agentgym-resume=reports/r")  # no selection
    assert resume_command(older, "/runs/r") == "pytest suites --agentgym-resume=/runs/r"
    unbalanced = make_info("r", settings={}, command="pytest -k 'maze")  # a hand-written run.json
    assert resume_command(unbalanced, "/runs/r") == "'pytest -k '\"'\"'maze' --agentgym-resume=/runs/r"
    assert resuming.whole_command is resume_command and resuming.recorded(started) is SELECTION


def test_a_comparisons_error_names_the_same_command(tmp_path):
    info = make_info("cand", environments=("Maze",), gates=(), settings={"selection": SELECTION})
    base = write_run(tmp_path, make_info("base", environments=("Maze",), gates=()),
                     [make_episode("Maze", t, run_id="base", repeat=1) for t in range(25)])
    cand = write_run(tmp_path, info, [make_episode("Maze", t, run_id="cand", repeat=1,
                                                   outcome="error" if t < 7 else "passed") for t in range(25)])
    maze = compare_runs(base.path, cand.path, allow_mismatch=True).environments["Maze"]
    assert maze.verdict == "error" and maze.detail.endswith(
        f"resume the candidate with `{resume_command(info, cand.path)}`")
    assert "--agentgym-seed=7 --agentgym-resume=" in maze.detail
