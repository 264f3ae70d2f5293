"""Replicas through the other doors: the rollout service (``--replicas``) and a queue
worker (``--replicas``) start an environment's replicas, spread its episodes over them
and say where they are. Real processes: the service, a worker, a nats-server with
JetStream on a free port, the reference agent, embedded servers."""

from __future__ import annotations

import asyncio
import subprocess

import httpx
import pytest

from helpers.nats_server import NatsServer
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.rollout_services import post, reference_agent, rollout_server
from helpers.run_dirs import read_episodes
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import load_default_specs

pytestmark = pytest.mark.heavy

SPECS = load_default_specs()


def envs_made(url: str, env: str = "Maze") -> int:
    """How many environments the server at ``url`` has created (the id of a new one)."""
    async def ask() -> int:
        async with EnvClient(SPECS[env].base_url(url), env=env) as client:
            return await client.create()
    return asyncio.run(ask())


def test_the_rollout_service_spreads_a_batch_over_its_replicas(tmp_path):
    agent = reference_agent(tmp_path)
    service = rollout_server(tmp_path / "service", "--node", "local", "--concurrency", "8", "--replicas", "2",
                             "--allow-base-url", agent.url)
    try:
        answer = post(service, {"env": "maze", "model": "reference", "base_url": agent.url,
                                "ids": list(range(8)), "max_round": 15})
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["rollouts"]) == 8
        urls = httpx.get(f"{service.url}/health", timeout=10).json()["servers"]["Maze"].split(", ")
        assert len(urls) == 2
        made = [envs_made(url) for url in urls]
        assert all(count >= 1 for count in made) and sum(made) == 8, made
    finally:
        service.stop()
        agent.stop()


@pytest.mark.faults
def test_a_queue_worker_spreads_its_episodes_over_its_replicas(tmp_path):
    nats = NatsServer(tmp_path / "nats", jetstream=True)
    fleet = Fleet(tmp_path / "fleet", f"{nats.url}?name=replicas")
    try:
        root = tmp_path / "project"
        suites(root, Maze="0-9")
        fleet.start("w1", profile=worker_profile(tmp_path / "worker.yaml", concurrency=4),
                    extra=("--replicas", "2"))
        fleet.wait_serving("w1")
        proc = subprocess.Popen(pytest_command("suites", f"--agentgym-queue={fleet.url}", "-q",
                                               "--agentgym-run-id=queued"),
                                cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env_with_repo())
        output = proc.communicate(timeout=300)[0]
        assert proc.returncode == 0, output
        records = read_episodes(root / "reports" / "queued")
        assert len(records) == 10 and all(r["error"] is None for r in records)
        logs = sorted((tmp_path / "fleet" / "w1").rglob("Maze-*.log"))
        assert len(logs) == 2, logs  # two server processes, a log each
        # the worker still runs: ask each of its servers how many environments it made
        made = [envs_made(f"http://127.0.0.1:{log.stem.split('-')[1]}") for log in logs]
        assert all(count >= 1 for count in made) and sum(made) == 10, made
    finally:
        fleet.stop_all()
        nats.stop()
