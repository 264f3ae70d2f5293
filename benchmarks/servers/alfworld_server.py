"""The embedded ALFWorld server's figures: start-up time, episodes/s, reset and step
times, and resident memory; optionally the original agentenv-alfworld alongside.

    python benchmarks/servers/alfworld_server.py [--starts 3] [--episodes 40] [--rounds 3]
                                                 [--original "python run_original.py {port}"]

1. Start-up: ``pytest-agentgym serve alfworld`` is started ``--starts`` times; the
   figure is the time from spawning it to the first answer of ``GET /``. The engine
   is imported on the first reset, not at start-up, so the first reset is timed too.
2. Episodes: each shipped game's walkthrough is played over HTTP, ``create -> reset ->
   walkthrough steps``, one episode at a time (the original serves one request at a
   time; so does this server), cycling through the games, ``--episodes`` per round.
   Every episode must end with reward 1 and done, or the benchmark stops. Reported:
   episodes/s, and the median time of a reset (it loads the game: PDDL translation
   by fast-downward) and of a step.
3. Memory: the server's resident set (psutil) after each round: there is no
   ``/close``, so every env of the round is still held.

``--original``: a command (``{port}`` is replaced) that runs AgentGym's original
server on the shipped games (docs/envs/alfworld.md, "Verified against the
original"); its rounds are interleaved with ours. Needs the ``alfworld`` extra.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import time

import httpx
import psutil

from pytest_agentgym.servers.embedded.alfworld_games import SCENES
from pytest_agentgym.servers.embedded.alfworld_tasks import (
    SHIPPED_DATA,
    game_file,
    missing_requirements,
)
from pytest_agentgym.process.health import free_port
from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer


def walkthroughs() -> dict[int, list[str]]:
    import json

    return {scene.index: json.loads(game_file(SHIPPED_DATA, scene.index).read_text())["walkthrough"]
            for scene in SCENES}


def start(command: tuple[str, ...] | str) -> tuple[ManagedServer, float]:
    began = time.perf_counter()
    server = ManagedServer("ALFWorld", command=command, port=free_port(), startup_timeout=300).start()
    return server, time.perf_counter() - began


def episode(http: httpx.Client, game: int, actions: list[str], resets: list[float],
            steps: list[float]) -> None:
    env_id = http.post("/create").json()["id"]
    began = time.perf_counter()
    http.post("/reset", json={"id": env_id, "game": game, "world_type": "Text"}).raise_for_status()
    resets.append(time.perf_counter() - began)
    answer: dict = {}
    for action in actions:
        began = time.perf_counter()
        answer = http.post("/step", json={"id": env_id, "action": action}).json()
        steps.append(time.perf_counter() - began)
    if answer.get("reward") != 1.0 or answer.get("done") is not True:
        raise SystemExit(f"game {game}: the walkthrough ended with {answer}; expected reward 1.0, done")


def round_of(server: ManagedServer, gold: dict[int, list[str]], count: int) -> dict[str, float]:
    games = sorted(gold)
    resets: list[float] = []
    steps: list[float] = []
    began = time.perf_counter()
    with httpx.Client(base_url=server.url, timeout=600) as http:
        for n in range(count):
            game = games[n % len(games)]
            episode(http, game, gold[game], resets, steps)
    elapsed = time.perf_counter() - began
    return {"episodes/s": count / elapsed, "reset ms": 1000 * statistics.median(resets),
            "step ms": 1000 * statistics.median(steps),
            "RSS MiB": psutil.Process(server.proc.pid).memory_info().rss / 2**20}


def spread(values: list[float], unit: str, digits: int = 2) -> str:
    return (f"median {statistics.median(values):.{digits}f} {unit} "
            f"(min {min(values):.{digits}f}, max {max(values):.{digits}f}, n={len(values)})")


def first_reset_s(server: ManagedServer, game: int) -> float:
    with httpx.Client(base_url=server.url, timeout=600) as http:
        env_id = http.post("/create").json()["id"]
        began = time.perf_counter()
        http.post("/reset", json={"id": env_id, "game": game, "world_type": "Text"}).raise_for_status()
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="server starts timed (default: 3)")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per round (default: 40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, interleaved (default: 3)")
    parser.add_argument("--original", help="command running AgentGym's original server; {port} is filled in")
    args = parser.parse_args()
    why = missing_requirements()
    if why:
        raise SystemExit(why)
    os.environ.pop("ALFWORLD_DATA", None)  # the shipped games
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    commands = {"embedded": embedded_command("alfworld")}
    if args.original:
        commands["original"] = tuple(shlex.split(args.original))

    gold = walkthroughs()
    for name, command in commands.items():
        startups, firsts, idle = [], [], 0.0
        for _ in range(args.starts):
            server, seconds = start(command)
            idle = psutil.Process(server.proc.pid).memory_info().rss / 2**20
            firsts.append(first_reset_s(server, min(gold)))
            server.stop()
            startups.append(seconds)
        print(f"{name}: start-up (spawn -> GET / answers) {spread(startups, 's')}; "
              f"first reset {spread(firsts, 's')}; idle RSS {idle:.0f} MiB")

    steps = sum(len(gold[sorted(gold)[n % len(gold)]]) for n in range(args.episodes))
    print(f"workload: {args.episodes} episodes ({steps} walkthrough steps) per round, one at a time, "
          f"games {sorted(gold)}")
    servers = {name: start(command)[0] for name, command in commands.items()}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    try:
        for _ in range(args.rounds):
            for name, server in servers.items():
                results[name].append(round_of(server, gold, args.episodes))
    finally:
        for server in servers.values():
            server.stop()
    for name, rounds in results.items():
        figures = "; ".join(f"{key} {spread([r[key] for r in rounds], '', 1 if 'ms' in key or 'MiB' in key else 2)}"
                            for key in rounds[0])
        print(f"{name}: {figures}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
