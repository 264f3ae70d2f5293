"""A line of episodes.jsonl written twice: every reader counts the episode once, and says so.

A real run (the plugin in a pytest subprocess: embedded Maze and Wordle servers, the
reference agent over HTTP), then a copy of its run directory whose episodes.jsonl holds
one episode's line a second time byte for byte, and another episode again with a
different record (the same key and generation, success flipped), as a copied or
hand-edited file would. ``pytest-agentgym report``, ``pytest-agentgym compare`` and
``--agentgym-resume`` read the copy in their own processes. Before, each counted the
two extra lines as episodes (the report said 8 episodes for a run of 6; compare judged
an episode from whichever record it met last) and nothing said so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.projects import NODE
from helpers.run_dirs import read_episodes

pytestmark = pytest.mark.faults

SUITES = {"maze": "environment: Maze\ntasks: 0-3\n", "wordle": "environment: Wordle\ntasks: 0-1\n"}
EPISODES = 6


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTGYM_", "JOB_COMPLETION_INDEX"))}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _python(cwd, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=nodes/testnode.yaml",
                   *args)


def agentgym(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _python(cwd, "-m", "pytest_agentgym", *args)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with one finished run, ``reports/clean``."""
    root = tmp_path_factory.mktemp("duplicates")
    (root / "nodes").mkdir()
    (root / "nodes" / "testnode.yaml").write_text(NODE.format(policy="reference", latency_ms=0))
    (root / "suites").mkdir()
    for name, body in SUITES.items():
        (root / "suites" / f"{name}.yaml").write_text(body)
    result = pytest_run(root, "--agentgym-run-id=clean", "--agentgym-no-nats")
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(read_episodes(root / "reports" / "clean")) == EPISODES
    return root


@pytest.fixture
def doubled(project, tmp_path) -> tuple[Path, Path, dict]:
    """A copy of the clean run with line 2 written again as it was (line 7) and line 3's
    episode recorded again with its success flipped (line 8). Returns the project, the
    copy, and the two repeated records by line."""
    copy = tmp_path / "doubled"
    shutil.copytree(project / "reports" / "clean", copy)
    path = copy / "episodes.jsonl"
    lines = path.read_text().splitlines()
    changed = json.loads(lines[2])
    changed.update(success=not changed["success"], reward=0.0 if changed["success"] else 1.0,
                   outcome="unsolved" if changed["success"] else "passed")
    with open(path, "a") as handle:
        handle.write(lines[1] + "\n")
        handle.write(json.dumps(changed) + "\n")
    (copy / "report.html").unlink()
    return project, copy, {7: json.loads(lines[1]), 8: json.loads(lines[2])}


def _named(record: dict) -> str:
    return f"{record['env']} task {record['task_index']} repeat {record['repeat']} (generation 1)"


def test_the_report_counts_a_repeated_episode_once_and_lists_the_lines(doubled):
    root, copy, repeated = doubled
    result = agentgym(root, "report", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    for line, kept_line, same in ((7, 2, "the same line"), (8, 3, "a different record")):
        said = (f"{copy / 'episodes.jsonl'}:{line}: skipped a duplicate of {_named(repeated[line])}: "
                f"line {kept_line} holds it already ({same}); the first written counts")
        assert f"pytest-agentgym report: warning: {said}" in result.stderr
    page = (copy / "report.html").read_text()
    passed = sum(1 for record in read_episodes(root / "reports" / "clean") if record["outcome"] == "passed")
    assert f"<dt>Episodes</dt><dd>{EPISODES}: {passed} passed" in page  # counted once, from the first record
    notice = page[page.index('id="duplicate-lines"'):]
    notice = notice[:notice.index("</div>")]
    assert "2 line(s) of episodes.jsonl repeat an episode" in notice
    assert ":7: skipped a duplicate" in notice and ":8: skipped a duplicate" in notice


def test_compare_pairs_each_episode_once_from_its_first_record(doubled):
    root, copy, repeated = doubled
    result = agentgym(root, "compare", "reports/clean", str(copy), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    judged = json.loads(result.stdout)
    for env, count in (("Maze", 4), ("Wordle", 2)):
        figures = judged["environments"][env]
        assert figures["n_matched"] == count and figures["n_only_cand"] == 0, figures
        assert figures["delta"] == 0.0  # the flipped record (line 8) is not the one that counts
    assert f"compare: warning: {copy / 'episodes.jsonl'}:8: skipped a duplicate of {_named(repeated[8])}" \
        in result.stderr
    assert ":7: skipped a duplicate" in result.stderr


def test_trend_says_each_left_out_line_once_as_a_warning_of_its_own(doubled):
    root, copy, repeated = doubled
    result = agentgym(root, "trend", "--allow-mismatch", "reports/clean", str(copy))
    assert result.returncode in (0, 1), result.stdout + result.stderr
    said = f"trend: warning: {copy / 'episodes.jsonl'}:8: skipped a duplicate of {_named(repeated[8])}"
    assert result.stderr.count(said) == 1, result.stderr
    assert "UserWarning" not in result.stderr  # not Python's own warning format


def test_a_resumed_run_keeps_each_episode_once_and_counts_the_duplicates(doubled):
    root, copy, _ = doubled
    result = pytest_run(root, f"--agentgym-resume={copy}", "--agentgym-no-nats")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{EPISODES} passed" in result.stdout  # every episode kept, none played again
    info = json.loads((copy / "run.json").read_text())
    assert info["counts"]["episodes"] == EPISODES and info["counts"]["kept"] == EPISODES
    assert info["counts"]["duplicates"] == 2
    for line, kept_line in ((7, 2), (8, 3)):  # the run's last lines name them
        assert f"agentgym: {copy / 'episodes.jsonl'}:{line}: skipped a duplicate" in result.stdout
        assert f"line {kept_line} holds it already" in result.stdout
    assert len(read_episodes(copy)) == EPISODES + 2  # append-only: nothing was written again
