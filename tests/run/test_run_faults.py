"""The fault matrix, run level: what a run records and concludes when it is killed,
interrupted or reused, or its episodes error (resuming such a run: test_resume.py).
Every run is a real pytest process with the real reference agent and embedded servers;
kills are real signals.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.projects import episodes, make_project, run, run_json, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]


# -- one run id, one run ------------------------------------------------------------------


def test_reusing_a_run_id_is_a_usage_error_and_the_first_run_is_untouched(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-2\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=once")
    assert first.ret == 0, first.stdout.str()
    results = pytester.path / "reports" / "once" / "episodes.jsonl"
    before = results.read_bytes()
    again = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=once")
    assert again.ret == 4
    again.stderr.fnmatch_lines(["*run id 'once' is taken*3 episode(s), status finished*"
                                "--agentgym-resume=*once*--agentgym-run-id*"])
    assert results.read_bytes() == before
    assert run_json(pytester, "once")["status"] == "finished"


# -- status ------------------------------------------------------------------------------------


def test_a_run_whose_every_episode_errored_is_no_episode_scored(pytester):
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-30'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 26-27\ngates: [success_rate >= 0.5]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=none", "--agentgym-retries=0")
    assert result.ret == 1
    info = run_json(pytester, "none")
    assert info["status"] == "no-episode-scored" and info["counts"]["errors"] == 2
    assert result.outlines[-1] == "agentgym: run none no-episode-scored (2 episodes, 2 errors)"
    result.stdout.fnmatch_lines(["GATE ERROR: Maze success_rate >= 0.5: only 0 of 2 episodes scored*"])
    assert "GATE PASSED" not in result.stdout.str()


# -- errors count in gates -------------------------------------------------------------------------


@pytest.mark.parametrize("budget, verdict", [("", "PASSED"), ("max_error_rate: 0\n", "ERROR")],
                         ids=["one-error-in-20-fits-5%", "one-error-in-20-exceeds-0%"])
def test_an_environment_over_its_error_budget_has_its_gates_reported_as_errors(pytester, budget, verdict):
    """At the default 5% per episode the budget allows 4 errors of 20 (results/error_budget.py);
    at 0 none."""
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-25'}}}"))
    suite(pytester, "maze", f"environment: Maze\ntasks: 6-25\ngates: [success_rate >= 0.85]\n{budget}")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-retries=0")
    assert result.ret == 1  # game 25 (the goal) errors on the server either way
    result.stdout.fnmatch_lines([f"GATE {verdict}: Maze success_rate >= 0.85*"])
    if verdict == "ERROR":
        result.stdout.fnmatch_lines(["*only 19 of 20 episodes scored (1 error(s), 5.0%): more than an error rate "
                                     "of 0.0% per episode (the error budget) leaves in 99% of runs (at most 0 of 20)*"])


# -- quality is asserted -------------------------------------------------------------------------------


FIELD_NODE = """\
# configs/nodes/4090.yaml with its endpoints moved to this machine: the TensorZero
# gateway is down; the fallback is {fallback}.
name: 4090
model:
  endpoints:
    - {{kind: tensorzero, url: 'http://127.0.0.1:{dead}', model_name: qwen35_9b}}
    - {endpoint}
  sampling: {{temperature: 0.7, max_tokens: 1024}}
  request_timeout: 120
  retries: 3
