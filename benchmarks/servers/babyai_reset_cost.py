"""What the original's double reset costs the embedded BabyAI server.

The embedded server builds each task as AgentGym's server does: a fresh env,
reset twice with the task's seed where the first reset can matter (the LevelGen
levels; servers/embedded/babyai_levels.py). This times, in process, building and
resetting data_idx 0..N-1 with one reset (A: what the server did before) and the
way it does now (B), interleaved per task and repeated, and prints the medians
and spread of the per-round totals.

    python benchmarks/servers/babyai_reset_cost.py [--tasks 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

from pytest_agentgym.servers.embedded.babyai_levels import level_of, make_level, reset_like_original


def one_reset(data_idx: int) -> None:
    level, seed = level_of(data_idx)
    make_level(level).reset(seed=seed)


def as_original(data_idx: int) -> None:
    level, seed = level_of(data_idx)
    reset_like_original(make_level(level), seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    totals = {"one reset": [], "as original": []}
    with contextlib.redirect_stdout(io.StringIO()):  # minigrid prints its rejections
        for data_idx in range(40):  # warm-up: imports, registry, caches
            as_original(data_idx)
        for round_number in range(args.rounds):
            spent = {"one reset": 0.0, "as original": 0.0}
            for data_idx in range(args.tasks):
                order = [("one reset", one_reset), ("as original", as_original)]
                if (data_idx + round_number) % 2:
                    order.reverse()
                for name, build in order:
                    start = time.perf_counter()
                    build(data_idx)
                    spent[name] += time.perf_counter() - start
            for name, seconds in spent.items():
                totals[name].append(seconds)
    for name, rounds in totals.items():
        per_task = [1000 * s / args.tasks for s in rounds]
        print(f"{name:11}: median {statistics.median(per_task):.2f} ms per task "
              f"(min {min(per_task):.2f}, max {max(per_task):.2f}; {args.rounds} rounds x {args.tasks} tasks)")
    ratios = [b / a for a, b in zip(totals["one reset"], totals["as original"])]
    print(f"B/A        : median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
