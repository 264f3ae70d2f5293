"""AgentBench task servers as environments: the protocol client and the AgentBench
adapters against tests/helpers/agentbench_server.py (a controller and task workers, real
processes on loopback), and whole runs through pytest with the reference agent
playing the test tasks (tests/helpers/agentbench_policy.py).

Expected rewards, statuses and texts come from the test server's fixed games and
rules (tests/helpers/agentbench_tasks.py), worked out by hand, not from the code under test.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal

import httpx
import pytest
from helpers import TESTS, pythonpath
from helpers.agentbench_play import play as play_sample
from helpers.agentbench_server import command
from helpers.projects import episodes, make_project, run, suite

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvBadResponse, EnvHTTPError, EnvUnreachable
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.integrations.agentbench.protocol import AgentBenchClient
from pytest_agentgym.process.managed import ManagedServer, free_port

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A controller with one alfworld-std and one webshop-std worker; game 5 raises."""
    with ManagedServer("AgentBench", command=command("--raise-at", "5", "--max-step", "6"),
                       port=free_port(), startup_timeout=60,
                       log_path=tmp_path_factory.mktemp("logs") / "agentbench.log") as server:
        yield server


def spec(name: str, **options):
    base = load_default_specs()[name]
    return base.with_overrides(options={**base.options, **options}, request_timeout=30)


async def play(url: str, env: str, index: int, replies: list[str], **options):
    """Open sample ``index`` and send each reply while it runs; (opening, results, running)."""
    return await play_sample(spec(env, **options), url, index, replies)


def sessions(url: str) -> dict:
    return httpx.get(url + "/api/list_sessions", timeout=10).json()


# -- ALFWorld-shaped ---------------------------------------------------------------------


def test_alfworld_sample_is_played_turn_by_turn_and_won(stack):
    opening, results, _ = asyncio.run(play(stack.url, "AgentBench-ALFWorld", 0, [
        "THOUGHT: the apple is on the counter.\nACTION: go to countertop 1",
        "ACTION: take apple 1 from countertop 1",
        "ACTION: go to fridge 1",
        "ACTION: put apple 1 in/on fridge 1",
    ]))
    roles = [m["role"] for m in opening.messages]
    assert roles[:2] == ["user", "assistant"] and roles[-1] == "user"
    assert len(opening.messages) == 11  # instructions, ack, 4 example pairs, the task
    assert opening.first_observation.startswith("Here is your task.")
    assert "Your task is to: put a apple in fridge 1." in opening.first_observation
    assert "AVAILABLE ACTIONS: go to cabinet 1" in opening.first_observation
    assert [(r.reward, r.done) for r in results] == [(0.0, False)] * 3 + [(1.0, True)]
    first = results[0]
    assert first.observation.startswith("You arrive at countertop 1. On the countertop 1, you see a apple 1.")
    # the task rewrote the turn before the reply: its AVAILABLE ACTIONS are gone
    assert first.conversation[10]["content"].rstrip().endswith("put a apple in fridge 1.")
    assert first.conversation[11] == {"role": "assistant",
                                      "content": "THOUGHT: the apple is on the counter.\nACTION: go to countertop 1"}
    assert results[-1].observation.startswith("You put the apple 1 in/on the fridge 1.")
    assert results[-1].observation.endswith("[AgentBench: sample completed]")
    assert results[-1].conversation is None


def test_a_reply_without_action_ends_the_sample_with_reward_zero(stack):
    _, results, running = asyncio.run(play(stack.url, "AgentBench-ALFWorld", 1, ["I would rather not."]))
    assert [(r.reward, r.done) for r in results] == [(0.0, True)]
    assert results[0].observation == "[AgentBench: sample agent invalid action]"
    assert running == set()  # finished: nothing to cancel
    assert sessions(stack.url) == {}


def test_the_task_limit_ends_a_sample_and_an_unfinished_one_is_cancelled(stack):
    wander = [f"ACTION: go to {place}" for place in ("desk 1", "shelf 1", "cabinet 1")] * 2
    _, results, _ = asyncio.run(play(stack.url, "AgentBench-ALFWorld", 2, wander))
    assert len(results) == 6 and results[-1].done and results[-1].reward == 0.0
    assert results[-1].observation.endswith("[AgentBench: sample task limit reached]")
    _, partial, running = asyncio.run(play(stack.url, "AgentBench-ALFWorld", 3, ["ACTION: go to fridge 1"]))
    assert not partial[0].done and len(running) == 1
    assert sessions(stack.url) == {}  # close() sent /cancel for the running one


