"""The env_idx dialect over real HTTP: WebShop- and SQLGym-shaped episodes through
:class:`EnvClient` and the adapters, against tests/helpers/env_idx_server.py run as a
real process on loopback.

Expected rewards and texts are derived by hand from the test server's fixed
catalogue, database and rules (see its docstring), not from the code under test.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers.env_idx_server import DB_DESCRIPTION, command

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient, EnvHTTPError
from pytest_agentgym.servers.lifecycle import ManagedServer


@pytest.fixture(scope="module")
def webshop_server(tmp_path_factory):
    with ManagedServer("WebShop", command=command("webshop"), startup_timeout=60,
                       log_path=tmp_path_factory.mktemp("logs") / "webshop.log") as server:
        yield server


@pytest.fixture(scope="module")
def sqlgym_server(tmp_path_factory):
    with ManagedServer("SQLGym", command=command("sqlgym"), startup_timeout=60,
                       log_path=tmp_path_factory.mktemp("logs") / "sqlgym.log") as server:
        yield server


def react(action: str) -> str:
    return f"Thought:\nI will do the next sensible thing.\n\nAction:\n{action}"


async def play(url: str, env: str, task_index: int, replies: list[str]):
    """Open an episode and send each reply; returns the opening and the step results."""
    adapter = adapter_class(env)()
    async with EnvClient(url, env=env, dialect="env_idx", timeout=30) as client:
        opening = await adapter.open(client, task_index)
        results = []
        for reply in replies:
            parsed = adapter.parse_action(reply)
            body = await client.step(opening.env_id, parsed.action)
            results.append(adapter.read_step(body))
            if results[-1].done:
                break
        return opening, results


def test_webshop_episode_buys_the_right_item(webshop_server):
    goal = "i need a red cotton t-shirt in size large, and price lower than 30.00 dollars"
    opening, results = asyncio.run(play(webshop_server.url, "WebShop", 0, [
        react("search[red cotton t-shirt]"),
        react("click[B0SHIRT001]"),
        react("click[large]"),
        react("click[Buy Now]"),
    ]))
    assert opening.first_observation == f"WebShop [SEP] Instruction: [SEP] {goal} [SEP] Search"
    assert [m["role"] for m in opening.messages] == ["user", "assistant", "user"]
    assert opening.messages[1]["content"] == "Ok."
    assert "Total results: 1" in results[0].observation and "B0SHIRT001" in results[0].observation
    assert "Buy Now" in results[1].observation
    assert [r.reward for r in results] == [0.0, 0.0, 0.0, 1.0]
    assert [r.done for r in results] == [False, False, False, True]
    assert results[-1].observation.startswith("Thank you for shopping with us!")


def test_webshop_wrong_option_gets_partial_reward_and_invalid_click_changes_nothing(webshop_server):
    _, results = asyncio.run(play(webshop_server.url, "WebShop", 1, [
        react("search[coffee mug]"),
        react("click[no such button]"),
        react("click[B0MUG00003]"),
        react("click[white]"),
        react("click[Buy Now]"),
    ]))
    assert results[1].observation == results[0].observation  # the invalid click did nothing
    assert (results[1].reward, results[1].done) == (0.0, False)
    assert (results[-1].reward, results[-1].done) == (0.5, True)  # the goal wants black


def test_sqlgym_episode_right_query_scores_one_in_one_step(sqlgym_server):
    reply = ("Thought: count the singers whose country is France.\n\n"
             "Action: ```sql\nSELECT count(*) FROM singer WHERE country = 'France';\n```")
    opening, results = asyncio.run(play(sqlgym_server.url, "SQLGym", 0, [reply, reply]))
    assert opening.first_observation == f"{DB_DESCRIPTION}\n\nHow many singers are from France?"
    assert len(results) == 1  # done after the single step
    assert (results[0].observation, results[0].reward, results[0].done) == ("[(2,)]", 1.0, True)


@pytest.mark.parametrize("sql, state", [
    ("SELECT count(*) FROM singer", "[(4,)]"),
    ("SELEC count(*) FROM singer", 'near "SELEC": syntax error'),
])
def test_sqlgym_wrong_or_broken_query_scores_zero(sqlgym_server, sql, state):
    reply = f"Thought: x\n\nAction: ```sql\n{sql}\n```"
    _, results = asyncio.run(play(sqlgym_server.url, "SQLGym", 0, [reply]))
    assert (results[0].observation, results[0].reward, results[0].done) == (state, 0.0, True)


def test_sqlgym_result_state_is_cut_at_100_characters(sqlgym_server):
    reply = "Action: ```sql\nSELECT name, country, age FROM singer, concert\n```"
    _, results = asyncio.run(play(sqlgym_server.url, "SQLGym", 2, [reply]))
    assert len(results[0].observation) == 103 and results[0].observation.endswith("...")


def test_unknown_env_idx_is_an_http_500(webshop_server):
    async def go():
        async with EnvClient(webshop_server.url, env="WebShop", dialect="env_idx") as client:
            await client.step(-1, "search[x]")

    with pytest.raises(EnvHTTPError) as info:
        asyncio.run(go())
    assert info.value.status_code == 500 and info.value.env_id == -1
    assert "Internal Server Error" in str(info.value)


def test_missing_body_field_is_an_http_422(sqlgym_server):
    async def go():
        async with EnvClient(sqlgym_server.url, env="SQLGym", dialect="env_idx") as client:
            await client.request("POST", "/reset", json={"item_id": 0})

    with pytest.raises(EnvHTTPError) as info:
        asyncio.run(go())
    assert info.value.status_code == 422 and "env_idx" in str(info.value)


def test_webarena_style_create_answer_over_http(tmp_path):
    with ManagedServer("WebArena", command=command("webshop", "dict"),
                       log_path=tmp_path / "webarena.log") as server:
        async def go():
            async with EnvClient(server.url, env="WebArena", dialect="env_idx") as client:
                env_id = await client.create()
                return env_id, client.last_create

        env_id, raw = asyncio.run(go())
    assert isinstance(env_id, int) and raw == {"env_idx": env_id}
