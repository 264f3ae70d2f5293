"""AgentBench-ALFWorld against AgentBench's own task controller and ALFWorld task worker
(the opt-in ``agentbench`` tier): skipped unless ``AGENTBENCH_SRC`` names an AgentBench
checkout; ``AGENTBENCH_PYTHON`` is the interpreter with its requirements (default: this
one). tests/helpers/agentbench_upstream.py starts both as real processes on loopback (no
Docker) with the eight ALFWorld games this package ships as the task's split; the reference
agent plays them with the reference ALFWorld decisions (tests/helpers/agentbench_alfworld_policy.py).

    AGENTBENCH_SRC=/tmp/agentbench AGENTBENCH_PYTHON=/tmp/agentbench-venv/bin/python \\
        python -m pytest -q -p no:cacheprovider tests/integrations/test_agentbench_upstream.py

Expected figures: the prompt's layout is AgentBench's (task.py: instructions, an
acknowledgement, the one-shot example of the game's task type, the game); the rounds are
those AgentBench's own client (``src.assigner``, its ``HTTPAgent`` on the same reference
agent) recorded on the same games, and the last test checks that it still does.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from helpers import TESTS, pythonpath
from helpers import agentbench_upstream as upstream
from helpers.agentbench_play import play as play_sample
from helpers.projects import episodes, make_project, run, suite

from pytest_agentgym.envs.protocol import EnvHTTPError
from pytest_agentgym.envs.spec import load_default_specs

pytestmark = [pytest.mark.agentbench, pytest.mark.skipif(upstream.not_asked() is not None,
                                                         reason=upstream.not_asked() or "")]

ENV = "AgentBench-ALFWorld"
#: sample -> rounds to win with the reference decisions (AgentBench's client agrees, last test)
ROUNDS = {0: 9, 1: 12, 2: 14, 3: 5, 4: 10, 5: 10, 6: 9, 7: 7}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    src, exe = upstream.checkout(), upstream.python()
    logs = tmp_path_factory.mktemp("agentbench-logs")
    stack = upstream.start(tmp_path_factory.mktemp("agentbench-root"), src, exe, logs)
    yield stack
    stack.stop()


def spec(**options):
    base = load_default_specs()[ENV]
    return base.with_overrides(options={**base.options, "task": upstream.TASK, **options}, request_timeout=60)


async def play(url: str, index: int, replies: list[str], **options):
    """Open sample ``index``, send each reply while it runs, close; (opening, results, running)."""
    return await play_sample(spec(**options), url, index, replies)


def test_a_sample_opens_with_agentbench_prompt_and_plays_turn_by_turn(stack):
    opening, results, running = asyncio.run(play(stack.url, 3, [
        "THOUGHT: the pillow may be on the bed.\nACTION: go to bed 1", "ACTION: look"]))
    messages = opening.messages
    assert [m["role"] for m in messages[:2]] == ["user", "assistant"] and messages[-1]["role"] == "user"
    assert messages[0]["content"].startswith("Interact with a household to solve a task.")
    assert messages[2]["content"].startswith("Here is one example.\n")
    assert opening.first_observation.startswith("Here is your task. You are in the middle of a room.")
    assert "Your task is to: put a pillow in armchair. AVAILABLE ACTIONS: go to armchair 1\n" \
        in opening.first_observation
    first = results[0]
    assert not first.done and first.reward == 0.0
    assert first.observation.startswith("On the bed 1, you see a pillow 1.")
    assert "take pillow 1 from bed 1" in first.observation.split(" AVAILABLE ACTIONS: ", 1)[1].splitlines()
    # the task cut the list of actions from the turn the agent answered, and kept the reply whole
    assert first.conversation[len(messages) - 1]["content"].endswith("Your task is to: put a pillow in armchair. ")
    assert first.conversation[len(messages)] == {
        "role": "assistant", "content": "THOUGHT: the pillow may be on the bed.\nACTION: go to bed 1"}
    assert len(running) == 1  # still running after two turns: close() cancelled it
    assert stack.get("/list_sessions") == {}
    assert httpx.get(stack.worker.url + "/api/get_sessions", timeout=30).json() == {}


def test_a_reply_without_action_ends_the_sample_as_the_agents_fault(stack):
    _, results, running = asyncio.run(play(stack.url, 0, ["I would rather not."]))
    assert [(r.reward, r.done) for r in results] == [(0.0, True)]
    assert results[0].observation == "[AgentBench: sample agent invalid action]"
    assert running == set() and stack.get("/list_sessions") == {}


def test_an_unknown_task_and_an_index_out_of_bounds_are_typed_errors(stack):
    with pytest.raises(EnvHTTPError) as unknown:
        asyncio.run(play(stack.url, 0, [], task="alfworld-nope"))
    assert unknown.value.status_code == 406 and "Task does not exist" in str(unknown.value)
    assert "task alfworld-nope (controller)" in str(unknown.value)
    with pytest.raises(EnvHTTPError) as bounds:
        asyncio.run(play(stack.url, 8, []))
    assert bounds.value.status_code == 400 and "Index out of bounds" in str(bounds.value)


def test_a_run_wins_the_games_as_agentbench_own_client_does(stack, pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", upstream.POLICY)
    monkeypatch.setenv("PYTHONPATH", pythonpath(TESTS))
    node = make_project(pytester)
    overrides = {ENV: {"url": stack.url, "tasks": "0-7", "options": {"task": upstream.TASK}}}
    # AgentBench's own max_step (35); its controller is attached by URL
    node.write_text(node.read_text()
                    .replace("max_rounds: 15", "max_rounds: 35").replace("episode_timeout: 60", "episode_timeout: 300")
                    .replace("envs: {servers: spawn}", f"envs: {{servers: spawn, overrides: {json.dumps(overrides)}}}"))
    suite(pytester, "house", f"environment: {ENV}\ntasks: 0-7\ngates: [success_rate >= 1]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=upstream", timeout=900)
    result.assert_outcomes(passed=8 + 1)
    result.stdout.fnmatch_lines([f"{ENV} * 8 * 1.000 *", f"GATE PASSED: {ENV} success_rate >= 1: *"])
    records = {r["task_index"]: r for r in episodes(pytester, "upstream")}
    assert {i: (r["reward"], r["success"], r["stop_reason"], r["rounds"]) for i, r in records.items()} == {
        i: (1.0, True, "done", rounds) for i, rounds in ROUNDS.items()}
    for record in records.values():
        assert record["turns"][-1]["feedback"].endswith("[AgentBench: sample completed]")
        assert all(t["action"] == t["reply"] and t["reply"].startswith("THOUGHT: ") for t in record["turns"])
    assert stack.get("/list_sessions") == {}

    # AgentBench's own client, the same reference agent, the same games
    agent = upstream.reference_agent(tmp_path)
    try:
        theirs = upstream.run_agentbench_client(stack, agent.url, tmp_path / "outputs")
    finally:
        agent.stop()
    assert sorted(theirs) == sorted(ROUNDS)
    for index, output in theirs.items():
        replies = upstream.game_turns(output["history"])
        assert (output["status"], output["result"]["result"], len(replies)) == ("completed", True, ROUNDS[index])
        assert replies == [t["reply"] for t in records[index]["turns"]], f"sample {index} was played differently"
