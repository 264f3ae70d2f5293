"""How well the scripted reference policy plays BabyAI on the embedded server.

Starts ``python -m pytest_agentgym serve babyai`` on a free loopback port, plays
task indices 0..N-1 (default 100) with the reference policy and, for
comparison, the random policy, each episode the way AgentGym's evaluator runs it
(the real adapter and protocol client, at most 20 rounds, ``/close`` at the end),
and prints the success rate (final reward > 0), the mean final reward, rounds,
per-level successes and wall time.

    python benchmarks/servers/reference_babyai.py [--tasks 100] [--random-repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from pytest_agentgym.model.reference.babyai import POLICY
from pytest_agentgym.servers.embedded.babyai_levels import level_of

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.servers.reference_play import embedded_server, play  # noqa: E402


async def measure(url: str, tasks: int, random_moves: bool, repeats: int) -> None:
    records, elapsed = await play("BabyAI", url, POLICY, range(tasks), random_moves=random_moves,
                                  repeats=repeats)
    wins = [r.success for r in records]  # success rule of configs/envs.yaml: reward > 0
    by_level: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_level[level_of(r.task_index)[0].removeprefix("BabyAI-").removesuffix("-v0")].append(r.success)
    name = "random" if random_moves else "reference"
    print(f"BabyAI {name:9s} tasks 0-{tasks - 1} x{repeats}: "
          f"success {sum(wins)}/{len(wins)} = {100 * sum(wins) / len(wins):.1f}%  "
          f"mean reward {statistics.mean(r.reward for r in records):.3f}  "
          f"mean rounds {statistics.mean(r.rounds for r in records):.1f}  "
          f"wall {elapsed:.1f} s ({1000 * elapsed / len(records):.0f} ms/episode)")
    if not random_moves:
        print("  per level: " + ", ".join(f"{level} {sum(v)}/{len(v)}" for level, v in by_level.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="task indices 0..N-1 (default: 100)")
    parser.add_argument("--random-repeats", type=int, default=1,
                        help="repeats of the random policy (default: 1; 0 skips it)")
    args = parser.parse_args()
    with embedded_server("babyai") as server:
        asyncio.run(measure(server.url, args.tasks, random_moves=False, repeats=1))
        if args.random_repeats:
            asyncio.run(measure(server.url, args.tasks, random_moves=True, repeats=args.random_repeats))


if __name__ == "__main__":
    main()
