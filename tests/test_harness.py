"""The harness as users meet it: suites collected as items, episodes run against
real embedded servers and the real reference agent, results on disk, gates,
failure messages, xdist, crashes and usage errors. Each test runs pytest in a
subprocess inside a fresh project directory."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import pytest

from projects import REPO, ConnectionCounter, episodes, make_project, run, suite


def test_collect_only_lists_exactly_the_selected_items_and_contacts_nothing(pytester):
    shutil.copytree(REPO / "suites" / "lightweight", pytester.path / "suites" / "lightweight")
    counter = ConnectionCounter()
    try:
        node = pytester.path / "attach.yaml"
        url = f"http://127.0.0.1:{counter.port}"
        node.write_text(
            "name: attach\n"
            f"model: {{endpoints: [{{kind: openai, url: '{url}/v1', model: m}}]}}\n"
            "envs:\n  servers: attach\n  overrides:\n"
            + "".join(f"    {e}: {{url: '{url}'}}\n" for e in ("BabyAI", "TextCraft", "Maze", "Wordle"))
        )
        result = run(pytester, "suites/lightweight", "--agentgym-envs=BabyAI", "--agentgym-tasks=0-4",
                     "--collect-only", "-q", f"--agentgym-node={node}")
    finally:
        counter.close()
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    listed = [line for line in result.outlines if "::" in line]
    assert listed == [f"suites/lightweight/babyai.yaml::BabyAI[{i}]" for i in range(5)]
    assert counter.count == 0
    assert not (pytester.path / "reports").exists()


def test_a_full_run_writes_results_and_passes_its_gates(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\ngates: [success_rate >= 0.75]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=full", "--no-header")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["suites/maze.yaml ..... *[[]100%[]]", "GATE PASSED: Maze success_rate >= 0.75*", "*5 passed*"])
    lines = episodes(pytester, "full")
    assert sorted(r["task_index"] for r in lines) == [0, 1, 2, 3]
    assert all(r["turns"] and r["model"] for r in lines)
    run_info = json.loads((pytester.path / "reports" / "full" / "run.json").read_text())
    assert run_info["status"] == "finished" and run_info["counts"]["episodes"] == 4
    assert (pytester.path / "reports" / "latest").resolve() == (pytester.path / "reports" / "full").resolve()


_STARTED_AT_COLLECTION = """
import pathlib

def pytest_collection_finish(session):
    logs = [p for p in pathlib.Path("reports").rglob("*.log") if "starting:" in p.read_text()]
    pathlib.Path("started-at-collection.txt").write_text("\\n".join(sorted(p.name for p in logs)))
"""


def test_the_servers_and_the_reference_agent_are_launched_before_collection(pytester):
    """The first episode waits for the slowest process, not their sum: both were started
    at configure time, so by the end of collection each has logged its start."""
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0\n")
    pytester.makeconftest(_STARTED_AT_COLLECTION)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=early", "-q")
    assert result.ret == 0, result.stdout.str()
    started = (pytester.path / "started-at-collection.txt").read_text().split()
    assert "reference-agent.log" in started
    assert [name for name in started if name.startswith("Maze-")], started


def test_a_run_of_other_tests_launches_nothing(pytester):
    """With the plugin installed, a run whose paths hold no suite starts no process, not
    even for the header's endpoint line."""
    node = make_project(pytester)
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "test_plain.py", f"--agentgym-node={node}", "--agentgym-run-id=plain")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["agentgym: model endpoint reference* (not contacted)"])
    assert not list(pytester.path.rglob("reference-agent.log"))


def test_a_gate_that_cannot_be_met_fails_the_run_and_is_named(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\ngates: [mean_reward >= 2]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--junitxml=junit.xml")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["GATE FAILED: Maze mean_reward >= 2*", "*1 failed, 2 passed*"])
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="gate[mean_reward &gt;= 2]"' in junit
    assert 'name="reward"' in junit and 'name="success"' in junit


def test_an_episode_below_min_reward_fails_with_reward_threshold_and_last_turns(pytester):
    node = make_project(pytester, policy="random")
    suite(pytester, "maze", "environment: Maze\ntasks: [0]\nmax_rounds: 3\nmin_reward: 1\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*Maze[[]0[]]: reward 0* < min_reward 1* (max_rounds after 3 round(s))",
        "*last 3 turn(s):",
        "*[[]0[]] reply:*",
        "*action: *",
    ])


