"""A server that dies while starting is started again with back-off, and what an episode
records when its server cannot be brought back. Real processes on loopback: the
command is tests/helpers/flaky_start.py, which fails until a marker file exists and then
becomes the embedded lmrlgym server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest
from helpers.flaky_start import command as flaky_command
from helpers.model_faults import FakeEndpoint, ok

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import EnvSpec
from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest, run_episode
from pytest_agentgym.model.call_settings import RetryPolicy, Sampling
from pytest_agentgym.model.client import EndpointClient
from pytest_agentgym.engine.model import ModelAdapter
from pytest_agentgym.process.health import free_port
from pytest_agentgym.servers.pool import ServerPool
from pytest_agentgym.process.errors import ServerStartError

pytestmark = pytest.mark.faults


def maze_spec(marker, mode: str, attempts: int = 3) -> EnvSpec:
    return EnvSpec(name="Maze", category="lightweight", port=free_port(), path_prefix="/maze",
                   command=flaky_command(marker, mode), startup_timeout=60.0,
                   start_attempts=attempts, start_backoff=0.05, request_timeout=10.0)


def create_env(pool: ServerPool) -> int:
    async def go() -> int:
        async with EnvClient(pool.base_url("Maze"), env="Maze", timeout=10) as client:
            return await client.create()
    return asyncio.run(go())


def starts(log_text: str) -> int:
    return sum(1 for line in log_text.splitlines() if " starting: " in line)


def test_a_server_that_dies_on_its_first_start_is_started_again(tmp_path, caplog):
    marker = tmp_path / "started-once"
    caplog.set_level(logging.WARNING, logger="pytest_agentgym.servers")
    with ServerPool([maze_spec(marker, "once")], log_dir=tmp_path, attach_running=False) as pool:
        server = pool.start("Maze")
        assert server.is_alive() and create_env(pool) >= 0
        log = server.log_path.read_text()
    assert starts(log) == 2
    assert "start attempt 1 of 3 failed: it exited with code 3 before it answered; next attempt in 0.05 s" in log
    assert [r.getMessage() for r in caplog.records if "start attempt 1 of 3 failed" in r.getMessage()]


def test_a_server_that_never_starts_gives_up_after_its_attempts_then_ensure_starts_it(tmp_path, caplog):
    marker = tmp_path / "may-start"
    caplog.set_level(logging.WARNING, logger="pytest_agentgym.servers")
    with ServerPool([maze_spec(marker, "until", attempts=2)], log_dir=tmp_path,
                    attach_running=False) as pool:
        with pytest.raises(ServerStartError) as caught:
            pool.start("Maze")
        error = caught.value
        message = str(error)
        logs = list(tmp_path.glob("Maze-*.log"))
        assert len(logs) == 1 and starts(logs[0].read_text()) == 2
        assert error.attempts == 2 and error.exit_code == 3
        assert "did not start after 2 attempts (waiting 0.05 s between them)" in message
        assert "exited with code 3" in message and str(logs[0]) in message
        assert "no " in error.log_tail and "\n" not in message
        assert sum("start attempt" in r.getMessage() for r in caplog.records) == 2

        marker.touch()  # now it can start: the earlier failure is not held against it
        server = pool.ensure("Maze")
        assert server.is_alive() and create_env(pool) >= 0


def test_an_env_server_that_cannot_be_restarted_for_a_retry_is_an_env_error(tmp_path):
    marker = tmp_path / "may-start"
    marker.touch()
    spec = maze_spec(marker, "until", attempts=2)
    with ServerPool([spec], log_dir=tmp_path, attach_running=False) as pool, \
            FakeEndpoint(script=[ok("Action: move up")]) as fake:
        server = pool.start("Maze")
        marker.unlink()
        os.kill(server.pid, signal.SIGKILL)  # dies; and it will not come back

        async def before_retry(error):
            await asyncio.to_thread(pool.ensure, "Maze")

        async def go():
            chat = ModelAdapter(EndpointClient(fake.base_url, "fake-model",
                                               retry=RetryPolicy(retries=0)), Sampling())
            request = EpisodeRequest(run_id="faults", spec=spec, task_index=0, repeat=1,
                                     limits=EpisodeLimits(max_rounds=3, timeout_s=60, retries=1))
            try:
                async with EnvClient(pool.base_url("Maze"), env="Maze", timeout=10) as client:
                    return await run_episode(request, adapter_class("Maze")(), client, chat, before_retry)
            finally:
                await chat.aclose()

        record = asyncio.run(go())
    assert (record.error.where, record.error.type) == ("env", "ServerStartError")
    assert "did not start after 2 attempts" in record.error.message
    assert "not retried after its attempt failed with EnvUnreachable" in record.error.message
    assert record.retried == () and "\n" not in record.error.message


def test_a_single_attempt_still_fails_in_one_paragraph(tmp_path):
    spec = maze_spec(tmp_path / "never", "until", attempts=1)
    with ServerPool([spec], log_dir=tmp_path, attach_running=False) as pool:
        with pytest.raises(ServerStartError) as caught:
            pool.start("Maze")
    message = str(caught.value)
    assert "did not start after 1 attempt; it exited with code 3 before it answered" in message
    assert "\n" not in message and caught.value.attempts == 1