limits: {{max_rounds: 15, episode_timeout: 300, concurrency: 1}}
nats: {{url: null}}
envs: {{skip: [WebArena, SciWorld], servers: spawn}}
"""


def field_project(pytester: pytest.Pytester, fallback: str, endpoint: str) -> Path:
    import shutil

    from pytest_agentgym.process.managed import free_port
    from helpers.projects import REPO

    shutil.copytree(REPO / "suites" / "lightweight", pytester.path / "suites" / "lightweight")
    node = pytester.path / "field.yaml"
    node.write_text(FIELD_NODE.format(dead=free_port(), fallback=fallback, endpoint=endpoint))
    return node


def test_a_model_that_never_succeeds_fails_every_floor_gate_of_the_field_node(pytester):
    from helpers.model_faults import FakeEndpoint, ok

    # Ollama's shape (the 4090 node's fallback), answering with no usable action.
    with FakeEndpoint(script=[ok("Thought:\nI am not sure.\n\nAction:\nwait")]) as ollama:
        node = field_project(pytester, "a model that never acts (Ollama's routes)",
                             f"{{kind: ollama, url: '{ollama.url}', model: 'qwen3:8b'}}")
        result = run(pytester, "suites/lightweight", f"--agentgym-node={node}", "--agentgym-run-id=zero",
                     "--agentgym-tasks=0-4", "--agentgym-concurrency=4", "--junitxml=junit.xml", timeout=600)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*using fallback ollama qwen3:8b*",
                                 "*sampling max_tokens=1024, temperature=0.7*",
                                 "GATE FAILED: BabyAI success_rate >= 0.45: success_rate = 0.000*",
                                 "GATE FAILED: Maze success_rate >= 0.04: success_rate = 0.000*",
                                 "GATE FAILED: TextCraft success_rate >= 0.1: success_rate = 0.000*",
                                 "GATE FAILED: Wordle success_rate >= 0.04: success_rate = 0.000*",
                                 "=* 4 failed, 20 unsolved in *=",
                                 "agentgym: run zero finished (20 episodes)"])
    records = episodes(pytester, "zero")
    assert len(records) == 20 and {r["outcome"] for r in records} == {"unsolved"}
    # the node's temperature and max_tokens over the shipped suites' top_p 1 (AgentGym's)
    assert all(r["sampling"] == {"temperature": 0.7, "top_p": 1, "max_tokens": 1024} for r in records)
    sent = [seen.body for seen in ollama.chat_requests()][1:]  # after the one-token chat that proves the route
    assert len(sent) >= 20
    assert {(b["temperature"], b["top_p"], b["max_tokens"]) for b in sent} == {(0.7, 1, 1024)}
    junit = (pytester.path / "junit.xml").read_text()
    assert junit.count('<skipped type="pytest.xfail"') == 20 and junit.count("<failure") == 4
    outbox_free = pytester.path / "reports" / "zero"
    report = (outbox_free / "report.html").read_text()
    assert "unsolved" in report


@pytest.fixture(scope="module")
def random_agent(tmp_path_factory):
    """The reference agent's random policy as a real server. Module-scoped on purpose:
    started outside pytester, whose sys.modules snapshot would drop the HTTP modules
    first imported here and leave httpx unable to map httpcore's errors afterwards."""
    from pytest_agentgym.process.health import HEALTH_ENDPOINT
    from pytest_agentgym.process.managed import ManagedServer

    agent = ManagedServer("reference agent", command=["{python}", "-m", "pytest_agentgym", "reference-agent",
                                                      "--host", "{host}", "--port", "{port}", "--policy", "random"],
                          log_path=tmp_path_factory.mktemp("agent") / "agent.log", health=HEALTH_ENDPOINT,
                          label="reference agent").start()
    yield agent
    agent.stop()


def test_the_random_policy_on_the_field_node_fails_the_babyai_floor(pytester, random_agent):
    node = field_project(pytester, "the reference agent's random policy",
                         f"{{kind: openai, url: '{random_agent.url}/v1', model: random}}")
    result = run(pytester, "suites/lightweight", f"--agentgym-node={node}", "--agentgym-run-id=random",
                 "--agentgym-envs=BabyAI", "--agentgym-concurrency=8", timeout=600)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*using fallback openai random*",
                                 "GATE FAILED: BabyAI success_rate >= 0.45: success_rate = 0.2*"])
    records = episodes(pytester, "random")
    assert len(records) == 90
    assert {r["outcome"] for r in records if not r["success"]} == {"unsolved"}
    assert {r["outcome"] for r in records if r["success"]} == {"passed"}
    assert "no quality assertion" not in result.stdout.str()


