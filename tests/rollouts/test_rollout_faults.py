"""The rollout service when things break, with real processes: an environment
server killed with SIGKILL, and the service's episode events on a real NATS."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from helpers.nats_server import NatsServer, Subscriber
from helpers.rollout_services import post, reference_agent, rollout_server
from helpers.run_dirs import read_episodes

from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer, free_port

ATTACH_NODE = """\
name: attached
model: {{endpoints: [{{kind: reference}}], sampling: {{temperature: 0.0}}}}
limits: {{max_rounds: 20, episode_timeout: 60, concurrency: 2}}
envs:
  servers: attach
  overrides: {{TextCraft: {{url: "{url}", startup_timeout: 3}}}}
"""


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    server = reference_agent(tmp_path_factory.mktemp("agent"))
    yield server
    server.stop()


@pytest.mark.faults
def test_a_killed_env_server_gives_per_rollout_errors_not_a_failed_batch(agent, tmp_path):
    env = ManagedServer("TextCraft", command=embedded_command("textcraft"), port=free_port(),
                        log_path=tmp_path / "textcraft.log").start()
    (tmp_path / "attached.yaml").write_text(ATTACH_NODE.format(url=env.url))
    service = rollout_server(tmp_path / "service", "--node", str(tmp_path / "attached.yaml"), "--allow-base-url",
                             agent.url)
    try:
        body = {"env": "TextCraft", "model": "reference", "base_url": agent.url, "ids": [0, 1], "max_round": 10}
        before = post(service, body)
        assert before.status_code == 200 and [r["reward"] for r in before.json()["rollouts"]] == [1.0, 1.0]

        env.proc.kill()  # SIGKILL: the server is gone, and attached servers are not restarted
        env.proc.wait(timeout=10)
        after = post(service, {**body, "ids": [2, 3, 4]})
        assert after.status_code == 200, after.text
        rollouts = after.json()["rollouts"]
        assert [r["id"] for r in rollouts] == [2, 3, 4]
        for rollout in rollouts:
            assert rollout["reward"] is None and rollout["success"] is False and rollout["messages"] == []
            assert rollout["error"]["where"] == "env"
            assert f"TextCraft at {env.url}" in rollout["error"]["message"]
            # the engine's retry asked for the server back, which an attached one cannot be
            assert "restart it where it runs; so the episode was not retried" in rollout["error"]["message"]

        run_dir = tmp_path / "service" / "reports" / "rollouts"
        recorded = read_episodes(run_dir)
        assert [r["outcome"] for r in recorded] == ["passed"] * 2 + ["error"] * 3
        assert httpx.get(f"{service.url}/health").json()["status"] == "ok"  # the service itself is fine
    finally:
        service.stop()
        env.stop()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished-with-errors" and info["counts"] == {"episodes": 5, "errors": 3, "duplicates": 0}


@pytest.mark.faults
def test_an_env_server_that_cannot_start_errors_each_rollout(agent, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    (tmp_path / "attached.yaml").write_text(ATTACH_NODE.format(url=dead))
    service = rollout_server(tmp_path / "service", "--node", str(tmp_path / "attached.yaml"), "--allow-base-url",
                             agent.url)
    try:
        answer = post(service, {"env": "textcraft", "model": "reference", "base_url": agent.url, "ids": [0, 1]})
        assert answer.status_code == 200, answer.text
        errors = [r["error"] for r in answer.json()["rollouts"]]
        assert len(errors) == 2 and all(e["where"] == "env" and dead in e["message"] for e in errors)
        assert [r["outcome"] for r in read_episodes(tmp_path / "service" / "reports" / "rollouts")] == ["error"] * 2
    finally:
        service.stop()


def test_each_rollout_is_an_episode_event_on_nats(agent, tmp_path):
    try:
        nats = NatsServer(tmp_path / "nats")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    service = None
    try:
        async def scenario() -> list:
            nonlocal service
            async with Subscriber(nats.url) as seen:
                service = await asyncio.to_thread(rollout_server, tmp_path / "service", "--nats", nats.url,
                                                  "--allow-base-url", agent.url, run_id="published")
                body = {"env": "TextCraft", "model": "reference", "base_url": agent.url, "ids": [0, 1], "n": 2,
                        "sampling": {"temperature": 1.0}}
                answer = await asyncio.to_thread(post, service, body)
                assert answer.status_code == 200
                await asyncio.to_thread(service.stop)  # SIGTERM: the run's final status goes out too
                return await seen.wait_for(6)

        received = asyncio.run(scenario())
    finally:
        if service is not None:
            service.stop()
        nats.stop()
    completed = [p for s, _, p in received if s == "agentgym.episode.completed.v1"]
    assert sorted((p["task_index"], p["repeat"]) for p in completed) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert all(p["run_id"] == "published" and p["reward"] == 1.0 and p["node"] == "local" for p in completed)
    statuses = [p["status"] for s, _, p in received if s == "agentgym.field.status.v1"]
    assert statuses == ["started", "finished"]