def test_xdist_gives_the_same_reward_per_task_as_a_single_process(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-5\ngates: [success_rate >= 0.5]\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-5\n")
    suites = str(pytester.path / "suites")  # absolute: node ids must not depend on how paths are given
    single = run(pytester, suites, f"--agentgym-node={node}", "--agentgym-run-id=single",
                 "--junitxml=single.xml")
    assert single.ret == 0, single.stdout.str()
    parallel = run(pytester, suites, f"--agentgym-node={node}", "--agentgym-run-id=parallel", "-n", "2",
                   "--junitxml=parallel.xml")
    assert parallel.ret == 0, parallel.stdout.str()

    def gate_cases(report: str) -> list[str]:
        import re

        return re.findall(r'<testcase classname="[^"]*" name="gate\[[^"]*\]"', (pytester.path / report).read_text())

    assert gate_cases("single.xml") == gate_cases("parallel.xml") == [
        '<testcase classname="suites.maze.yaml.Maze" name="gate[success_rate &gt;= 0.5]"']

    def rewards(run_id: str) -> dict:
        return {(r["env"], r["task_index"]): r["reward"] for r in episodes(pytester, run_id)}

    assert len(rewards("single")) == 12
    assert rewards("parallel") == rewards("single")


def test_sigkill_midway_keeps_every_finished_episode_whole(pytester):
    node = make_project(pytester, latency_ms=150)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    results = pytester.path / "reports" / "killed" / "episodes.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
         f"--agentgym-node={node}", "--agentgym-run-id=killed"],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: results.exists() and results.read_text().count("\n") >= 3, proc, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    text = results.read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert 3 <= len(records) < 25
    assert all(r["env"] == "Maze" and r["reward"] is not None for r in records)


def _wait_for(condition, proc: subprocess.Popen, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"pytest ended (exit {proc.returncode}) before the condition held")
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)  # polling a file for a condition, with a deadline


@pytest.mark.parametrize(
    "body, expected",
    [
        ("environment: Maze\ntasks: [0, 1\n", ["*suites/bad.yaml: not valid YAML*"]),
        ("environment: Mazzze\ntasks: 0-1\n", ["*suites/bad.yaml: environment 'Mazzze' is unknown; known: *Maze*"]),
        ("environment: Maze\ntasks: 5-1\n", ["*suites/bad.yaml: tasks: task range '5-1' runs backwards*"]),
        ("environment: Maze\ntasks: 0-1\ngates: [median >= 1]\n", ["*suites/bad.yaml: gates: gate 'median >= 1' is not of the form*"]),
        ("environment: Maze\ntasks: 0-1\nrepeats: 2\n", ["*suites/bad.yaml: unknown key(s) repeats; known:*repeat*"]),
    ],
)
def test_bad_suite_files_are_usage_errors_naming_file_and_fix(pytester, body, expected):
    node = make_project(pytester)
    suite(pytester, "bad", body)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(expected)


def test_unknown_node_is_a_usage_error_listing_known_nodes(pytester):
    make_project(pytester)
    result = run(pytester, "suites", "--agentgym-node=laptop")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-node=laptop: unknown node; known nodes: *4090*gpu*local*"])


def test_unknown_environment_option_is_a_usage_error(pytester):
    node = make_project(pytester)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-envs=Chess")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-envs: unknown environment(s) Chess; known: *BabyAI*"])


def test_bad_option_value_names_the_option(pytester):
    node = make_project(pytester)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-tasks=a-b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-tasks: task spec 'a-b' is not an index*"])


def test_bad_environment_variable_names_the_variable(pytester, monkeypatch):
    node = make_project(pytester)
    monkeypatch.setenv("AGENTGYM_CONCURRENCY", "zero")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable AGENTGYM_CONCURRENCY: expected a whole number, got 'zero'*"])


def test_python_api_plays_episodes_with_the_tests_own_assertions(pytester):
    node = make_project(pytester)
    pytester.makepyfile(test_api="""
        def test_one_step_from_the_goal(agentgym_episode):
            record = agentgym_episode("Maze", 18)
            assert record.success and record.rounds == 1

        def test_an_assertion_of_the_users_own(agentgym_episode):
            record = agentgym_episode("Wordle", 3, max_rounds=1)
            assert record.rounds == 2, f"rounds were {record.rounds}"
    """)
    result = run(pytester, "test_api.py", f"--agentgym-node={node}", "--agentgym-run-id=api")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*rounds were 1*", "*1 failed, 1 passed*"])
    recorded = {(r["env"], r["task_index"]) for r in episodes(pytester, "api")}
    assert recorded == {("Maze", 18), ("Wordle", 3)}
