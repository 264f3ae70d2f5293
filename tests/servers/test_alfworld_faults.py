"""ALFWorld server faults with real signals: a SIGKILLed server is an environment
fault (EnvUnreachable, classified "env") like any other server's, and leaves
nothing behind (the engine runs inside the server process)."""

from __future__ import annotations

import asyncio
import signal

import psutil
import pytest

from helpers.alfworld_support import needs_engine, start_server, walkthrough
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient, EnvUnreachable
from pytest_agentgym.engine.episode import classify

pytestmark = [needs_engine, pytest.mark.faults]


async def open_game(url: str, game: int):
    async with EnvClient(url, env="ALFWorld", dialect="id", timeout=60) as client:
        return await adapter_class("ALFWorld")().open(client, game)


async def step(url: str, env_id: int, action: str):
    async with EnvClient(url, env="ALFWorld", dialect="id", timeout=60) as client:
        return await client.step(env_id, action)


def test_a_killed_server_is_an_env_fault_and_a_restart_serves_fresh_games(tmp_path):
    server = start_server(tmp_path)
    try:
        opening = asyncio.run(open_game(server.url, 2420))
        assert "Your task is to: " in opening.first_observation
        first = walkthrough(2420)[0]
        assert "error" not in asyncio.run(step(server.url, opening.env_id, first))
        assert psutil.Process(server.pid).children(recursive=True) == []  # no engine process per env

        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
        with pytest.raises(EnvUnreachable) as info:
            asyncio.run(step(server.url, opening.env_id, walkthrough(2420)[1]))
        assert classify(info.value) == "env"
        assert info.value.env_id == opening.env_id and "/step" in str(info.value)

        server.restart()
        fresh = asyncio.run(open_game(server.url, 2420))
        assert fresh.first_observation == opening.first_observation  # the same game, from the start
    finally:
        server.stop()
