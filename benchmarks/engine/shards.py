"""How even is the shard split, and how long does `pytest-agentgym merge` take?

    python benchmarks/engine/shards.py [--episodes 10000] [--shards 4] [--repeats 5]

1. Balance: the lightweight battery's selection (suites/lightweight on the local node: its
   tasks, each environment's max rounds under the node's cap as the expected cost), split
   into N = 2..8 shards by pytest_agentgym.run.shards.assign (cost-balanced) and, for contrast,
   two splits by count: round-robin in collection order, and N contiguous blocks of equal
   count (how a split by item count alone works). Printed per N: the largest shard's
   expected cost over the mean (1.000 is perfect) for each.
2. Merge: --shards shard directories holding --episodes synthetic records (three turns
   each, the four lightweight environments, 5% errors), written once; then merge() into a
   fresh --out, --repeats times, without the report (its cost is report_10k.py's).
   Printed: the median and the spread (min-max) of the merge's wall time, and per 1,000
   episodes. Numbers depend on the machine; the CPU count and load are printed next to them.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md


def lightweight_costs() -> dict[tuple[str, int, int], float]:
    import yaml

    from pytest_agentgym.config.suites import episodes, load_suite
    from pytest_agentgym.envs.spec import DEFAULT_ENVS_FILE, load_specs

    specs = load_specs(DEFAULT_ENVS_FILE)
    node = yaml.safe_load((DEFAULT_ENVS_FILE.parent / "nodes" / "local.yaml").read_text())
    cap = (node.get("limits") or {}).get("max_rounds")
    costs = {}
    for path in sorted((REPO / "suites" / "lightweight").glob("*.yaml")):
        suite = load_suite(path, "local", list(specs))
        rounds = suite.max_rounds or specs[suite.environment].max_rounds
        rounds = min(rounds, cap) if cap else rounds
        for task, repeat in episodes(suite, None, None):
            costs[(suite.environment, task, repeat)] = float(rounds)
    return costs


def balance() -> None:
    from pytest_agentgym.run.shards import assign

    costs = lightweight_costs()
    per_env = {}
    for (env, _, _), cost in costs.items():
        per_env.setdefault(env, [0, cost])[0] += 1
    print("selection: " + ", ".join(f"{env} {n} x {c:g} rounds" for env, (n, c) in per_env.items())
          + f" = {len(costs)} episodes")
    print(f"{'N':>3} {'cost-balanced':>14} {'round-robin':>12} {'blocks':>8}   (largest shard's cost / mean)")
    for count in range(2, 9):
        split = assign(costs, count)
        robin = {key: i % count + 1 for i, key in enumerate(costs)}
        blocks = {key: i * count // len(costs) + 1 for i, key in enumerate(costs)}
        row = []
        for owner in (split, robin, blocks):
            loads = [sum(c for k, c in costs.items() if owner[k] == s) for s in range(1, count + 1)]
            row.append(max(loads) / statistics.mean(loads))
        print(f"{count:>3} {row[0]:>14.3f} {row[1]:>12.3f} {row[2]:>8.3f}")


def write_shards(root: Path, episodes: int, count: int) -> list[Path]:
    from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo, Turn
    from pytest_agentgym.run.shards import Shard, assign, shard_record
    from pytest_agentgym.results.store import RunDir
    from pytest_agentgym.run.plans import EnvPlan, plan_record

    rng = random.Random(0)
    envs = {"BabyAI": 20.0, "TextCraft": 20.0, "Maze": 15.0, "Wordle": 8.0}
    per_env = episodes // len(envs)
    costs = {(env, task, 1): cost for env, cost in envs.items() for task in range(per_env)}
    owner = assign(costs, count)
    plans = {env: plan_record(EnvPlan(max_rounds=int(cost))) for env, cost in envs.items()}
    turns = tuple(Turn(i, "observation " * 20, "Action: go", "go", "ok", 0.0, i == 2, 0.1, 0.01) for i in range(3))
    paths = []
    for index in range(1, count + 1):
        run_dir = RunDir(root / "run" / f"shard-{index}-of-{count}")
        run_dir.path.mkdir(parents=True)
        for key in (k for k, i in owner.items() if i == index):
            error = ErrorInfo("EnvServerError", "boom", "env") if rng.random() < 0.05 else None
            reward = None if error else float(rng.random() < 0.7)
            run_dir.append_episode(EpisodeRecord(
                run_id="run", env=key[0], task_index=key[1], repeat=1, reward=reward, success=bool(reward),
                rounds=3, stop_reason="error" if error else "done", started_at="2026-01-01T00:00:00+00:00",
                duration_s=1.0, model="m", turns=() if error else turns, error=error,
                outcome="error" if error else ("passed" if reward else "unsolved")))
        run_dir.write_info(RunInfo(
            run_id="run", started_at="2026-01-01T00:00:00+00:00", node="bench", model="m", endpoint="e",
            endpoint_kind="reference", environments=tuple(envs), command="pytest suites", status="finished",
            ended_at="2026-01-01T01:00:00+00:00",
            shard=shard_record(Shard(index, count, "bench"), costs, plans)))
        paths.append(run_dir.path)
    return paths


def merge_time(episodes: int, count: int, repeats: int) -> None:
    from pytest_agentgym.run.merge import merge

    with tempfile.TemporaryDirectory() as tmp:
        paths = write_shards(Path(tmp), episodes, count)
        times = []
        for i in range(repeats):
            out = Path(tmp) / f"out-{i}"
            began = time.perf_counter()
            merged = merge(paths, out, report=False)
            times.append(time.perf_counter() - began)
            assert merged.info.counts["episodes"] == episodes // 4 * 4, merged.info.counts
            shutil.rmtree(out)
        median = statistics.median(times)
        print(f"merge of {count} shards, {episodes} episodes (no report), {repeats} runs: median {median:.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}), {median / episodes * 1000:.3f} s per 1,000 episodes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    balance()
    merge_time(args.episodes, args.shards, args.repeats)


if __name__ == "__main__":
    main()
