"""How well the scripted reference policy plays BabyAI on the embedded server.

Starts ``python -m pytest_agentgym serve babyai`` on a free loopback port, plays
task indices 0..N-1 (default 100) with the reference policy and, for
comparison, the random policy, each episode the way AgentGym's evaluator runs it
(the real adapter and protocol client, at most 20 rounds, ``/close`` at the end),
and prints the success rate (final reward > 0), the mean final reward, rounds,
per-level successes and wall time.

    python benchmarks/reference_babyai.py [--tasks 100] [--random-repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections import defaultdict

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.model.reference.babyai import POLICY
from pytest_agentgym.servers.embedded.babyai import level_of
from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.servers.process import ManagedServer


def start_server() -> ManagedServer:
    """The embedded BabyAI server on a free loopback port, healthy (its output,
    minigrid's rejection sampling among it, goes to a log file)."""
    return ManagedServer("babyai", command=embedded_command("babyai"), startup_timeout=60).start()


async def play(client: EnvClient, index: int, random_moves: bool, seed: int) -> tuple[float, int]:
    """One episode; returns (final reward as the AgentGym client reports it, rounds)."""
    spec = load_default_specs()["BabyAI"]
    adapter = adapter_class("BabyAI")()
    rng = random.Random(seed)
    opening = await adapter.open(client, index)
    messages = list(opening.messages)
    reward, rounds = 0.0, 0
    try:
        while rounds < spec.max_rounds:
            reply = (POLICY.random_reply if random_moves else POLICY.reply)(messages, rng)
            parsed = adapter.parse_action(reply)
            rounds += 1
            if parsed.action is None:  # refused client-side; the server is not called
                observation, reward, done = parsed.rejection or "", 0.0, False
            else:
                result = adapter.read_step(await client.step(opening.env_id, parsed.action))
                observation, reward, done = result.observation, result.reward, result.done
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": observation}]
            if done:
                break
    finally:
        await client.close(opening.env_id)
    return reward, rounds


async def measure(url: str, tasks: int, random_moves: bool, repeats: int) -> None:
    spec = load_default_specs()["BabyAI"]
    outcomes: list[tuple[int, float, int]] = []
    started = time.perf_counter()
    async with EnvClient(spec.base_url(url), env="BabyAI", dialect=spec.dialect) as client:
        for repeat in range(repeats):
            for index in range(tasks):
                reward, rounds = await play(client, index, random_moves, seed=index * 1000 + repeat)
                outcomes.append((index, reward, rounds))
    elapsed = time.perf_counter() - started
    wins = [reward > 0 for _, reward, _ in outcomes]
    by_level: dict[str, list[bool]] = defaultdict(list)
    for index, reward, _ in outcomes:
        by_level[level_of(index)[0].removeprefix("BabyAI-").removesuffix("-v0")].append(reward > 0)
    name = "random" if random_moves else "reference"
    print(f"BabyAI {name:9s} tasks 0-{tasks - 1} x{repeats}: "
          f"success {sum(wins)}/{len(wins)} = {100 * sum(wins) / len(wins):.1f}%  "
          f"mean reward {statistics.mean(r for _, r, _ in outcomes):.3f}  "
          f"mean rounds {statistics.mean(n for _, _, n in outcomes):.1f}  "
          f"wall {elapsed:.1f} s ({1000 * elapsed / len(outcomes):.0f} ms/episode)")
    if not random_moves:
        print("  per level: " + ", ".join(f"{level} {sum(v)}/{len(v)}" for level, v in by_level.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="task indices 0..N-1 (default: 100)")
    parser.add_argument("--random-repeats", type=int, default=1,
                        help="repeats of the random policy (default: 1; 0 skips it)")
    args = parser.parse_args()
    server = start_server()
    try:
        asyncio.run(measure(server.url, args.tasks, random_moves=False, repeats=1))
        if args.random_repeats:
            asyncio.run(measure(server.url, args.tasks, random_moves=True, repeats=args.random_repeats))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