def test_a_run_without_gates_or_min_reward_says_exit_0_is_no_quality_verdict(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["agentgym: no quality assertion: exit 0 means the run completed, "
                                 "not that the model is good*"])
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\nmin_reward: 1\n")
    asserted = run(pytester, "suites", f"--agentgym-node={node}")
    assert asserted.ret == 0 and "no quality assertion" not in asserted.stdout.str()


# -- what the user sees ----------------------------------------------------------------------------------


def test_infrastructure_errors_are_a_few_lines_each_and_no_endpoint_is_tried_once(pytester):
    from helpers.projects import ConnectionCounter

    counter = ConnectionCounter()  # stands in for a model endpoint that accepts and hangs up
    try:
        suite_dir = pytester.path / "suites"
        suite_dir.mkdir()
        (suite_dir / "maze.yaml").write_text("environment: Maze\ntasks: 0-24\n")
        result = run(pytester, "suites", f"--agentgym-base-url=http://127.0.0.1:{counter.port}/v1",
                     "--agentgym-model=m", "--agentgym-run-id=noendpoint")
    finally:
        counter.close()
    assert result.ret == 3  # infrastructure
    out = result.stdout.str()
    assert "pluggy/" not in out and "_pytest/" not in out and "Traceback" not in out
    assert len(result.outlines) < 40, len(result.outlines)  # said once, not once per item
    result.stdout.fnmatch_lines(["*NO MODEL ENDPOINT, every episode will be an error*",
                                 "agentgym: NOT PLAYED: Maze: no model endpoint: *", "*26 skipped*"])
    # One health probe decided it; no episode went on to knock at the door.
    assert counter.count <= 2, counter.count


def test_a_suite_whose_every_environment_the_node_skips_exits_5_and_says_why(pytester):
    from helpers.projects import copy_shipped_suite

    # the shipped suite of an environment the local node skips (it plays SQLGym and ALFWorld
    # since issue 13, WebShop since issue 28)
    copy_shipped_suite(pytester, "suites/moderate/sciworld.yaml")
    result = run(pytester, "suites/moderate")
    assert result.ret == 5
    result.stdout.fnmatch_lines(["agentgym: node local skips SciWorld (* episode(s)): not collected. "
                                 "Run them on a node*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("env, tasks, shown", [("Maze", "20-30", "25, 26, 27, 28, 29, 30"),
                                               ("TextCraft", "540-545", "544, 545")])
def test_task_indices_out_of_range_are_a_usage_error_at_collection(pytester, env, tasks, shown):
    node = make_project(pytester)
    suite(pytester, "s", f"environment: {env}\ntasks: {tasks}\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=range")
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*{env} has no task(s) {shown}: its task indices are 0-*"])
    run_dir = pytester.path / "reports" / "range"  # only the endpoint's log, from the header's probe
    assert not (run_dir / "episodes.jsonl").exists() and not (run_dir / "run.json").exists()


def test_the_same_episode_in_two_suites_is_a_usage_error(pytester):
    node = make_project(pytester)
    suite(pytester, "a", "environment: Maze\ntasks: 0-2\n")
    suite(pytester, "b", "environment: Maze\ntasks: 2-3\n")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*suites/b.yaml::Maze[[]2] and suites/a.yaml::Maze[[]2] are the same episode*"])


# -- xdist workers --------------------------------------------------------------------------------------


