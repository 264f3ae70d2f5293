"""How well the scripted reference policy plays TextCraft on the embedded server.

Starts ``python -m pytest_agentgym serve textcraft`` on a free loopback port and
plays task indices with the reference policy and, for comparison, the random
policy, each episode the way AgentGym's evaluator runs it (the real adapter and
protocol client, at most 20 rounds, ``/close`` at the end). Prints the success
rate (final reward == 1), rounds, success per recipe depth and wall time.

    python benchmarks/servers/reference_textcraft.py [--tasks 100] [--all] [--random-repeats 1]

``--all`` adds a pass over all 544 tasks (depths 1-4).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.model.reference.textcraft import POLICY
from pytest_agentgym.servers.embedded.textcraft_tasks import shipped_tasks

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.servers.reference_play import embedded_server, play  # noqa: E402

SPEC = load_default_specs()["TextCraft"]


async def measure(url: str, indices: range, random_moves: bool, repeats: int) -> None:
    records, elapsed = await play("TextCraft", url, POLICY, indices, random_moves=random_moves,
                                  repeats=repeats)
    outcomes = [(r.task_index, r.reward, r.rounds) for r in records]
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
    with embedded_server("textcraft") as server:
        asyncio.run(measure(server.url, range(args.tasks), random_moves=False, repeats=1))
        if args.random_repeats:
            asyncio.run(measure(server.url, range(args.tasks), random_moves=True, repeats=args.random_repeats))
        if args.all:
            asyncio.run(measure(server.url, range(544), random_moves=False, repeats=1))


if __name__ == "__main__":
    main()
