"""How well the scripted reference policies play Maze and Wordle on the embedded server.

Starts ``python -m pytest_agentgym serve lmrlgym`` on a free loopback port, plays
every Maze game 0-24 (the only usable starts) and Wordle seeds 0-99 with the
reference policy (and, for comparison, the random policy) through the real
adapters and protocol client, and prints success rate, rounds and wall time.

    python benchmarks/reference_lmrlgym.py [--wordle-seeds 100] [--random-repeats 4]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import statistics
import subprocess
import sys
import time

import httpx

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.model.reference import maze as maze_policy
from pytest_agentgym.model.reference import wordle as wordle_policy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentgym", "serve", "lmrlgym",
         "--host", "127.0.0.1", "--port", str(port)],
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/", timeout=1.0)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.05)  # polling for readiness
    proc.terminate()
    raise SystemExit(f"lmrlgym server did not answer at {url} within 60 s")


async def play(env: str, client: EnvClient, policy, index: int, random_moves: bool, seed: int):
    """One episode as AgentGym's evaluator runs it; returns (final reward, rounds)."""
    spec = load_default_specs()[env]
    adapter = adapter_class(env)()
    rng = random.Random(seed)
    opening = await adapter.open(client, index)
    messages = list(opening.messages)
    reward, rounds = 0.0, 0
    while rounds < spec.max_rounds:
        reply = (policy.random_reply if random_moves else policy.reply)(messages, rng)
        action = adapter.parse_action(reply).action
        result = adapter.read_step(await client.step(opening.env_id, action))
        rounds += 1
        reward = result.reward
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": result.observation}]
        if result.done:
            break
    return reward, rounds


async def measure(env: str, url: str, policy, indices, random_moves: bool, repeats: int):
    """Episodes one after another through one client (creating an httpx client costs
    far more than an episode, so it is kept out of the figure)."""
    spec = load_default_specs()[env]
    async with EnvClient(spec.base_url(url), env=env, dialect=spec.dialect) as client:
        started = time.perf_counter()
        outcomes = [
            await play(env, client, policy, index, random_moves, seed=repeat)
            for repeat in range(repeats) for index in indices
        ]
        elapsed = time.perf_counter() - started
    wins = [rounds for reward, rounds in outcomes if reward == 1]
    label = "random   " if random_moves else "reference"
    print(
        f"{env:6} {label} tasks {indices[0]}-{indices[-1]} x{repeats}: "
        f"success {len(wins)}/{len(outcomes)} = {len(wins) / len(outcomes):.1%}; "
        f"rounds when solved mean {statistics.mean(wins) if wins else float('nan'):.2f} "
        f"max {max(wins) if wins else '-'}; "
        f"{1000 * elapsed / len(outcomes):.1f} ms/episode"
    )


async def main(wordle_seeds: int, random_repeats: int) -> None:
    proc, url = start_server()
    try:
        await measure("Maze", url, maze_policy.POLICY, list(range(25)), False, 1)
        await measure("Wordle", url, wordle_policy.POLICY, list(range(wordle_seeds)), False, 1)
        if random_repeats:
            await measure("Maze", url, maze_policy.POLICY, list(range(25)), True, random_repeats)
            await measure("Wordle", url, wordle_policy.POLICY, list(range(wordle_seeds)), True,
                          random_repeats)
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordle-seeds", type=int, default=100)
    parser.add_argument("--random-repeats", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.wordle_seeds, args.random_repeats))
