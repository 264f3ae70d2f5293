"""ALFWorld, SQLGym, WebShop and SciWorld adapters: what they send and how they read answers.

Their real servers cannot run here (no data), so the answers are
``httpx.MockTransport`` bodies shaped as the protocol sheet (§4-§7) describes
them, and the expected results come from the sheet's rules for the original
AgentGym clients.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.alfworld import ALFWorldAdapter
from pytest_agentgym.envs.base import ACK_LONG, ACK_SHORT, ParsedAction, extract_one_line, extract_react
from pytest_agentgym.envs.protocol import EnvBadResponse, EnvClient
from pytest_agentgym.envs.sciworld import SciWorldAdapter
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.envs.sqlgym import SQLGymAdapter, extract_sql
from pytest_agentgym.envs.webshop import WebShopAdapter

URL = "http://127.0.0.1:36099"


def open_with(adapter, answers, dialect="id", task_index=0):
    """Run ``adapter.open`` against canned answers; returns (opening, requests)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=answers[(request.method, request.url.path)])

    async def go():
        async with EnvClient(URL, env=adapter.name, dialect=dialect,
                             transport=httpx.MockTransport(handler)) as client:
            return await adapter.open(client, task_index)

    return asyncio.run(go()), seen


def test_registry_knows_the_four_adapters():
    assert adapter_class("alfworld") is ALFWorldAdapter
    assert adapter_class("SQLGym") is SQLGymAdapter
    assert adapter_class("WebShop") is WebShopAdapter
    assert adapter_class("sciworld") is SciWorldAdapter


# -- ALFWorld ---------------------------------------------------------------------------


def test_alfworld_reset_payload_and_first_observation():
    reset = {
        "id": 0,
        "observation": "You are in the middle of a room. Your task is to: put a clean mug in coffeemachine.",
        "available_actions": ["go to countertop 1", "go to sinkbasin 1", "inventory", "look"],
        "task_type": "pick_clean_then_place_in_recep",
    }
    opening, seen = open_with(ALFWorldAdapter(), {("POST", "/create"): {"id": 0},
                                                  ("POST", "/reset"): reset}, task_index=2420)
    assert json.loads(seen[1].content) == {"id": 0, "game": 2420, "world_type": "Text"}
    assert opening.first_observation == (
        reset["observation"]
        + "\nAVAILABLE ACTIONS: go to countertop 1,go to sinkbasin 1,inventory,look"
    )
    assert opening.messages[1]["content"] == ACK_LONG


def test_alfworld_step_shows_only_the_observation():
    result = ALFWorldAdapter().read_step({
        "observation": "You arrive at countertop 1. On the countertop 1, you see a mug 1.",
        "reward": 0.0, "available_actions": ["take mug 1 from countertop 1"], "done": False,
    })
    assert result.observation == "You arrive at countertop 1. On the countertop 1, you see a mug 1."
    assert (result.reward, result.done) == (0.0, False)
    won = ALFWorldAdapter().read_step({"observation": "You won!", "reward": 1.0,
                                       "available_actions": [], "done": True})
    assert (won.reward, won.done) == (1.0, True)


def test_alfworld_reset_without_observation_is_a_bad_response():
    with pytest.raises(EnvBadResponse) as info:
        open_with(ALFWorldAdapter(), {("POST", "/create"): {"id": 3},
                                      ("POST", "/reset"): {"id": 3, "task_type": "x"}})
    assert info.value.endpoint == "/reset" and info.value.env_id == 3


@pytest.mark.parametrize("reply, action", [
    ("Thought:\nI need the mug.\n\nAction:\ngo to countertop 1", "go to countertop 1"),
    ("Action:\ntake mug 1 from countertop 1", "take mug 1 from countertop 1"),
    # the last Action: wins, and the action may span lines
    ("Action: look\nThought: no.\nAction:\nopen fridge 1\nnow", "open fridge 1\nnow"),
    # a trailing </s> takes the character before it along, as in AgentGym's client
    ("Action:\ninventory </s>", "inventory"),
    ("Action:\ninventory</s>", "inventor"),
    # no Action: marker -> AgentGym's parse_react sends an empty action
    ("go to countertop 1", ""),
])
def test_alfworld_reads_actions_with_family_a(reply, action):
    assert ALFWorldAdapter().parse_action(reply).action == action


