"""How well the scripted reference policy plays TextCraft on the embedded server.

Starts ``python -m pytest_agentgym serve textcraft`` on a free loopback port and
plays task indices with the reference policy and, for comparison, the random
policy, each episode the way AgentGym's evaluator runs it (the real adapter and
protocol client, at most 20 rounds, ``/close`` at the end). Prints the success
rate (final reward == 1), rounds, success per recipe depth and wall time.

    python benchmarks/reference_textcraft.py [--tasks 100] [--all] [--random-repeats 1]

``--all`` adds a pass over all 544 tasks (depths 1-4).
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
from collections import defaultdict

import httpx

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.model.reference.textcraft import POLICY
from pytest_agentgym.servers.embedded.textcraft_tasks import shipped_tasks

SPEC = load_default_specs()["TextCraft"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentgym", "serve", "textcraft",
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
    raise SystemExit(f"textcraft server did not answer at {url} within 60 s")


async def play(client: EnvClient, index: int, random_moves: bool, seed: int) -> tuple[float, int]:
    """One episode; returns (final reward, rounds)."""
    adapter = adapter_class("TextCraft")()
    rng = random.Random(seed)
    opening = await adapter.open(client, index)
    messages = list(opening.messages)
    reward, rounds = 0.0, 0
    try:
        while rounds < SPEC.max_rounds:
            reply = (POLICY.random_reply if random_moves else POLICY.reply)(messages, rng)
            parsed = adapter.parse_action(reply)
            rounds += 1
            if parsed.action is None:  # refused client-side; the server is not called
                observation, reward, done = parsed.rejection, 0.0, False
            else:
                result = adapter.read_step(await client.step(opening.env_id, parsed.action))
                observation, reward, done = result.observation, result.reward, result.done
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": observation}]
            if done:
                break
    finally:
        await client.close(opening.env_id)
    return reward, rounds


async def measure(url: str, indices: range, random_moves: bool, repeats: int) -> None:
    outcomes: list[tuple[int, float, int]] = []
    started = time.perf_counter()
    async with EnvClient(SPEC.base_url(url), env="TextCraft", dialect=SPEC.dialect) as client:
        for repeat in range(repeats):
            for index in indices:
                reward, rounds = await play(client, index, random_moves, seed=index * 1000 + repeat)
                outcomes.append((index, reward, rounds))
    elapsed = time.perf_counter() - started
    wins = [reward == 1 for _, reward, _ in outcomes]
    tasks = shipped_tasks()
    by_depth: dict[int, list[bool]] = defaultdict(list)
    for index, reward, _ in outcomes:
        by_depth[tasks.book.depth(tasks.goal(index))].append(reward == 1)
    won_rounds = [n for _, reward, n in outcomes if reward == 1]
    name = "random" if random_moves else "reference"
    print(f"TextCraft {name:9s} tasks {indices.start}-{indices.stop - 1} x{repeats}: "
          f"success {sum(wins)}/{len(wins)} = {100 * sum(wins) / len(wins):.1f}%  "
          f"mean rounds {statistics.mean(n for _, _, n in outcomes):.1f} "
          f"(won: {statistics.mean(won_rounds) if won_rounds else 0:.1f})  "
          f"wall {elapsed:.1f} s ({1000 * elapsed / len(outcomes):.0f} ms/episode)")
    print("  per depth: " + ", ".join(
        f"{depth}: {sum(v)}/{len(v)}" for depth, v in sorted(by_depth.items())))
    if not random_moves:
        lost = [i for i, reward, _ in outcomes if reward != 1]
        if lost:
            print(f"  not won within {SPEC.max_rounds} rounds: "
                  + ", ".join(f"{i} ({tasks.goal(i).removeprefix('minecraft:')})" for i in lost))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="task indices 0..N-1 (default: 100)")
    parser.add_argument("--all", action="store_true", help="also play all 544 tasks (default: off)")
    parser.add_argument("--random-repeats", type=int, default=1,
                        help="repeats of the random policy (default: 1; 0 skips it)")
    args = parser.parse_args()
    proc, url = start_server()
    try:
        asyncio.run(measure(url, range(args.tasks), random_moves=False, repeats=1))
        if args.random_repeats:
            asyncio.run(measure(url, range(args.tasks), random_moves=True, repeats=args.random_repeats))
        if args.all:
            asyncio.run(measure(url, range(544), random_moves=False, repeats=1))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
