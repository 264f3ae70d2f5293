"""pytest's own habits on a run of episodes: junit times that are the episodes' durations,
``--lf`` after a gate failure, ``-k`` that starts only the servers it needs (with and
without xdist), and a plugin that stays silent and claims nothing in a session that does
not evaluate. Each test runs pytest in a subprocess inside a fresh project."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from helpers.projects import episodes, make_project, run, run_json, suite

pytestmark = pytest.mark.heavy

MAZE = "environment: Maze\ntasks: [16, 17, 18]\nmax_rounds: 4\n"
WORDLE = "environment: Wordle\ntasks: [1, 2]\nmax_rounds: 8\n"
BABYAI = "environment: BabyAI\ntasks: [0, 1]\n"


def _testcases(path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {case.get("name"): case for case in root.iter("testcase")}


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_junit_time_of_each_testcase_is_its_episodes_duration(pytester, xdist):
    node = make_project(pytester, latency_ms=40)
    suite(pytester, "maze", "environment: Maze\ntasks: [0, 17, 18]\nmax_rounds: 4\n")  # Maze 0: unsolved
    suite(pytester, "wordle", WORDLE)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=j", "--junitxml=out.xml", *xdist)
    assert result.ret == 0, result.stdout.str()
    cases = _testcases(pytester.path / "out.xml")
    records = {f"{r['env']}[{r['task_index']}]": r for r in episodes(pytester, "j")}
    assert len(records) == 5 and records["Maze[0]"]["outcome"] == "unsolved"
    for name, record in records.items():
        case = cases[name]
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert float(properties["duration_s"]) == pytest.approx(record["duration_s"], abs=1e-6)
        # junit writes the time with 3 decimals; the episode took at least one model call of 40 ms
        assert float(case.get("time")) == pytest.approx(record["duration_s"], abs=2e-3), name
        assert float(case.get("time")) >= 0.04


def test_lf_after_a_gate_failure_reruns_that_environments_episodes(pytester):
    node = make_project(pytester)
    # Maze 0 needs 12 moves: unsolved in 4 rounds (an xfail, never a failure), so only the gate fails
    suite(pytester, "maze", "environment: Maze\ntasks: [0, 17, 18]\nmax_rounds: 4\ngates: [success_rate >= 0.9]\n")
    suite(pytester, "wordle", WORDLE)
    args = [sys.executable, "-m", "pytest", "-p", "cacheprovider", "suites", f"--agentgym-node={node}"]
    first = pytester.run(*args, "--agentgym-run-id=first")
    assert first.ret == 1, first.stdout.str()
    first.stdout.fnmatch_lines(["*GATE FAILED*Maze*"])
    again = pytester.run(*args, "--lf", "--agentgym-run-id=again")
    out = again.stdout.str()
    assert "known failures not in selected tests" not in out
    again.stdout.fnmatch_lines([
        "*agentgym: --lf: Maze::gate[[]success_rate >= 0.9[]] failed last time; the gate is judged on every "
        "episode of Maze, so 3 episode(s) of suites/maze.yaml run again*",
    ])
    assert sorted((r["env"], r["task_index"]) for r in episodes(pytester, "again")) == [
        ("Maze", 0), ("Maze", 17), ("Maze", 18)]
    assert [g["env"] for g in run_json(pytester, "again")["gates"]] == ["Maze"]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_k_starts_no_server_for_an_environment_it_deselects(pytester, xdist):
    node = make_project(pytester)
    suite(pytester, "maze", MAZE + "gates: [success_rate >= 0.5]\n")
    suite(pytester, "babyai", BABYAI)
    result = run(pytester, "suites", "-k", "Maze and not 16", f"--agentgym-node={node}", "--agentgym-run-id=k",
                 *xdist)
    assert result.ret == 0, result.stdout.str()
    assert sorted(r["task_index"] for r in episodes(pytester, "k")) == [17, 18]
    logs = sorted(p.name.split("-")[0] for p in (pytester.path / "reports" / "k" / "logs").glob("*.log")
                  if not p.name.startswith(("harness", "reference", "worker")))
    assert logs == ["Maze"]  # no BabyAI server was started
    info = run_json(pytester, "k")
    assert info["counts"]["planned"] == 2
    assert [(g["env"], g["outcome"]) for g in info["gates"]] == [("Maze", "passed")]  # judged, not partial


def test_a_session_that_does_not_evaluate_hears_nothing_of_the_plugin(pytester):
    pytester.makepyfile(test_unrelated="def test_one():\n    assert 1 + 1 == 2\n")
    (pytester.path / "configs").mkdir()
    (pytester.path / "configs" / "ci.yml").write_text("jobs: {}\n")  # YAML that is not a suite
    for flags in ([], ["-n", "2"]):
        result = run(pytester, *flags)
        assert result.ret == 0, result.stdout.str()
        assert "agentgym" not in (result.stdout.str() + result.stderr.str()).replace("agentgym-0", "")
        assert not (pytester.path / "reports").exists()


def test_a_test_that_asks_for_the_fixture_wakes_the_plugin(pytester):
    pytester.makepyfile(test_api="""
        def test_maze(agentgym_episode):
            assert agentgym_episode("Maze", 18).success

        def test_plain():
            pass
    """)
    result = run(pytester, "--agentgym-run-id=woken")  # an option wakes it from the start
    assert result.ret == 0, result.stdout.str()
    plain = run(pytester, "test_api.py")  # no option, no suite: woken by the fixture
    assert plain.ret == 0, plain.stdout.str()
    plain.stdout.fnmatch_lines(["collected 2 items", "agentgym: node local*", "*2 passed*"])
    runs = [p for p in (pytester.path / "reports").iterdir()
            if p.is_dir() and not p.is_symlink() and p.name != "woken"]
    assert len(runs) == 1 and (runs[0] / "run.json").is_file()
    assert [r["env"] for r in episodes(pytester, runs[0].name)] == ["Maze"]


def test_the_fixture_under_xdist_without_a_named_run_is_a_clear_usage_error(pytester):
    pytester.makepyfile(test_api="def test_maze(agentgym_episode):\n    agentgym_episode('Maze', 18)\n")
    result = run(pytester, "-n", "1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != 0
    assert "--agentgym-node=local" in out and "asks for the agentgym_episode/agentgym_run fixture" in out
    assert not (pytester.path / "reports").exists()