def test_a_worker_killed_mid_episode_leaves_an_error_record(pytester):
    node = make_project(pytester, latency_ms=300)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    # The worker that gets Maze[2] kills itself once that episode is in flight (its
    # first model request has been answered: a turn exists in the engine's episode).
    pytester.makeconftest("""
        import os, signal, threading, time

        def pytest_runtest_setup(item):
            if item.name != "Maze[2]" or not hasattr(item.config, "workerinput"):
                return
            def kill_when_in_flight():
                from pytest_agentgym.plugin.stash import RUN_KEY
                harness = item.config.stash[RUN_KEY]
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    engine = harness.resources.engine
                    if engine is not None and engine.in_flight():
                        os.kill(os.getpid(), signal.SIGKILL)
                    time.sleep(0.01)
            threading.Thread(target=kill_when_in_flight, daemon=True).start()
    """)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=crash", "-n", "2")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*Maze[[]2]: harness error WorkerCrashed: worker 'gw*' crashed while running*"])
    records = episodes(pytester, "crash")
    by_task = Counter(r["task_index"] for r in records)
    crashed = [r for r in records if r["task_index"] == 2]
    assert crashed and crashed[-1]["error"]["type"] == "WorkerCrashed"
    assert crashed[-1]["error"]["where"] == "harness"
    assert set(by_task) == {0, 1, 2, 3}


def test_report_junit_and_nats_agree_on_an_unsolved_episode(pytester):
    import asyncio

    from helpers.model_faults import FakeEndpoint, ok
    from helpers.nats_server import NatsServer, Subscriber

    server = NatsServer(pytester.path / "nats")
    node = make_project(pytester)
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}", f"envs: {{servers: spawn}}\nnats: {{url: '{server.url}'}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")

    async def play() -> list:
        async with Subscriber(server.url) as subscriber:
            with FakeEndpoint(script=[ok("Thought:\nno idea\n\nAction:\nwait")]) as fake:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", f"--agentgym-node={node}",
                    f"--agentgym-base-url={fake.base_url}", "--agentgym-model=fake-model",
                    "--agentgym-run-id=agree", "--junitxml=junit.xml", cwd=pytester.path,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
                output, _ = await proc.communicate()
            await subscriber.settle()
            assert proc.returncode == 0, output.decode()  # unsolved is not a failure of the run
            return list(subscriber.received)

    try:
        received = asyncio.run(play())
    finally:
        server.stop()
    outcomes = sorted(p["outcome"] for s, _, p in received if s == "agentgym.episode.completed.v1")
    assert outcomes == ["unsolved", "unsolved"]
    (status,) = [p for s, _, p in received if s == "agentgym.field.status.v1" and p["status"] != "started"]
    assert status["status"] == "finished" and status["counts"]["unsolved"] == 2 and status["counts"]["passed"] == 0
    assert [r["outcome"] for r in episodes(pytester, "agree")] == ["unsolved", "unsolved"]
    assert (pytester.path / "junit.xml").read_text().count('<skipped type="pytest.xfail" message="unsolved') == 2
    from helpers.report_pages import index_of

    report = (pytester.path / "reports" / "agree" / "report.html").read_text()
    assert [row["o"] for row in index_of(report)] == ["unsolved", "unsolved"]


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
        wait_until(lambda: written_lines(results) >= 3, 120, "3 episodes recorded", procs=(proc,))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    text = results.read_text()
    assert text.endswith("\n")
    records = [json.loads(line) for line in text.splitlines()]
    assert 3 <= len(records) < 25
    assert all(r["env"] == "Maze" and r["reward"] is not None for r in records)


def test_an_environment_server_that_cannot_be_had_makes_each_episode_an_error(pytester):
    node = make_project(pytester)
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}",
        "envs: {servers: attach, overrides: {Maze: {url: 'http://127.0.0.1:9', startup_timeout: 2}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: [0, 1]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=down")
    assert result.ret == 3  # infrastructure
    result.stdout.fnmatch_lines(["agentgym: NOT PLAYED: Maze: the server of Maze could not be had: environment server "
                                 "Maze at http://127.0.0.1:9*",
                                 "GATE NOT JUDGED: Maze error_rate <= 0.05: none of Maze's episodes could be played*",
                                 "*3 skipped in*", "agentgym: run down no-episode-scored (2 episodes, 2 errors)"])
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