# -- SciWorld ---------------------------------------------------------------------------


def test_sciworld_first_observation_joins_task_and_room():
    reset = {
        "task_name": "boil", "var_num": 0,
        "task_description": "Your task is to boil water.",
        "observation": "This room is called the kitchen.",
        "reward": 0, "score": 0, "deleted": False, "done": False,
    }
    opening, seen = open_with(SciWorldAdapter(), {("POST", "/create"): {"id": 5},
                                                  ("POST", "/reset"): reset}, task_index=17)
    assert json.loads(seen[1].content) == {"id": 5, "data_idx": 17}
    assert opening.first_observation == "Your task is to boil water.\nThis room is called the kitchen."


def test_sciworld_reward_is_the_score_and_success_is_score_100():
    rule = load_default_specs()["SciWorld"].success
    adapter = SciWorldAdapter()
    partial = adapter.read_step({"observation": "The stove is on.", "reward": 8, "score": 33,
                                 "done": False})
    assert (partial.reward, partial.score) == (33.0, 33.0)  # the score, not the delta 8
    assert not rule(partial.reward, partial.score)
    full = adapter.read_step({"observation": "Task completed.", "reward": 67, "score": 100,
                              "done": True})
    assert rule(full.reward, full.score) and full.done
    failed = adapter.read_step({"observation": "Failed.", "reward": -133, "score": -100,
                                "done": True})
    assert failed.reward == -100.0 and not rule(failed.reward, failed.score)


def test_sciworld_step_without_score_is_refused():
    with pytest.raises(TypeError):
        SciWorldAdapter().read_step({"observation": "x", "reward": 1, "done": False})


# -- WebShop ----------------------------------------------------------------------------


def test_webshop_replaces_reset_observation_with_get_observation():
    answers = {
        ("POST", "/create"): 48950000,
        ("POST", "/reset"): ["stale text from reset", None],
        ("GET", "/observation"): "WebShop [SEP] Instruction: [SEP] i want a mug [SEP] Search",
    }
    opening, seen = open_with(WebShopAdapter(), answers, dialect="env_idx", task_index=12)
    assert json.loads(seen[1].content) == {"env_idx": 48950000, "session_id": 12}
    assert seen[2].url.params["env_idx"] == "48950000"
    assert opening.first_observation == answers[("GET", "/observation")]
    assert opening.messages[1]["content"] == ACK_SHORT


def test_webshop_reset_that_is_not_a_pair_is_a_bad_response():
    with pytest.raises(EnvBadResponse) as info:
        open_with(WebShopAdapter(), {("POST", "/create"): 1, ("POST", "/reset"): {"obs": "x"}},
                  dialect="env_idx")
    assert "[observation, null]" in str(info.value)


@pytest.mark.parametrize("reply, action", [
    ("Thought:\nI think I should search.\n\nAction: \nsearch[red mug]", "search[red mug]"),
    ("Thought:\nbuy\n\nAction:\nclick[Buy Now]", "click[Buy Now]"),
    # no marker, but a bare search[/click[ -> the whole reply (AgentGym's rule)
    ("click[b0mug00003]", "click[b0mug00003]"),
    ("I am not sure what to do", ""),
])
def test_webshop_reads_actions_with_family_a(reply, action):
    assert WebShopAdapter().parse_action(reply).action == action


def test_webshop_step_reads_state():
    result = WebShopAdapter().read_step({"state": "Thank you for shopping with us!",
                                         "reward": 0.75, "done": True, "info": None})
    assert (result.observation, result.reward, result.done) == (
        "Thank you for shopping with us!", 0.75, True)
    with pytest.raises(TypeError):
        WebShopAdapter().read_step({"observation": "x", "reward": 0, "done": False})


# -- SQLGym -----------------------------------------------------------------------------


