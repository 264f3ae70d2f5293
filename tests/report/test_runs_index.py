"""The runs index of a reports directory (report/index.py): its rows from real run
directories (finished, running, crashed, broken, shards), their order, the
``pytest-agentgym runs`` table, the static reports/index.html, and that a real pytest
run writes it beside its report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentgym.report.index import read_index, refresh_index, write_index
from pytest_agentgym.report.run_rows import RowCache
from pytest_agentgym.results.store import RunDir, point_latest

from helpers import REPO
from helpers.projects import make_project, run, suite
from helpers.report_fixtures import make_episode
from helpers.runs_index import finished_run, running_run


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    """Two finished runs, a running one, a crashed one, a sharded one, three broken
    directories and one that holds no run."""
    root = tmp_path / "reports"
    finished_run(root, "step-1000", {"BabyAI": "PFFF", "Maze": "PPFF"}, checkpoint="ckpt/step-1000",
                 started_at="2026-11-20T10:00:00+00:00")
    finished_run(root, "step-1200", {"BabyAI": "PPPF", "Maze": "PPPE"}, checkpoint="ckpt/step-1200",
                 started_at="2026-11-21T10:00:00+00:00")
    point_latest(root, "step-1200")
    running_run(root, "step-1400", {"BabyAI": "PP"}, checkpoint="ckpt/step-1400",
                started_at="2026-11-22T10:00:00+00:00")
    dead = running_run(root, "dead", {"BabyAI": "P"}, started_at="2026-11-19T10:00:00+00:00")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    text = dead.run_file.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {int(gone.stdout)}')
    dead.run_file.write_text(text)
    finished_run(root / "sharded", "shard-1-of-2", {"Maze": "PF"}, started_at="2026-11-18T10:00:00+00:00")
    (root / "torn").mkdir()
    (root / "torn" / "run.json").write_text('{"run_id": "torn", "started_at": "2026-11-2')
    (root / "listy").mkdir()
    (root / "listy" / "run.json").write_text("[1, 2, 3]\n")
    lost = RunDir.create(root, "lost")
    lost.append_episode(make_episode("Wordle", 0, run_id="lost"))
    (root / "workers" / "w1").mkdir(parents=True)  # a queue worker's logs: no run
    return root


def by_key(rows):
    return {row.key: row for row in rows}


def test_rows_say_what_each_run_directory_holds(reports):
    rows = by_key(read_index(reports))
    assert set(rows) == {"step-1000", "step-1200", "step-1400", "dead", "sharded/shard-1-of-2", "torn", "listy",
                         "lost"}

    done = rows["step-1200"]
    assert (done.status, done.model, done.checkpoint, done.node, done.latest) == (
        "finished", "qwen3.5-9b", "ckpt/step-1200", "4090", True)
    assert done.figures_from == "run.json"
    assert done.envs["BabyAI"].success_rate == pytest.approx(0.75)
    assert done.envs["Maze"].episodes == 4 and done.envs["Maze"].errors == 1
    assert (done.episodes, done.errors, done.planned) == (8, 1, 8)
    assert done.gates == {"passed": 2} and done.gates_text() == "2 passed"
    old = rows["step-1000"]
    assert old.gates == {"failed": 1, "passed": 1} and old.failed_gates == ["BabyAI: success_rate >= 0.5 (failed)"]
    assert not old.latest

    live = rows["step-1400"]
    assert (live.status, live.figures_from, live.episodes, live.problem) == ("running", "episodes.jsonl", 2, "")
    assert live.envs["BabyAI"].success_rate == 1.0

    dead = rows["dead"]
    assert dead.status == "crashed" and "is gone" in dead.problem and "--agentgym-resume=" in dead.problem
    assert json.loads((reports / "dead" / "run.json").read_text())["status"] == "running"  # readers do not write

    shard = rows["sharded/shard-1-of-2"]
    assert shard.shard == "1/2" and shard.episodes == 2

    assert rows["torn"].status == "broken" and "run.json cannot be read (JSONDecodeError" in rows["torn"].problem
    assert rows["listy"].status == "broken" and "JSON list, not an object" in rows["listy"].problem
    lost = rows["lost"]
    assert lost.status == "broken" and lost.problem.startswith("no run.json")
    assert lost.episodes == 1 and lost.figures_from == "episodes.jsonl"


def test_a_finished_run_is_read_from_run_json_alone(reports):
    (reports / "step-1200" / "episodes.jsonl").write_text("this is not what the index reads\n")
    row = by_key(read_index(reports))["step-1200"]
    assert row.envs["BabyAI"].success_rate == pytest.approx(0.75) and row.episodes == 8


def test_rows_are_newest_first_and_broken_ones_last(reports):
    keys = [row.key for row in read_index(reports)]
    assert keys[:6] == ["step-1400", "step-1200", "step-1000", "dead", "sharded/shard-1-of-2", "torn"]
    assert set(keys[6:]) == {"listy", "lost"}  # no start time: last


def test_a_running_row_follows_its_episodes_and_the_cache_keeps_the_rest(reports):
    cache = RowCache()
    first = by_key(read_index(reports, cache))
    assert first["step-1400"].episodes == 2
    RunDir(reports / "step-1400").append_episode(make_episode("BabyAI", 2, run_id="step-1400", outcome="failed"))
    again = by_key(read_index(reports, cache))
    assert again["step-1400"].episodes == 3
    assert again["step-1400"].envs["BabyAI"].success_rate == pytest.approx(2 / 3)
    # an unchanged run is not read again: what the cache holds is what is shown
    cache._rows["step-1000"][1].model = "from the cache"
    assert by_key(read_index(reports, cache))["step-1000"].model == "from the cache"


def test_runs_command_prints_one_line_per_run(reports):
    result = subprocess.run([sys.executable, "-m", "pytest_agentgym", "runs", str(reports)], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATUS", "STARTED"]
    assert re.match(r"step-1400 +running +2026-11-22 10:00 +qwen3.5-9b +ckpt/step-1400 +4090 +2 +none "
                    r"+BabyAI 100% 1.000$", lines[1])
    assert re.search(r"^step-1200 \(latest\) +finished .* 8/8 \(1 err\) +2 passed +BabyAI 75% 0.750, "
                     r"Maze 100% 1.000$", result.stdout, re.M)
    assert re.search(r"^torn +broken .*\n    ! run.json cannot be read \(JSONDecodeError", result.stdout, re.M)

    as_json = subprocess.run([sys.executable, "-m", "pytest_agentgym", "runs", str(reports), "--json"],
                             capture_output=True, text=True, cwd=REPO, timeout=60)
    rows = {row["key"]: row for row in json.loads(as_json.stdout)}
    assert rows["step-1000"]["envs"]["Maze"]["success_rate"] == 0.5 and rows["dead"]["status"] == "crashed"


def test_runs_command_refuses_what_is_no_reports_directory(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pytest_agentgym", "runs", str(tmp_path / "nowhere")],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert "nowhere does not exist; give the directory the runs were written to" in result.stderr


def test_index_html_is_self_contained_and_links_each_report(reports):
    (reports / "step-1200" / "report.html").write_text("<html></html>")
    path = write_index(reports)
    assert path == reports / "index.html"
    page = path.read_text()
    assert 'href="step-1200/report.html"' in page
    assert 'href="step-1000/report.html"' not in page and "no report.html" in page
    assert 'data-key="sharded/shard-1-of-2"' in page and "shard 1/2" in page
    assert "run.json cannot be read" in page
    assert "pytest-agentgym view" in page  # the static page says where the live one is
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched


def test_refresh_index_reports_a_failure_instead_of_raising(reports):
    (reports / "index.html").mkdir()  # the page cannot replace a directory
    path, problem = refresh_index(reports / "step-1200")
    assert path is None and problem and "index.html" in problem
    # a shard's index is its reports directory's, two levels up
    (reports / "index.html").rmdir()
    path, problem = refresh_index(reports / "sharded" / "shard-1-of-2")
    assert problem is None and path == reports / "index.html"


def test_a_real_run_writes_the_index_beside_its_report(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\ngates: [success_rate >= 0.5]\n")
    (pytester.path / "reports" / "half-written").mkdir(parents=True)
    (pytester.path / "reports" / "half-written" / "run.json").write_text("{")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=first")
    assert result.ret == 0, result.stdout.str()
    page = (pytester.path / "reports" / "index.html").read_text()
    assert 'href="first/report.html"' in page and (pytester.path / "reports" / "first" / "report.html").is_file()
    assert 'data-key="half-written"' in page and "run.json cannot be read" in page
    assert re.search(r'data-env="Maze"[^>]*>\s*<span class="rate">100.0%</span>', page)


def test_an_index_that_cannot_be_written_leaves_the_run_as_it_was(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: [0]\n")
    (pytester.path / "reports" / "index.html").mkdir(parents=True)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=only")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "reports" / "only" / "report.html").is_file()
    assert (pytester.path / "reports" / "index.html").is_dir()


def test_a_tally_follows_a_growing_file_as_every_reader_reads_it(tmp_path):
    import dataclasses

    from pytest_agentgym.report.run_rows import EpisodeTally
    from pytest_agentgym.results.aggregate import summarize
    from pytest_agentgym.results.reading import read_episodes_file

    run = RunDir.create(tmp_path, "growing")
    tally = EpisodeTally(run.episodes_file)
    assert tally.update().figures() == ("", {}, 0, 0)  # no file yet
    run.append_episode(make_episode("BabyAI", 0, run_id="growing", outcome="error"))
    run.append_episode(make_episode("BabyAI", 1, run_id="growing"))
    assert tally.update().figures()[2:] == (2, 1)
    with run.episodes_file.open("ab") as handle:  # a line its writer is still writing
        handle.write(b'{"run_id": "growing", "env": "Maze"')
    assert tally.update().figures()[2] == 2 and tally.skipped == 0
    with run.episodes_file.open("ab") as handle:  # ... then cut short (a killed writer): the next append ends it
        handle.write(b', "task_index": 0')
    retry = dataclasses.replace(make_episode("BabyAI", 0, run_id="growing"), generation=2)
    run.append_episode(retry)  # a resume plays the errored episode again
    run.append_episode(make_episode("BabyAI", 1, run_id="growing", outcome="failed"))  # a duplicate: left out
    source, envs, episodes, errors = tally.update().figures()
    assert (source, episodes, errors, tally.skipped) == ("episodes.jsonl", 2, 0, 1)
    assert envs["BabyAI"].success_rate == 1.0
    every = summarize(read_episodes_file(run.episodes_file).current)["BabyAI"]
    assert (every.success_rate, every.mean_reward, every.episodes) == (
        envs["BabyAI"].success_rate, envs["BabyAI"].mean_reward, envs["BabyAI"].episodes)

    run.episodes_file.unlink()  # replaced by a shorter file: read again from its start
    run.append_episode(make_episode("Maze", 3, run_id="growing", outcome="failed"))
    source, envs, episodes, errors = tally.update().figures()
    assert set(envs) == {"Maze"} and episodes == 1 and envs["Maze"].success_rate == 0.0


def test_a_tally_skips_the_lines_every_reader_skips(tmp_path):
    from pytest_agentgym.report.run_rows import EpisodeTally
    from pytest_agentgym.results.aggregate import summarize
    from pytest_agentgym.results.reading import read_episodes_file

    good = [json.dumps(make_episode("Maze", task, run_id="odd", outcome=outcome).to_dict())
            for task, outcome in enumerate(("passed", "failed", "passed", "error"))]
    lines = [good[0], "[1, 2, 3]", good[1].replace('"reward": 0.0', '"reward": NaN'),
             good[2].replace('"task_index": 2', '"task_index": "2"'), good[0],
             good[3][:-1] + ', "extra": Infinity}', "not json", good[2], good[1]]
    path = tmp_path / "episodes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tally = EpisodeTally(path).update()
    _, envs, episodes, errors = tally.figures()
    every = read_episodes_file(path)
    summary = summarize(every.current)["Maze"]
    assert (episodes, errors) == (summary.episodes, summary.errors) == (3, 0)
    assert (envs["Maze"].success_rate, envs["Maze"].mean_reward) == (summary.success_rate, summary.mean_reward)
    assert tally.skipped == len(every.skipped) == 5
