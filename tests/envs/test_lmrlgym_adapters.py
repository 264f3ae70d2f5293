"""Maze and Wordle adapters and reference policies.

Action extraction and the Wordle opening's call order are unit-tested with an
injected transport; the openings and whole episodes run against the embedded
lmrlgym server as a real process. Expected facts come from the protocol sheet
(sections 0, 14.1.7, 14.2.9) and its tables.
"""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.base import ACK_LONG
from pytest_agentgym.envs.maze import MazeAdapter
from pytest_agentgym.envs.protocol import EnvBadResponse, EnvClient
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.envs.wordle import WordleAdapter
from pytest_agentgym.model.reference import maze as maze_policy
from pytest_agentgym.model.reference import wordle as wordle_policy

from helpers.wordle_facts import FIRST_TARGET, VOCABULARY

MOVES = {"move up", "move down", "move left", "move right"}


def client_for(env: str, server_url: str) -> EnvClient:
    spec = load_default_specs()[env]
    return EnvClient(spec.base_url(server_url), env=env, dialect=spec.dialect, timeout=10)


async def play(env: str, client: EnvClient, index: int, *, use_random: bool = False):
    """One episode the way AgentGym's evaluator runs it: (last reward, rounds, messages)."""
    spec = load_default_specs()[env]
    adapter = adapter_class(env)()
    policy = maze_policy.POLICY if env == "Maze" else wordle_policy.POLICY
    rng = random.Random(index)
    opening = await adapter.open(client, index)
    messages = list(opening.messages)
    reward, rounds = 0.0, 0
    while rounds < spec.max_rounds:
        reply = (policy.random_reply if use_random else policy.reply)(messages, rng)
        result = adapter.read_step(
            await client.step(opening.env_id, adapter.parse_action(reply).action)
        )
        rounds += 1
        reward = result.reward
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": result.observation}]
        if result.done:
            break
    return reward, rounds, messages


def play_all(env: str, server_url: str, indices, *, use_random: bool = False):
    """Many episodes at once through one client (the server interleaves them)."""

    async def run():
        async with client_for(env, server_url) as client:
            return await asyncio.gather(
                *(play(env, client, index, use_random=use_random) for index in indices)
            )

    return asyncio.run(run())


@pytest.fixture(scope="module")
def server_url(embedded_server):
    return embedded_server("lmrlgym").url


# -- action extraction (family c) -------------------------------------------------


@pytest.mark.parametrize("adapter", [MazeAdapter(), WordleAdapter()], ids=["Maze", "Wordle"])
@pytest.mark.parametrize(
    ("reply", "sent"),
    [
        ("Thought:\nGo down.\n\nAction:\nmove down", "move down"),
        ("Thought:\nx\n\nAction:\n  s h i r e  \n", "s h i r e"),
        ("Action: move up\nbecause it is open", "move up\nbecause it is open"),
        ("Action:\nmove up\nAction:\nmove down", "move up"),
        ("move left", "move left"),
        ("Action:\nmove right</s>", "move righ"),  # the original drops 5 characters
    ],
)
def test_action_is_the_text_after_the_first_action_marker(adapter, reply, sent):
    parsed = adapter.parse_action(reply)
    assert parsed.action == sent and parsed.rejection is None


def test_reset_payloads_and_registry():
    assert adapter_class("maze") is MazeAdapter and adapter_class("Wordle") is WordleAdapter
    assert MazeAdapter().reset_payload(7) == {"game": 7}
    assert WordleAdapter().reset_payload(7) == {"seed": 7}


# -- openings against the real server ---------------------------------------------


def test_maze_opening(server_url):
    async def run():
        async with client_for("Maze", server_url) as client:
            return await MazeAdapter().open(client, 13)

    opening = asyncio.run(run())
    assert [m["role"] for m in opening.messages] == ["user", "assistant", "user"]
    assert opening.messages[0]["content"] == "You are an expert maze solver."
    assert opening.messages[1]["content"] == ACK_LONG
    instructions = MazeAdapter().instructions()
    assert opening.first_observation == instructions + "\n" + (
        "The goal is at position 8, 6. Your current position is at position 5, 3. "
        "There are walls to your left, below you."
    )
    for fact in ('"move up"', '"move down"', '"move left"', '"move right"', "Thought:", "Action:"):
        assert fact in instructions


def test_wordle_opening_and_seed(server_url):
    async def run():
        async with client_for("Wordle", server_url) as client:
            opening = await WordleAdapter().open(client, 7)
            step = await client.step(opening.env_id, " ".join(FIRST_TARGET[7]))
            return opening, step

    opening, step = asyncio.run(run())
    assert [m["role"] for m in opening.messages] == ["user", "assistant", "user"]
    assert opening.messages[0]["content"] == "You are an expert wordle player."
    assert opening.messages[1]["content"] == ACK_LONG
    rules = opening.first_observation
    assert "```\n" + "\n".join(VOCABULARY) + "\n```" in rules
    assert "Let's start Wordle!" not in rules
    for fact in ('"invalid word"', '"g"', '"y"', '"b"', "6", "Thought:", "Action:"):
        assert fact in rules
    assert step == {"observation": "g g g g g\n", "reward": 1, "done": True}  # seeded with 7


