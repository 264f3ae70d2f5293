"""A run as users meet it through pytest: suites collected as items, episodes played
against real embedded servers and the real reference agent, results on disk, gates and
failure messages, --lf, and the Python API for a test's own assertions. Each test runs
pytest in a subprocess inside a fresh project directory."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from helpers.projects import REPO, ConnectionCounter, episodes, make_project, run, suite

pytestmark = pytest.mark.heavy


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


def test_last_failed_reruns_only_the_failed_episodes(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: [0, 17, 18]\nmax_rounds: 2\nmin_reward: 1\n")
    args = ["-p", "cacheprovider", "suites", f"--agentgym-node={node}"]
    first = pytester.run(sys.executable, "-m", "pytest", *args, "--agentgym-run-id=first")
    assert first.ret == 1
    first.stdout.fnmatch_lines(["*1 failed, 2 passed*"])  # 12 moves from game 0 do not fit in 2 rounds
    again = pytester.run(sys.executable, "-m", "pytest", *args, "--lf", "--agentgym-run-id=again")
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*", "*1 failed in*"])
    assert [r["task_index"] for r in episodes(pytester, "again")] == [0]