def test_sqlgym_reset_payload_and_question():
    question = "db contains tables such as t. Table t has columns such as a.\n\nHow many rows?"
    opening, seen = open_with(SQLGymAdapter(), {("POST", "/create"): 7,
                                                ("POST", "/reset"): [question, None]},
                              dialect="env_idx", task_index=9428)
    assert json.loads(seen[1].content) == {"env_idx": 7, "item_id": 9428}
    assert opening.first_observation == question
    assert opening.messages[1]["content"] == ACK_SHORT


@pytest.mark.parametrize("reply, sql", [
    ("Thought: easy.\n\nAction: ```sql\nSELECT count(*) FROM t;\n```", "SELECT count(*) FROM t;"),
    # the last ```sql block counts
    ("```sql\nSELECT 1\n```\nbetter:\n```sql\nSELECT 2\n```", "SELECT 2"),
    # no fence: the whole reply, up to a plain ``` if there is one
    ("SELECT a FROM t", "SELECT a FROM t"),
    ("SELECT a FROM t ``` trailing", "SELECT a FROM t"),
])
def test_sqlgym_extracts_sql_between_fences(reply, sql):
    assert extract_sql(reply) == sql
    assert SQLGymAdapter().parse_action(reply).action == sql


def test_sqlgym_step_reads_state_and_is_done():
    result = SQLGymAdapter().read_step({"state": "[(2,)]", "reward": 1.0, "done": True,
                                        "info": {"ground_truth": "SELECT 2"}})
    assert (result.observation, result.reward, result.done) == ("[(2,)]", 1.0, True)


# -- shared -----------------------------------------------------------------------------


def test_extract_react_drops_a_trailing_end_of_sequence_marker_like_the_original():
    """AgentGym's ALFWorld, SciWorld and WebShop clients cut the last 5 characters of a
    reply that ends in </s> before parse_react; nothing else."""
    assert extract_react("Thought: x\nAction: look around </s>") == "look around"
    assert extract_react("Thought: x\nAction: look around</s>") == "look aroun"
    assert extract_react("Thought: x</s>\nAction: look around") == "look around"
    assert extract_react("Action: search[red shoes]</s>\n") == "search[red shoes]</s>"


@pytest.mark.parametrize("env", ["ALFWorld", "SciWorld", "WebShop"])
@pytest.mark.parametrize("reply, action", [
    # AgentGym's parse_react is shared by the three: with no Action: marker it sends
    # the whole reply when it contains search[ or click[, else an empty action
    ("  search[red mug]  ", "search[red mug]"),
    ("I will click[Buy Now]", "I will click[Buy Now]"),
    ("Thought: the mug is on the table.", ""),
])
def test_family_a_without_marker_is_the_same_rule_everywhere(env, reply, action):
    assert extract_react(reply) == action
    assert adapter_class(env)().parse_action(reply).action == action


@pytest.mark.parametrize("env", ["BabyAI", "TextCraft"])
@pytest.mark.parametrize("reply", [
    # family (b): the 2025 clients' regex finds no "Action:", so they send "" (protocol sheet §0)
    "go to red ball 1",
    "Thought: I should get 1 oak logs.",
    "",
])
def test_family_b_without_marker_sends_the_empty_action(env, reply):
    assert extract_one_line(reply) == ParsedAction("")
    assert adapter_class(env)().parse_action(reply) == ParsedAction("")


@pytest.mark.parametrize("env, must_contain", [
    ("ALFWorld", ["Thought:", "Action:", "Nothing happens.", "available actions"]),
    ("SciWorld", ["Thought:", "Action:", "focus on OBJ", "look around", "wait1", "pick up OBJ"]),
    ("WebShop", ["Thought:", "Action:", "search[keywords]", "click[value]"]),
    ("SQLGym", ["Thought:", "Action:", "```sql", "single line"]),
])
def test_prompts_state_the_action_format(env, must_contain):
    text = adapter_class(env)().instructions()
    assert "placeholder" not in text.lower()
    for phrase in must_contain:
        assert phrase in text, f"{env} prompt lacks {phrase!r}"
