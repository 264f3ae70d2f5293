"""A line of a later generation than its run's is no record of that run (issue 39, finding 1).

A real run (the plugin in a pytest subprocess: embedded Maze and Wordle servers, the
reference agent over HTTP) at generation 1, then a copy whose episodes.jsonl gets one
more line: an episode of the run again, success flipped, ``generation: 2`` (a hand edit,
a line copied from another run). ``pytest-agentgym report``, ``compare`` (from the file
and from the light index the report leaves) and ``--agentgym-resume`` read the copy in
their own processes. Before, each took that line as the newest word on its episode: the
report and compare counted the flipped record, every reader exited 0 and nothing said
so; a resume (generation 2) counted it as its own record. Now every reader leaves it out
and names it, and a resume refuses the run until the line is deleted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.run_dirs import read_episodes
from helpers.small_project import agentgym, make_project, pytest_run
from pytest_agentgym.results.reading import LATER_GENERATION, read_episodes_file, record_without_turns

pytestmark = pytest.mark.faults

SUITES = {"maze": "environment: Maze\ntasks: 0-3\n", "wordle": "environment: Wordle\ntasks: 0-1\n"}
EPISODES = 6


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with one finished run, ``reports/clean`` (generation 1)."""
    root = make_project(tmp_path_factory.mktemp("later"), SUITES)
    result = pytest_run(root, "--agentgym-run-id=clean", "--agentgym-no-nats")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(read_episodes(root / "reports" / "clean")) == EPISODES
    return root


@pytest.fixture
def later(project, tmp_path) -> tuple[Path, Path, dict]:
    """A copy of the clean run whose line 7 records line 3's episode again, success flipped,
    as generation 2 (run.json says 1). Returns the project, the copy and line 3's record."""
    copy = tmp_path / "later"
    shutil.copytree(project / "reports" / "clean", copy)
    (copy / "report.html").unlink()
    (copy / "episodes.light.json").unlink(missing_ok=True)
    path = copy / "episodes.jsonl"
    original = json.loads(path.read_text().splitlines()[2])
    assert original["success"] and original["generation"] == 1 and json.loads((copy / "run.json").read_text())["generation"] == 1
    changed = {**original, "success": False, "reward": 0.0, "outcome": "unsolved", "generation": 2}
    with open(path, "a") as handle:
        handle.write(json.dumps(changed) + "\n")
    return project, copy, original


def _said(copy: Path) -> str:
    return (f"{copy / 'episodes.jsonl'}:7: skipped {LATER_GENERATION} (its generation 2 is beyond the run's "
            f"generation 1 in run.json: it is no record of this run")


def test_every_reader_in_this_process_leaves_the_line_out(later):
    _, copy, original = later
    for convert in (record_without_turns, None):
        found = read_episodes_file(copy / "episodes.jsonl", *([convert] if convert else []))
        assert len(found.records) == len(found.current) == EPISODES and 7 not in found.lines
        assert [str(s) for s in found.skipped] == [str(found.skipped[0])] and str(found.skipped[0]).startswith(_said(copy))
        kept = {r.key: r for r in found.current}
        assert kept[(original["env"], original["task_index"], original["repeat"])].success is True
    # read alone (no run.json beside it) a file names no run: its lines are all taken
    alone = copy.parent / "alone"
    alone.mkdir()
    shutil.copy(copy / "episodes.jsonl", alone / "episodes.jsonl")
    assert len(read_episodes_file(alone / "episodes.jsonl").records) == EPISODES + 1


def test_report_and_compare_count_the_scored_record_and_say_why_the_line_is_left_out(later):
    root, copy, _ = later
    report = agentgym(root, "report", str(copy))
    assert report.returncode == 0, report.stdout + report.stderr
    assert f"pytest-agentgym report: warning: {_said(copy)}" in report.stderr
    page = (copy / "report.html").read_text()
    passed = sum(1 for record in read_episodes(root / "reports" / "clean") if record["outcome"] == "passed")
    assert f"<dt>Episodes</dt><dd>{EPISODES}: {passed} passed" in page
    assert (copy / "episodes.light.json").is_file()  # compare below reads through the report's index
    for _ in range(2):  # from the index, and from the file once the index is gone
        result = agentgym(root, "compare", "reports/clean", str(copy), "--json")
        assert result.returncode == 0, result.stdout + result.stderr
        judged = json.loads(result.stdout)
        for env, count in (("Maze", 4), ("Wordle", 2)):
            figures = judged["environments"][env]
            assert figures["n_matched"] == count and figures["delta"] == 0.0, figures
        assert f"compare: warning: {_said(copy)}" in result.stderr
        (copy / "episodes.light.json").unlink(missing_ok=True)


def test_a_resume_refuses_a_run_that_holds_a_later_generation_and_names_the_line(later):
    root, copy, _ = later
    before = (copy / "episodes.jsonl").read_bytes()
    result = pytest_run(root, f"--agentgym-resume={copy}", "--agentgym-no-nats")
    assert result.returncode == 4, result.stdout + result.stderr
    assert (f"{copy / 'episodes.jsonl'} holds 1 line(s) of a generation beyond the run's generation 1 "
            f"(run.json), at line(s) 7") in result.stderr
    assert "delete those lines (or start a new run), then resume again" in result.stderr
    assert (copy / "episodes.jsonl").read_bytes() == before
    lines = before.decode().splitlines()
    (copy / "episodes.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # the line deleted: resumed
    resumed = pytest_run(root, f"--agentgym-resume={copy}", "--agentgym-no-nats")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads((copy / "run.json").read_text())["counts"]["kept"] == EPISODES