def test_a_worker_can_be_driven_without_the_controller(stack):
    workers = httpx.get(stack.url + "/api/list_workers", timeout=10).json()
    worker = workers["webshop-std"]["workers"]["0"]["address"].removesuffix("/api")
    _, results, _ = asyncio.run(play(worker, "AgentBench-WebShop", 2, [
        "Thought:\nsearch\n\nAction:\nsearch[led desk lamp]",
        "Action: click[b0lamp0004]",
        "Action: click[buy now]",
    ], target="worker"))
    assert [(r.reward, r.done) for r in results] == [(0.0, False), (0.0, False), (1.0, True)]


def test_the_task_indices_from_the_controller_and_from_a_worker(stack):
    async def indices(url, task, target):
        async with AgentBenchClient(url + "/api", env="AgentBench", task=task, target=target) as client:
            return await client.indices()

    assert asyncio.run(indices(stack.url, "alfworld-std", "controller")) == [0, 1, 2, 3, 4, 5]
    worker = httpx.get(stack.url + "/api/list_workers", timeout=10).json()["webshop-std"]["workers"]["0"]
    assert asyncio.run(indices(worker["address"].removesuffix("/api"), "webshop-std", "worker")) == [0, 1, 2]
    with pytest.raises(EnvHTTPError, match="Task does not exist"):
        asyncio.run(indices(stack.url, "nope", "controller"))


def test_webshop_partial_reward_is_the_tasks_reward(stack):
    _, results, _ = asyncio.run(play(stack.url, "AgentBench-WebShop", 0, [
        "Action:\nsearch[red cotton t-shirt]", "Action:\nclick[b0shirt001]", "Action:\nclick[small]",
        "Action:\nclick[buy now]"]))
    assert [r.reward for r in results] == [0.0, 0.0, 0.0, 0.5] and results[-1].done


# -- errors --------------------------------------------------------------------------------


@pytest.mark.faults
def test_unknown_task_index_out_of_bounds_and_task_error_are_typed_errors(stack):
    with pytest.raises(EnvHTTPError) as unknown:
        asyncio.run(play(stack.url, "AgentBench-ALFWorld", 0, [], task="alfworld-nope"))
    assert unknown.value.status_code == 406
    assert "task alfworld-nope (controller)" in str(unknown.value)
    assert "Task does not exist" in str(unknown.value) and "list_workers" in str(unknown.value)
    with pytest.raises(EnvHTTPError) as bounds:
        asyncio.run(play(stack.url, "AgentBench-ALFWorld", 40, []))
    assert bounds.value.status_code == 400 and "Index out of bounds" in str(bounds.value)
    with pytest.raises(EnvHTTPError) as raised:
        asyncio.run(play(stack.url, "AgentBench-ALFWorld", 5, ["ACTION: look"]))
    assert raised.value.status_code == 501 and "raised (--raise-at)" in str(raised.value)
    assert sessions(stack.url) == {}


@pytest.mark.faults
def test_a_killed_task_server_is_an_unreachable_environment(tmp_path):
    server = ManagedServer("AgentBench", command=command("--tasks", "webshop-std"), port=free_port(),
                           startup_timeout=60, log_path=tmp_path / "agentbench.log").start()

    async def go():
        adapter = adapter_class("AgentBench-WebShop")()
        async with adapter.make_client(spec("AgentBench-WebShop"), server.url) as client:
            opening = await adapter.open(client, 0)
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=30)
            await client.step(opening.env_id, "Action:\nsearch[mug]")

    try:
        with pytest.raises(EnvUnreachable, match="cannot connect|connection was dropped"):
            asyncio.run(go())
    finally:
        server.stop()


@pytest.mark.faults
def test_a_finished_sample_with_status_task_error_is_the_servers_failure():
    adapter = adapter_class("AgentBench-ALFWorld")()
    with pytest.raises(ValueError, match="status 'task error'"):
        adapter.read_step({"index": 0, "status": "task error", "result": "Traceback ...", "history": []})
    with pytest.raises(ValueError, match="no 'result' field"):
        adapter.read_step({"index": 0, "status": "completed", "result": {"log": []}, "history": []})