def test_wordle_reads_the_vocabulary_before_the_reset():
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path.endswith("/create"):
            return httpx.Response(200, json={"id": 3})
        if request.url.path.endswith("/filtered_vocab"):
            assert request.url.params["id"] == "3"
            return httpx.Response(200, json=["alpha", "bravo"])
        assert json.loads(request.content) == {"id": 3, "seed": 11}
        return httpx.Response(200, json={"id": 3, "observation": "Let's start Wordle!"})

    async def run():
        async with EnvClient("http://wordle.test/wordle", env="Wordle",
                             transport=httpx.MockTransport(answer)) as client:
            return await WordleAdapter().open(client, 11)

    opening = asyncio.run(run())
    assert calls == ["/wordle/create", "/wordle/filtered_vocab", "/wordle/reset"]
    assert "```\nalpha\nbravo\n```" in opening.first_observation


def test_wordle_opening_refuses_a_vocabulary_that_is_not_a_list():
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/create"):
            return httpx.Response(200, json={"id": 0})
        return httpx.Response(200, json="panic solar")

    async def run():
        async with EnvClient("http://wordle.test/wordle", env="Wordle",
                             transport=httpx.MockTransport(answer)) as client:
            await WordleAdapter().open(client, 0)

    with pytest.raises(EnvBadResponse, match="/filtered_vocab"):
        asyncio.run(run())


# -- reference policies -------------------------------------------------------------


def test_policies_recognize_their_own_conversations(server_url):
    [(_, _, maze_messages)] = play_all("Maze", server_url, [3])
    [(_, _, wordle_messages)] = play_all("Wordle", server_url, [3])
    assert maze_policy.POLICY.recognizes(maze_messages[:3])
    assert not maze_policy.POLICY.recognizes(wordle_messages)
    assert wordle_policy.POLICY.recognizes(wordle_messages[:3])
    assert not wordle_policy.POLICY.recognizes(maze_messages)


def test_maze_policy_ignores_the_prompt_example(server_url):
    # The prompt's example walks through (5, 5) and (5, 6); game 16 starts at (5, 6),
    # where the only shortest way is down.
    async def run():
        async with client_for("Maze", server_url) as client:
            return await MazeAdapter().open(client, 16)

    opening = asyncio.run(run())
    reply = maze_policy.POLICY.reply(list(opening.messages), random.Random(0))
    assert MazeAdapter().parse_action(reply).action == "move down"


def test_wordle_policy_filters_like_the_sheet_trace():
    history = [("panic", "b y b b b")]
    assert wordle_policy.consistent(VOCABULARY, history) == [
        "solar", "sugar", "shard", "aloft", "frame", "ultra", "aroma", "shake",
    ]
    assert wordle_policy.feedback("robot", "aloft") == "b y b y g"  # sheet 14.2.5


def test_wordle_policy_falls_back_to_the_known_list():
    messages = [{"role": "user", "content": "Play Wordle. Guess the hidden word."}]
    assert wordle_policy.POLICY.recognizes(messages)
    guess = WordleAdapter().parse_action(
        wordle_policy.POLICY.reply(messages, random.Random(0))
    ).action
    assert guess.replace(" ", "") in VOCABULARY


def test_random_replies_are_legal_looking():
    rng = random.Random(1)
    maze_actions = {
        MazeAdapter().parse_action(maze_policy.POLICY.random_reply([], rng)).action
        for _ in range(50)
    }
    assert maze_actions == MOVES
    words = {
        WordleAdapter().parse_action(wordle_policy.POLICY.random_reply([], rng)).action.replace(" ", "")
        for _ in range(50)
    }
    assert words <= set(VOCABULARY) and len(words) > 10


def test_maze_reference_solves_every_game(server_url):
    # Measured: 25/25 games, at most 13 rounds (benchmarks/servers/reference_lmrlgym.py).
    outcomes = play_all("Maze", server_url, range(25))
    solved = [rounds for reward, rounds, _ in outcomes if reward == 1.0]
    assert len(solved) >= 24
    assert max(solved) <= 15


def test_wordle_reference_solves_nearly_every_seed(server_url):
    # Measured: 100/100 seeds, at most 3 guesses (benchmarks/servers/reference_lmrlgym.py).
    outcomes = play_all("Wordle", server_url, range(100))
    solved = [rounds for reward, rounds, _ in outcomes if reward == 1]
    assert len(solved) >= 95
    assert max(solved) <= 6


def test_random_policy_is_much_worse(server_url):
    outcomes = play_all("Maze", server_url, range(25), use_random=True)
    assert sum(reward == 1.0 for reward, _, _ in outcomes) < 20
