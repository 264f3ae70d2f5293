"""AgentGym environments as verifiers environments (pytest_agentgym.integrations.verifiers).

Needs verifiers 0.4 (the ``verifiers`` extra; the ``test`` extra brings it too); skipped,
saying why, where it is not installed.

Real parts: the reference agent and the embedded TextCraft server as processes on
loopback, verifiers' own ``vf-eval`` as a process, a pytest run as a process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # vf-eval and pytest runs as processes: minutes in all

vf = pytest.importorskip(
    "verifiers.v1", reason="the verifiers extra is not installed (pip install -e '.[test]'; docs/training.md)")

from helpers import REPO
from helpers.projects import episodes, make_project, run, suite  # noqa: E402
from verifiers.v1.env import RunSlot  # noqa: E402

from pytest_agentgym.integrations.verifiers import load_environment, task_indices  # noqa: E402
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port  # noqa: E402
from pytest_agentgym.process.managed import ManagedServer  # noqa: E402

VF_EVAL = Path(sys.executable).parent / "vf-eval"


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """The reference agent (not an LLM) on a free port."""
    port = free_port()
    server = ManagedServer("reference agent", command=[sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                                       "--port", "{port}"],
                           port=port, health=HEALTH_ENDPOINT, startup_timeout=60, label="reference agent",
                           log_path=tmp_path_factory.mktemp("agent") / "agent.log", advice=Advice())
    server.start()
    yield server
    server.stop()


def vf_eval(tmp_path: Path, agent_url: str, *args: str) -> list[dict]:
    """Run verifiers' own ``vf-eval`` on the taskset id; its episodes (traces.jsonl)."""
    if not VF_EVAL.exists():
        pytest.skip(f"vf-eval is not installed next to {sys.executable}")
    out = tmp_path / "vf-out"
    result = subprocess.run(
        [str(VF_EVAL), "pytest-agentgym-verifiers", *args, "--model", "reference",
         "--client.base-url", agent_url + "/v1", "--client.api-key-var", "AGENTGYM_TEST_NO_KEY",
         "--no-push", "--no-rich", "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    (traces,) = out.glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines()]


def test_vf_eval_scores_textcraft_tasks_as_the_pytest_run_does(pytester, agent, tmp_path):
    node = make_project(pytester)  # the reference agent, TextCraft's embedded server spawned
    suite(pytester, "textcraft", "environment: TextCraft\ntasks: 0-9\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=pt")
    assert result.ret == 0, result.stdout.str()[-2000:]
    by_pytest = {r["task_index"]: r for r in episodes(pytester, "pt")}

    vf_episodes = vf_eval(tmp_path, agent.url, "--env.taskset.env", "TextCraft", "--env.taskset.tasks", "0-9",
                          "--env.taskset.node", str(node), "--env.taskset.root", str(pytester.path))
    assert len(vf_episodes) == 10 and all(e["ok"] and not e["errors"] for e in vf_episodes)
    by_vf = {}
    for episode in vf_episodes:
        (trace,) = episode["traces"]
        by_vf[episode["task"]["data"]["task_index"]] = trace
    assert sorted(by_vf) == list(range(10))
    for index, record in by_pytest.items():
        trace = by_vf[index]
        assert trace["rewards"]["agentgym_reward"]["score"] == record["reward"], index
        assert trace["metrics"]["success"] == float(record["success"])
        info = trace["info"]["agentgym"]
        assert info["actions"] == [turn["action"] for turn in record["turns"]]
        assert (info["rounds"], info["stop_reason"]) == (record["rounds"], record["stop_reason"])
    # the conversation the model saw is the pytest run's: instructions, ack, observation, ...
    first = by_vf[0]["nodes"]
    assert [n["message"]["role"] for n in first[:3]] == ["user", "assistant", "user"]
    assert first[2]["message"]["content"] == by_pytest[0]["turns"][0]["observation"]
    assert sum(record["reward"] for record in by_pytest.values()) > 0  # the comparison is not all zeros


@pytest.mark.faults
def test_a_killed_environment_server_fails_the_episode_instead_of_scoring_it(agent, tmp_path):
    env = load_environment(env="TextCraft", tasks="3", node="local",
                           root=str(REPO))
    ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=agent.url + "/v1", api_key_var="AGENTGYM_TEST_NO_KEY"),
                          model="reference", sampling=vf.SamplingConfig())

    async def go():
        async with env.serving():
            server = env.pool.servers["TextCraft"]
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=30)
            (task,) = list(env.taskset)
            return await env.run_slot(RunSlot(task), ctx)

    episode = asyncio.run(go())
    assert not episode.ok
    assert "env:EnvUnreachable" in episode.errors[0].message
    (trace,) = episode.traces
    assert "agentgym_reward" not in trace.rewards
    assert trace.info["agentgym"]["error"]["type"] == "EnvUnreachable"


@pytest.mark.faults
def test_an_episode_the_time_budget_ends_is_an_error_not_a_zero(tmp_path):
    """The reference agent answering in 3 s each, a budget of 5 s: round 1 is played (with
    2 s to spare for a busy machine), the budget runs out while the model answers round 2 (a
    busy machine only makes that later). A pytest run scores that ``timeout`` as the model's
    outcome; verifiers gets an error it can retry, no reward."""
    from helpers.rollout_guards import slow_agent

    slow = slow_agent(tmp_path, 3000)
    env = load_environment(env="TextCraft", tasks="3", node="local", root=str(REPO), episode_timeout=5.0)
    ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=slow.url + "/v1", api_key_var="AGENTGYM_TEST_NO_KEY"),
                          model="reference", sampling=vf.SamplingConfig())

    async def go():
        async with env.serving():
            (task,) = list(env.taskset)
            return await env.run_slot(RunSlot(task), ctx)

    try:
        episode = asyncio.run(go())
    finally:
        slow.stop()
    assert not episode.ok
    assert ("harness:EpisodeTimeout: the episode budget of 5 s ran out after 1 round(s), while the model was "
            "answering; not scored") in episode.errors[0].message
    (trace,) = episode.traces
    assert "agentgym_reward" not in trace.rewards
    assert trace.info["agentgym"]["stop_reason"] == "timeout" and trace.info["agentgym"]["error"] is None


def test_bad_arguments_say_what_to_write():
    root = str(REPO)
    with pytest.raises(ValueError, match="not an environment of node local; known: .*TextCraft"):
        list(load_environment(env="Chess", node="local", root=root).taskset)
    with pytest.raises(ValueError, match=r"TextCraft has tasks 0-543, not \[600\]"):
        list(load_environment(env="TextCraft", tasks="600", node="local", root=root).taskset)
    with pytest.raises(TypeError, match="unknown arguments colour"):
        load_environment(env="TextCraft", colour="red")
    with pytest.raises(ValueError, match="no last task index; say which tasks"):
        task_indices(None, "0-", "BabyAI")
    assert task_indices("3,5,8-9", "0-543", "TextCraft") == [3, 5, 8, 9]
