"""How long does aggregate.summarize take over 10,000 episodes?

    python benchmarks/data/aggregate_10k.py [--episodes 10000] [--repeats 7]

Builds 10,000 episode records in memory (four lightweight environments,
rewards drawn with a fixed seed: BabyAI-style fractions, 0/1 elsewhere, 5%
errors) and times summarize() on them: once cold (the first call reads the
shipped configs/envs.yaml for the reward ranges) and the median of
--repeats warm calls, with the ranges looked up and with ranges given.
Also the time to import pytest_agentgym.results.aggregate, and whether scipy was
imported (it must not be). Numbers depend on the machine; the CPU count is
printed next to them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    began = time.perf_counter()
    from pytest_agentgym.results import aggregate
    imported = time.perf_counter() - began
    from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

    rng = random.Random(0)
    envs = ("BabyAI", "TextCraft", "Maze", "Wordle")
    error = ErrorInfo("EnvServerError", "POST /step answered 500", "env")
    records = []
    for n in range(args.episodes):
        env = envs[n % 4]
        failed = rng.random() < 0.05
        reward = None if failed else (
            round(rng.choice([0.0, rng.uniform(0.5, 0.95)]), 4) if env == "BabyAI" else float(rng.random() < 0.7))
        records.append(EpisodeRecord(run_id="bench", env=env, task_index=n, repeat=0, reward=reward,
                                     success=bool(reward), rounds=rng.randint(1, 20),
                                     stop_reason="error" if failed else "done", started_at="t",
                                     duration_s=rng.uniform(1, 10), model="m", error=error if failed else None))

    def timed(**options) -> float:
        began = time.perf_counter()
        aggregate.summarize(records, **options)
        return time.perf_counter() - began

    cold = timed()
    warm = statistics.median(timed() for _ in range(args.repeats))
    given = statistics.median(timed(reward_ranges={e: (0.0, 1.0) for e in envs}) for _ in range(args.repeats))
    print(f"cpus {os.cpu_count()}, {args.episodes} episodes")
    print(f"import aggregate  {imported * 1000:8.1f} ms")
    print(f"summarize cold    {cold * 1000:8.1f} ms  (reads configs/envs.yaml once)")
    print(f"summarize warm    {warm * 1000:8.1f} ms  (median of {args.repeats})")
    print(f"ranges given      {given * 1000:8.1f} ms  (median of {args.repeats})")
    print(f"scipy imported    {'yes' if 'scipy' in sys.modules else 'no'}")
    for env, summary in aggregate.summarize(records).items():
        low, high = summary.reward_ci95
        print(f"  {env:<10} mean {summary.mean_reward:.3f} [{low:.3f}, {high:.3f}]  {summary.reward_ci_method}")


if __name__ == "__main__":
    main()
