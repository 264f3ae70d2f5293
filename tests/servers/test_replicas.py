"""An environment served by several server processes: the pool starts them, the client
spreads creates over them and keeps each episode on the replica that created its
environment, a killed replica is restarted and only its episodes are hit, and a list
of running servers can be attached to. Real embedded servers on loopback throughout."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import pytest

from helpers.embedded_servers import run_killing_a_server, start_embedded
from helpers.projects import episodes, run, run_json, suite
from helpers.waiting import wait_until
from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient, EnvUnreachable
from pytest_agentgym.envs.replicas import ReplicatedClient, replicated
from pytest_agentgym.envs.spec import EnvConfigError, load_default_specs, resolve_replicas, spec_from_mapping
from pytest_agentgym.servers.pool import ServerPool

pytestmark = pytest.mark.heavy

SPECS = load_default_specs()


def maze_pool(tmp_path: Path, replicas: int | str, **more) -> ServerPool:
    return ServerPool({"Maze": SPECS["Maze"]}, log_dir=tmp_path, attach_running=False, replicas=replicas, **more)


def client_over(pool: ServerPool, env: str = "Maze") -> EnvClient | ReplicatedClient:
    spec = SPECS[env]
    return replicated([EnvClient(spec.base_url(url), env=env) for url in pool.urls(env)])


async def walk(client, env_id: int, actions: list[str]) -> list[str]:
    return [(await client.step(env_id, action))["observation"] for action in actions]


ACTIONS = ["move up", "move left", "move down", "move right", "move up"]


# -- the pool -------------------------------------------------------------------------------------


def test_the_pool_starts_each_replica_as_its_own_process_on_its_own_port(tmp_path):
    with maze_pool(tmp_path, 3) as pool:
        servers = pool.start_replicas("Maze")
        assert len(servers) == 3
        assert len({s.url for s in servers}) == 3 and len({s.pid for s in servers}) == 3
        assert all(s.is_alive() for s in servers)
        assert pool.start("Maze") is servers[0] and pool.urls("Maze") == tuple(s.url for s in servers)
        logs = sorted(p.name for p in tmp_path.glob("Maze-*.log"))
        assert logs == sorted(f"Maze-{s.url.rsplit(':', 1)[1]}.log" for s in servers)  # a log each
    assert not any(s.is_alive() for s in servers)  # all stopped with the pool


def test_auto_follows_the_episodes_in_flight_and_stops_at_the_cores(tmp_path):
    assert resolve_replicas("auto", 1, 16) == 1
    assert resolve_replicas("auto", 64, 16) == 1 and resolve_replicas("auto", 65, 16) == 2
    assert resolve_replicas("auto", 512, 2) == 2 and resolve_replicas("auto", 512, 16) == 8
    assert resolve_replicas(None, 512, 16) == 1 and resolve_replicas(3, 1, 1) == 3
    assert maze_pool(tmp_path, "auto", concurrency=200, cores=2).replica_count("Maze") == 2
    assert maze_pool(tmp_path, "auto", concurrency=4, cores=2).replica_count("Maze") == 1
    # an environment's own replicas wins over the pool's default
    own = SPECS["Maze"].with_overrides(replicas=3)
    assert ServerPool({"Maze": own}, log_dir=tmp_path, replicas=1).replica_count("Maze") == 3


@pytest.mark.parametrize("value, says", [
    (0, "give a whole number of server processes (>= 1) or 'auto'"),
    ("many", "'many'"),
    (True, "True"),
])
def test_a_bad_replicas_value_names_the_key_and_the_fix(value, says):
    with pytest.raises(EnvConfigError) as raised:
        spec_from_mapping("Maze", {"category": "lightweight", "port": 36001, "replicas": value}, "envs.yaml")
    assert "envs.yaml: environments.Maze.replicas" in str(raised.value) and says in str(raised.value)


@pytest.mark.parametrize("url, says", [
    ([], "give one URL or a list of http:// URLs"),
    (["http://127.0.0.1:1", "ftp://x"], "give one URL or a list of http:// URLs"),
    (["http://127.0.0.1:1", "http://127.0.0.1:1"], "lists a server twice"),
])
def test_a_bad_url_list_names_the_key_and_the_fix(url, says):
    with pytest.raises(EnvConfigError) as raised:
        spec_from_mapping("Maze", {"category": "lightweight", "port": 36001, "url": url}, "envs.yaml")
    assert "environments.Maze.url" in str(raised.value) and says in str(raised.value)


# -- the client -----------------------------------------------------------------------------------


def test_env_ids_stick_to_the_replica_that_created_them(tmp_path):
    """Six episodes on two replicas, interleaved step by step: each plays exactly what the
    same task plays alone on one server (a call sent to the other replica would reach
    another task's environment, or none)."""
    with maze_pool(tmp_path, 2) as pool:
        client = client_over(pool)
        alone = EnvClient(SPECS["Maze"].base_url(pool.urls("Maze")[0]), env="Maze")

        async def play() -> tuple[list[list[str]], list[list[str]], list[int], list[int]]:
            handles = [await client.create() for _ in range(6)]
            live = list(client.live)
            for task, handle in enumerate(handles):
                await client.reset(handle, {"game": task})
            seen: list[list[str]] = [[] for _ in handles]
            for action in ACTIONS:  # interleaved: every episode moves before the next action
                for i, handle in enumerate(handles):
                    seen[i].append((await client.step(handle, action))["observation"])
            expected = []
            for task in range(6):
                env_id = await alone.create()
                await alone.reset(env_id, {"game": task})
                expected.append(await walk(alone, env_id, ACTIONS))
            await client.aclose()
            await alone.aclose()
            return seen, expected, [client.replica_of(h) for h in handles], live

        seen, expected, replicas, live = asyncio.run(play())
    assert seen == expected
    assert sorted(replicas) == [0, 0, 0, 1, 1, 1]  # spread evenly by load
    assert live == [3, 3]


def test_creates_go_to_the_least_loaded_replica_and_released_episodes_count_off(tmp_path):
    with maze_pool(tmp_path, 2) as pool:
        client = client_over(pool)

        async def play() -> list[int]:
            first = [await client.create() for _ in range(4)]  # 2 and 2
            for handle in first:
                if client.replica_of(handle) == 1:
                    client.release(handle)  # replica 1's episodes end
            nxt = [client.replica_of(await client.create()) for _ in range(2)]
            await client.aclose()
            return nxt

        assert asyncio.run(play()) == [1, 1]


def test_a_create_passes_over_a_replica_that_cannot_be_reached(tmp_path):
    with maze_pool(tmp_path, 2) as pool:
        servers = pool.start_replicas("Maze")
        client = client_over(pool)
        os.kill(servers[0].pid, signal.SIGKILL)
        wait_until(servers[0].refuses_connections, 30, "the killed replica's port refuses connections")

        async def play() -> list[int]:
            handles = [await client.create() for _ in range(3)]
            await client.aclose()
            return [client.replica_of(h) for h in handles]

        assert asyncio.run(play()) == [1, 1, 1]

        async def all_down() -> None:
            os.kill(servers[1].pid, signal.SIGKILL)
            wait_until(servers[1].refuses_connections, 30, "the second replica's port refuses connections")
            again = client_over(pool)
            try:
                await again.create()
            finally:
                await again.aclose()

        with pytest.raises(EnvUnreachable):
            asyncio.run(all_down())


# -- whole runs -----------------------------------------------------------------------------------

NODE = """\
name: replicanode
model:
  endpoints:
    - kind: reference
      latency_ms: {latency_ms}
limits: {{max_rounds: 15, episode_timeout: 60, concurrency: {concurrency}}}
envs: {envs}
"""


def project(pytester: pytest.Pytester, *, envs: str, tasks: int, latency_ms: int = 0, concurrency: int = 4) -> Path:
    node = pytester.path / "replicanode.yaml"
    node.write_text(NODE.format(envs=envs, latency_ms=latency_ms, concurrency=concurrency))
    (pytester.path / "suites").mkdir()
    suite(pytester, "maze", f"environment: Maze\ntasks: 0-{tasks - 1}\n")
    return node


def envs_made(url: str) -> int:
    """How many environments the server at ``url`` has created: the id of a new one."""
    async def ask() -> int:
        async with EnvClient(SPECS["Maze"].base_url(url), env="Maze") as client:
            return await client.create()
    return asyncio.run(ask())


@pytest.mark.faults
def test_a_replica_killed_mid_episode_is_restarted_and_only_its_episodes_are_hit(pytester):
    tasks = 24
    node = project(pytester, envs="{servers: spawn, replicas: 2}", tasks=tasks, latency_ms=40, concurrency=8)
    run_dir = pytester.path / "reports" / "killed"
    logs: list[Path] = []

    def second_replica(folder: Path) -> Path:
        logs.extend(sorted(folder.glob("Maze-*.log")))
        assert len(logs) == 2, logs
        return logs[1]

    killed = run_killing_a_server(pytester.path, ["suites", f"--agentgym-node={node}", "--agentgym-run-id=killed"],
                                  run_dir, after_records=2, pick=second_replica)
    text, killed_at = killed.output, killed.killed_at
    victim = f"http://127.0.0.1:{killed.log.stem.split('-')[1]}"
    assert killed.returncode == 0, text
    assert killed_at < tasks  # the kill landed mid-run
    records = episodes(pytester, "killed")
    assert sorted(r["task_index"] for r in records) == list(range(tasks))
    assert all(r["error"] is None for r in records), text  # each hit episode was played again and scored
    hit = [r for r in records if r["retried"]]
    assert hit, "no episode was in flight on the killed replica"
    for record in hit:  # every attempt that failed was on the killed replica, none on the other
        assert all(e["where"] == "env" and victim in e["message"] for e in record["retried"]), record["retried"]
    assert len(hit) <= 8  # at most the episodes in flight
    log = (run_dir / "logs" / "harness.log").read_text()
    # named as the replica it is (1 or 2: replica order is not port order)
    assert re.search(rf"environment server Maze \(replica [12] of 2\) died \(.*\); restarting it on {victim}", log)
    assert f"restarted at {victim}" in log
    # started again on its port (its own log says so twice); the other replica never was
    assert logs[1].read_text().count(" starting: ") == 2 and logs[0].read_text().count(" starting: ") == 1
    assert victim in run_json(pytester, "killed")["versions"]["server:Maze"].split(", ")


def test_attach_mode_takes_a_list_of_running_servers_and_uses_each(pytester, tmp_path):
    servers = [start_embedded("lmrlgym", "Maze", tmp_path) for _ in range(2)]
    try:
        listed = ", ".join(f"'{s.url}'" for s in servers)
        node = project(pytester, envs=f"{{servers: attach, overrides: {{Maze: {{url: [{listed}]}}}}}}", tasks=8)
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=attached")
        assert result.ret == 0, result.stdout.str()
        records = episodes(pytester, "attached")
        assert len(records) == 8 and all(r["error"] is None for r in records)
        made = [envs_made(s.url) for s in servers]  # environments each server had created before
        assert all(count >= 1 for count in made) and sum(made) == 8, made
        assert run_json(pytester, "attached")["versions"]["server:Maze"] == ", ".join(s.url for s in servers)
    finally:
        for server in servers:
            server.stop()


def test_a_run_with_replicas_scores_as_a_run_without(pytester):
    """Same tasks, same reference agent: the same rewards and trajectories, one replica or three."""
    node = project(pytester, envs="{servers: spawn}", tasks=12)
    one = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=one")
    three = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=three", "--agentgym-replicas=3")
    assert one.ret == 0 and three.ret == 0, three.stdout.str()

    def played(run_id: str) -> dict[int, tuple]:
        return {r["task_index"]: (r["reward"], tuple(t["feedback"] for t in r["turns"]))
                for r in episodes(pytester, run_id)}

    assert played("one") == played("three")
    assert len(run_json(pytester, "three")["versions"]["server:Maze"].split(", ")) == 3


def test_a_bad_replicas_option_is_a_usage_error(pytester):
    node = project(pytester, envs="{servers: spawn}", tasks=1)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-replicas=0")
    assert result.ret == 4
    assert "--agentgym-replicas" in result.stderr.str() + result.stdout.str()
    assert "expected a whole number of server processes (>= 1) or 'auto'" in result.stderr.str() + result.stdout.str()


def test_the_adapter_builds_each_replicas_client():
    """An adapter's own make_client (its timeouts, dialect) is used for every replica."""
    adapter = adapter_class("Maze")()
    spec = SPECS["Maze"].with_overrides(request_timeout=7.0)
    client = replicated([adapter.make_client(spec, url) for url in ("http://127.0.0.1:1", "http://127.0.0.1:2")])
    assert isinstance(client, ReplicatedClient)
    assert [r.base_url for r in client.replicas] == ["http://127.0.0.1:1/maze", "http://127.0.0.1:2/maze"]
    assert all(r.timeout == 7.0 for r in client.replicas)


def test_envs_status_probes_every_server_of_a_url_list(tmp_path):
    from pytest_agentgym.process.health import free_port
    from pytest_agentgym.servers.status import check

    server = start_embedded("lmrlgym", "Maze", tmp_path)
    try:
        dead = f"http://127.0.0.1:{free_port()}"
        both = spec_from_mapping("Maze", {"category": "lightweight", "port": 36003, "path_prefix": "/maze",
                                          "url": [server.url, dead]}, "envs.yaml")
        status = check(both, "127.0.0.1", 2.0)
        assert status.health == "down" and status.url == f"{server.url}/maze, {dead}/maze"
        assert f"no answer from {dead}" in status.detail and "envs.Maze.url" in status.detail
        alive = spec_from_mapping("Maze", {"category": "lightweight", "port": 36003, "url": [server.url]},
                                  "envs.yaml")
        assert check(alive, "127.0.0.1", 2.0).health == "up"
    finally:
        server.stop()


def test_an_episode_whose_reset_fails_after_its_create_is_counted_off_its_replica(tmp_path):
    """Maze's game 25 is the goal cell, whose reset errors: the create succeeded on a replica,
    the opening failed; the replica's load goes back to 0 all the same."""
    from helpers.model_faults import FakeEndpoint, ok
    from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest, run_episode
    from pytest_agentgym.engine.model import ModelAdapter
    from pytest_agentgym.model.call_settings import Sampling
    from pytest_agentgym.model.client import EndpointClient

    spec = SPECS["Maze"]
    with maze_pool(tmp_path, 2) as pool, FakeEndpoint(script=[ok("Action: move up")]) as fake:
        client = client_over(pool)

        async def play() -> tuple[list, list[int]]:
            chat = ModelAdapter(EndpointClient(fake.base_url, "fake-model", request_timeout=30), Sampling())
            records = []
            for task in (25, 0):
                request = EpisodeRequest(run_id="r", spec=spec, task_index=task, repeat=0,
                                         limits=EpisodeLimits(max_rounds=2, timeout_s=60, retries=0))
                records.append(await run_episode(request, adapter_class("Maze")(), client, chat))
            await chat.aclose()
            await client.aclose()
            return records, list(client.live)

        records, live = asyncio.run(play())
    assert records[0].error is not None and records[0].error.where == "env"  # the reset of game 25
    assert records[1].error is None
    assert live == [0, 0]
