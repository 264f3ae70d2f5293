"""How well the scripted reference policies play Maze and Wordle on the embedded server.

Starts ``python -m pytest_agentgym serve lmrlgym`` on a free loopback port, plays
every Maze game 0-24 (the only usable starts) and Wordle seeds 0-99 with the
reference policy (and, for comparison, the random policy) through the real
adapters and protocol client, and prints success rate, rounds and wall time.

    python benchmarks/servers/reference_lmrlgym.py [--wordle-seeds 100] [--random-repeats 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from pytest_agentgym.model.reference import maze as maze_policy
from pytest_agentgym.model.reference import wordle as wordle_policy

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.servers.reference_play import embedded_server, play  # noqa: E402


async def measure(env: str, url: str, policy, indices, random_moves: bool, repeats: int):
    records, elapsed = await play(env, url, policy, indices, random_moves=random_moves,
                                  repeats=repeats, seed=lambda index, repeat: repeat)
    outcomes = [(r.reward, r.rounds) for r in records]
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
    with embedded_server("lmrlgym") as server:
        url = server.url
        await measure("Maze", url, maze_policy.POLICY, list(range(25)), False, 1)
        await measure("Wordle", url, wordle_policy.POLICY, list(range(wordle_seeds)), False, 1)
        if random_repeats:
            await measure("Maze", url, maze_policy.POLICY, list(range(25)), True, random_repeats)
            await measure("Wordle", url, wordle_policy.POLICY, list(range(wordle_seeds)), True,
                          random_repeats)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordle-seeds", type=int, default=100)
    parser.add_argument("--random-repeats", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.wordle_seeds, args.random_repeats))
