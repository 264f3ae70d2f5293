"""The fault matrix, run level: what a run records and concludes when it is killed,
interrupted, reused, resumed, or its episodes error. Every run is a real pytest
process with the real reference agent and embedded servers; kills are real signals.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from projects import episodes, make_project, run, suite

pytestmark = pytest.mark.faults

#: 25 Maze episodes + 15 Wordle episodes = 40.
FORTY = {"maze": "environment: Maze\ntasks: 0-24\n", "wordle": "environment: Wordle\ntasks: 0-14\n"}


def forty_episode_project(pytester: pytest.Pytester, latency_ms: int = 40) -> Path:
    node = make_project(pytester, latency_ms=latency_ms)
    for name, body in FORTY.items():
        suite(pytester, name, body)
    return node


def run_json(pytester: pytest.Pytester, run_id: str) -> dict:
    return json.loads((pytester.path / "reports" / run_id / "run.json").read_text())


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def start(pytester: pytest.Pytester, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_episodes(results: Path, count: int, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while lines(results) < count:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before {count} episodes:\n"
                                 + proc.stdout.read().decode())
        assert time.monotonic() < deadline, f"no {count} episodes within {timeout} s"
        time.sleep(0.05)  # polling a file with a deadline


def keys(records: list[dict]) -> list[tuple]:
    return [(r["env"], r["task_index"], r["repeat"]) for r in records]


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


# -- resume after a kill -----------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_resumes_with_exactly_the_missing_episodes(pytester, sig):
    node = forty_episode_project(pytester)
    results = pytester.path / "reports" / "killed" / "episodes.jsonl"
    proc = start(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=killed")
    wait_for_episodes(results, 15, proc)
    proc.send_signal(sig)
    output = proc.communicate(timeout=120)[0].decode()
    first = episodes(pytester, "killed")
    assert 15 <= len(first) < 40
    info = run_json(pytester, "killed")
    if sig == signal.SIGTERM:
        assert proc.returncode == 2, output  # pytest's "interrupted"
        assert info["status"] == "interrupted" and info["ended_at"], info
        assert "agentgym: run killed interrupted" in output
    else:
        assert info["status"] == "running" and info["ended_at"] is None
        # The next reader finds it crashed: its process is gone.
        shown = subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", "reports/killed"],
                               cwd=pytester.path, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert run_json(pytester, "killed")["status"] == "crashed"

    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/killed", "-q")
    assert resumed.ret == 0, resumed.stdout.str()
    records = episodes(pytester, "killed")
    generation_2 = [r for r in records if r["generation"] == 2]
    kept = {k for k, r in zip(keys(first), first) if r["error"] is None}
    everything = {("Maze", t, 1) for t in range(25)} | {("Wordle", t, 1) for t in range(15)}
    assert sorted(keys(generation_2)) == sorted(everything - kept)  # exactly the missing ones, once each
    assert set(keys(records)) == everything and len(records) == 40
    resumed.stdout.fnmatch_lines(["Maze * 25 *", "Wordle * 15 *", "*40 passed*",
                                  "agentgym: run killed finished (40 episodes, *kept)"])
    info = run_json(pytester, "killed")
    assert info["status"] == "finished" and info["generation"] == 2 and len(info["resumed_at"]) == 1
    assert info["counts"]["episodes"] == 40 and info["counts"]["kept"] == len(kept)


def test_resume_refuses_settings_that_change_what_an_episode_means(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base")
    assert first.ret == 0
    before = (pytester.path / "reports" / "base" / "run.json").read_bytes()
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=base",
                  "--agentgym-max-rounds=3", "--agentgym-model=random", "--agentgym-sampling=temperature=0.5")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*cannot resume run base*",
                                  "*- model: 'reference' then, 'random' now",
                                  "*- Maze max_rounds: 15 then, 3 now",
                                  "*- Maze sampling: {} then, {temperature: 0.5} now",
                                  "*restore them*"])
    assert (pytester.path / "reports" / "base" / "run.json").read_bytes() == before
    assert len(episodes(pytester, "base")) == 2


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_resume_reruns_errored_episodes_and_counts_each_once(pytester, xdist):
    node = make_project(pytester)
    # Games 25 and 26 exist in the node's view but the server refuses them: errors.
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-26'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 23-26\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=errs", "--agentgym-retries=0",
                *xdist)
    assert first.ret == 1
    assert run_json(pytester, "errs")["status"] == "finished-with-errors"
    second = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=latest", "--agentgym-retries=0",
                 *xdist)
    assert second.ret == 1
    records = episodes(pytester, "errs")
    assert sorted((r["task_index"], r["generation"]) for r in records) == [
        (23, 1), (24, 1), (25, 1), (25, 2), (26, 1), (26, 2)]  # the errored ones again, as generation 2
    second.stdout.fnmatch_lines(["Maze * 4 *"])  # four episodes counted, not six
    assert run_json(pytester, "errs")["counts"]["episodes"] == 4


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


@pytest.mark.parametrize("tasks, verdict", [("6-25", "PASSED"), ("7-25", "ERROR")],
                         ids=["one-error-in-20-fits-5%", "one-error-in-19-exceeds-5%"])
def test_an_environment_over_its_error_budget_has_its_gates_reported_as_errors(pytester, tasks, verdict):
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-25'}}}"))
    suite(pytester, "maze", f"environment: Maze\ntasks: {tasks}\ngates: [success_rate >= 0.85]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-retries=0")
    assert result.ret == 1  # game 25 (the goal) errors on the server either way
    result.stdout.fnmatch_lines([f"GATE {verdict}: Maze success_rate >= 0.85*"])
    if verdict == "ERROR":
        result.stdout.fnmatch_lines(["*only 18 of 19 episodes scored (1 error(s), 5.3% > error budget 5.0%)*"])


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

    from conftest import free_port
    from projects import REPO

    shutil.copytree(REPO / "suites" / "lightweight", pytester.path / "suites" / "lightweight")
    node = pytester.path / "field.yaml"
    node.write_text(FIELD_NODE.format(dead=free_port(), fallback=fallback, endpoint=endpoint))
    return node


def test_a_model_that_never_succeeds_fails_every_floor_gate_of_the_field_node(pytester):
    from model_faults import FakeEndpoint, ok

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
    sent = [seen.body for seen in ollama.chat_requests()]
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
    from projects import ConnectionCounter

    counter = ConnectionCounter()  # stands in for a model endpoint that accepts and hangs up
    try:
        suite_dir = pytester.path / "suites"
        suite_dir.mkdir()
        (suite_dir / "maze.yaml").write_text("environment: Maze\ntasks: 0-24\n")
        result = run(pytester, "suites", f"--agentgym-base-url=http://127.0.0.1:{counter.port}/v1",
                     "--agentgym-model=m", "--agentgym-run-id=noendpoint")
    finally:
        counter.close()
    assert result.ret == 1
    out = result.stdout.str()
    assert "pluggy/" not in out and "_pytest/" not in out and "Traceback" not in out
    assert len(result.outlines) < 25 * 6 + 60, len(result.outlines)  # a few lines per item
    result.stdout.fnmatch_lines(["*NO MODEL ENDPOINT, every episode will be an error*",
                                 "Maze[[]0]: model error NoEndpointAvailable:*", "  logs: *"])
    # One health probe decided it; no episode went on to knock at the door.
    assert counter.count <= 2, counter.count


def test_a_suite_whose_every_environment_the_node_skips_exits_5_and_says_why(pytester):
    from projects import copy_shipped_suite

    # the shipped suite of an environment the local node skips (it plays SQLGym and ALFWorld
    # since issue 13)
    copy_shipped_suite(pytester, "suites/moderate/webshop.yaml")
    result = run(pytester, "suites/moderate")
    assert result.ret == 5
    result.stdout.fnmatch_lines(["agentgym: node local skips WebShop (200 episode(s)): not collected. "
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
                from pytest_agentgym.plugin.stash import HARNESS_KEY
                harness = item.config.stash[HARNESS_KEY]
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


# -- a full disk ------------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(pytester):
    """``reports/`` on a 512 KiB tmpfs (needs root, as in CI); unmounted afterwards."""
    reports = pytester.path / "reports"
    reports.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(reports)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()}); this fault needs root")
    yield reports
    subprocess.run(["umount", "-l", str(reports)], check=False)


def test_a_full_disk_stops_the_run_cleanly_and_it_resumes_once_there_is_room(pytester, small_disk):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\nrepeat: 4\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=full")
    assert result.ret == 2, result.stdout.str()  # interrupted
    result.stdout.fnmatch_lines(["agentgym: RUN STOPPED: could not write *episodes.jsonl: "
                                 "No space left on device*--agentgym-resume=*full*"])
    info = run_json(pytester, "full")
    assert info["status"] == "interrupted" and info["ended_at"]
    results = small_disk / "full" / "episodes.jsonl"
    text = results.read_text()
    assert text.endswith("\n")
    kept = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert 0 < len(kept) < 100

    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=full")
    assert resumed.ret == 0, resumed.stdout.str()
    records = episodes(pytester, "full")
    assert len({(r["task_index"], r["repeat"]) for r in records}) == 100 == len(records)
    assert run_json(pytester, "full")["status"] == "finished"


def test_report_junit_and_nats_agree_on_an_unsolved_episode(pytester):
    import asyncio

    from model_faults import FakeEndpoint, ok
    from nats_server import NatsServer, Subscriber

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
    from test_report import index_of

    report = (pytester.path / "reports" / "agree" / "report.html").read_text()
    assert [row["o"] for row in index_of(report)] == ["unsolved", "unsolved"]