def test_bad_options_and_a_prompt_template_are_refused_with_the_fix():
    adapter = adapter_class("AgentBench-WebShop")()
    with pytest.raises(ValueError, match="unknown options colour; AgentBench environments take task, target"):
        adapter.make_client(spec("AgentBench-WebShop", colour="red"), "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="options.target is 'broker'; use 'controller'"):
        adapter.make_client(spec("AgentBench-WebShop", target="broker"), "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="remove envs.AgentBench-WebShop.prompt_template"):
        adapter_class("AgentBench-WebShop")("my.j2")


def test_an_answer_of_the_wrong_shape_is_a_bad_response():
    def handler(request):
        return httpx.Response(200, json={"session": 1, "output": "running"})

    async def go():
        client = AgentBenchClient("http://127.0.0.1:9/api", env="AgentBench-ALFWorld", task="alfworld-std",
                                  transport=httpx.MockTransport(handler))
        async with client:
            await client.start_sample(0)

    with pytest.raises(EnvBadResponse, match='expected {"session_id": <int>, "output"'):
        asyncio.run(go())


# -- whole runs through pytest ----------------------------------------------------------------


def agentbench_project(pytester, monkeypatch, policy="reference", raise_at=None):
    """A project whose two AgentBench environments spawn the test stack, and whose
    reference agent loads the test policies from this directory."""
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", "helpers.agentbench_policy:HOUSE,helpers.agentbench_policy:SHOP")
    monkeypatch.setenv("PYTHONPATH", pythonpath(TESTS))
    node = make_project(pytester, policy=policy)
    extra = ("--raise-at", str(raise_at)) if raise_at is not None else ()
    server = shlex.join(command("--max-step", "12", *extra))
    overrides = {name: {"command": server, "tasks": tasks} for name, tasks in
                 (("AgentBench-ALFWorld", "0-5"), ("AgentBench-WebShop", "0-2"))}
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}", "envs: {servers: spawn, overrides: " + json.dumps(overrides) + "}"))
    suite(pytester, "house", "environment: AgentBench-ALFWorld\ntasks: 0-4\ngates: [success_rate >= 0.8]\n")
    suite(pytester, "shop", "environment: AgentBench-WebShop\ntasks: 0-2\ngates: [mean_reward >= 0.9]\n")
    return node


def test_a_suite_runs_agentbench_tasks_end_to_end(pytester, monkeypatch):
    node = agentbench_project(pytester, monkeypatch)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=ab")
    result.assert_outcomes(passed=8 + 2)  # 5 + 3 episodes and one gate per environment
    result.stdout.fnmatch_lines(["AgentBench-ALFWorld * 5 * 1.000 *", "AgentBench-WebShop * 3 * 1.000 *",
                                 "GATE PASSED: AgentBench-ALFWorld success_rate >= 0.8*"])
    records = {(r["env"], r["task_index"]): r for r in episodes(pytester, "ab")}
    assert {key: r["reward"] for key, r in records.items()} == {
        **{("AgentBench-ALFWorld", i): 1.0 for i in range(5)},
        **{("AgentBench-WebShop", i): 1.0 for i in range(3)}}
    house = records[("AgentBench-ALFWorld", 0)]
    # the policy looks in cabinet 1, coffeemachine 1, countertop 1: go x3, take, go, put
    assert house["rounds"] == 6 and house["stop_reason"] == "done" and house["success"]
    assert house["turns"][0]["action"] == house["turns"][0]["reply"]  # sent whole
    assert house["turns"][-1]["feedback"].endswith("[AgentBench: sample completed]")
    assert house["turns"][1]["observation"] == house["turns"][0]["feedback"]
    assert house["turns"][1]["observation"].startswith("You arrive at cabinet 1. On the cabinet 1, you see nothing.")


@pytest.mark.faults
def test_a_task_that_raises_is_an_environment_error_in_the_run(pytester, monkeypatch):
    node = agentbench_project(pytester, monkeypatch, raise_at=2)
    result = run(pytester, "suites/house.yaml", f"--agentgym-node={node}", "--agentgym-run-id=boom",
                 "--agentgym-retries=0")
    assert result.ret == 1
    records = {r["task_index"]: r for r in episodes(pytester, "boom")}
    broken = records.pop(2)
    assert broken["outcome"] == "error" and broken["reward"] is None
    assert (broken["error"]["where"], broken["error"]["type"]) == ("env", "EnvHTTPError")
    assert "HTTP 501" in broken["error"]["message"]
    assert "the task raised RuntimeError: sample 2 raised (--raise-at)" in broken["error"]["message"]
    assert all(r["outcome"] == "passed" for r in records.values())
    result.stdout.fnmatch_lines(["ERROR suites/house.yaml::AgentBench-ALFWorld[[]2[]] *"])


def test_a_policy_that_breaks_the_format_is_scored_zero_not_an_error(pytester, monkeypatch):
    node = agentbench_project(pytester, monkeypatch, policy="random")
    result = run(pytester, "suites/house.yaml", f"--agentgym-node={node}", "--agentgym-run-id=bad")
    assert result.ret == 1  # the gate fails
    result.stdout.fnmatch_lines(["*GATE FAILED: AgentBench-ALFWorld success_rate >= 0.8*"])
    records = episodes(pytester, "bad")
    assert [(r["reward"], r["outcome"], r["rounds"], r["error"]) for r in records] == [(0.0, "unsolved", 1, None)] * 5
    assert all(r["turns"][0]["feedback"] == "[AgentBench: sample agent invalid action]" for r in records)
