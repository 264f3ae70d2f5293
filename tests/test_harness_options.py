"""More of what users meet: extending the plugin, replacing a prompt, the fallback
endpoint in the header, preflight and list-envs, --lf, and infrastructure errors
(which are retried, recorded, and reported as errors rather than failures)."""

from __future__ import annotations

import json
import sys

from projects import episodes, make_project, run, suite


def test_a_conftest_adds_an_environment_through_the_hook(pytester):
    node = make_project(pytester)
    pytester.makeconftest("""
        from pytest_agentgym.envs import register
        from pytest_agentgym.envs.maze import MazeAdapter
        from pytest_agentgym.envs.spec import EnvSpec

        @register
        class MirrorMazeAdapter(MazeAdapter):
            name = "MirrorMaze"

        def pytest_agentgym_add_environments(config, specs):
            specs["MirrorMaze"] = EnvSpec(name="MirrorMaze", category="lightweight", port=36999,
                                          path_prefix="/maze", max_rounds=15, embedded="lmrlgym")
    """)
    suite(pytester, "mirror", "environment: MirrorMaze\ntasks: [17, 18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=hooked")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*MirrorMaze*2*1.000*100%*"])
    assert {(r["env"], r["success"]) for r in episodes(pytester, "hooked")} == {("MirrorMaze", True)}


def test_a_node_can_replace_an_environments_prompt(pytester):
    node = make_project(pytester)
    template = pytester.path / "maze-prompt.j2"
    template.write_text("HOUSE RULES: reach the goal. Answer with 'Action: move <direction>'.\n")
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}", f"envs: {{servers: spawn, overrides: {{Maze: {{prompt_template: '{template}'}}}}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: [18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=prompted")
    assert result.ret == 0, result.stdout.str()
    (record,) = episodes(pytester, "prompted")
    assert record["turns"][0]["observation"].startswith("HOUSE RULES: reach the goal.")


def test_the_header_says_when_the_fallback_endpoint_is_used(pytester):
    make_project(pytester)
    node = pytester.path / "fallback.yaml"
    node.write_text(
        "name: fallback\n"
        "model:\n  endpoints:\n"
        "    - {kind: openai, url: 'http://127.0.0.1:9/v1', model: primary-model}\n"
        "    - {kind: reference}\n"
        "envs: {servers: spawn}\n"
    )
    suite(pytester, "maze", "environment: Maze\ntasks: [18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=fallback")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "agentgym: model reference via reference at http://127.0.0.1:*",
        "agentgym: endpoint: primary openai at http://127.0.0.1:9/v1 unhealthy (*",
        "agentgym: endpoint: using fallback reference*",
    ])
    info = json.loads((pytester.path / "reports" / "fallback" / "run.json").read_text())
    assert any("using fallback" in note for note in info["notes"])


def test_preflight_and_list_envs_check_without_running_an_episode(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "agentgym preflight: node testnode*",
        "  model primary: reference*: launchable*",
        "  would use: primary reference*",
        "  env Maze: http://127.0.0.1:<free-port>/maze: spawnable*",  # servers: spawn
        "preflight: ready",
    ])
    listed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-list-envs")
    assert listed.ret == 0
    listed.stdout.fnmatch_lines(["ENVIRONMENT*CATEGORY*URL*HEALTH*", "BabyAI*lightweight*<free-port>*spawnable*",
                                 "*SciWorld*heavy*"])
    assert not (pytester.path / "reports").exists()


def test_preflight_names_a_suite_that_would_not_load(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    suite(pytester, "broken", "environment: Maze\ntasks: [0, 1\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["  suite *suites/broken.yaml: not valid YAML*", "preflight: 1 problem(s)"])


def test_preflight_fails_when_nothing_can_serve_the_model(pytester):
    make_project(pytester)
    node = pytester.path / "down.yaml"
    node.write_text("name: down\nmodel: {endpoints: [{kind: openai, url: 'http://127.0.0.1:9/v1', model: m}]}\n")
    result = run(pytester, "--agentgym-node=" + str(node), "--agentgym-preflight")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["  model primary: openai m at http://127.0.0.1:9/v1: unhealthy: *",
                                 "  would use: nothing*", "preflight: * problem(s)"])


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


def test_an_environment_server_that_cannot_be_had_makes_each_episode_an_error(pytester):
    node = make_project(pytester)
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}",
        "envs: {servers: attach, overrides: {Maze: {url: 'http://127.0.0.1:9', startup_timeout: 2}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: [0, 1]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=down")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["Maze[[]0]: env error ServerStartError: environment server Maze at http://127.0.0.1:9*",
                                 "GATE ERROR: Maze error_rate <= 0.05: only 0 of 2 episodes scored*",
                                 "*3 errors in*", "agentgym: run down no-episode-scored (2 episodes, 2 errors)"])
    records = episodes(pytester, "down")
    assert [(r["task_index"], r["outcome"], r["reward"], r["error"]["where"]) for r in records] == [
        (0, "error", None, "env"), (1, "error", None, "env")]


def test_a_server_killed_mid_run_is_restarted_and_the_episode_retried(pytester):
    import psutil
    import subprocess
    import time

    node = make_project(pytester, latency_ms=80)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-5\n")
    logs = pytester.path / "reports" / "killed" / "logs"
    results = pytester.path / "reports" / "killed" / "episodes.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-node={node}", "--agentgym-run-id=killed"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (results.exists() and results.read_text().count("\n") >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, "no episode finished"
        time.sleep(0.05)  # polling a file with a deadline
    (log,) = logs.glob("Maze-*.log")
    port = int(log.stem.split("-")[1])
    (server,) = [c.pid for c in psutil.net_connections("tcp") if c.laddr.port == port and c.status == "LISTEN"]
    psutil.Process(server).kill()
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output.decode()
    records = episodes(pytester, "killed")
    assert sorted(r["task_index"] for r in records) == list(range(6))
    assert all(r["success"] for r in records)
    retried = [r for r in records if r["retried"]]
    assert retried, "no episode saw the server die"
    assert {e["type"] for r in retried for e in r["retried"]} <= {"EnvUnreachable", "EnvErrorResponse"}
