"""Calibration of ``pytest-agentgym trend``: how often an unchanged model fails the
trend, and how often a real drop at the last checkpoint does.

Simulates trends *in the results format*: per trend, 10 checkpoints of a model
on the lightweight battery's shape (BabyAI 90, TextCraft 100, Maze 25, Wordle 25
tasks), written as real run directories (run.json with ``checkpoint ckpt/step-N``
and episodes.jsonl, through :func:`benchmarks.gates.simulated_runs.write_run`'s format)
and judged by :func:`pytest_agentgym.report.trend.build_trend`, the function the
CLI calls; ``Trend.exit_code()`` is the CLI's exit status. Every task has a
success probability p ~ Beta(a, b), the same at every checkpoint (no true
change); each checkpoint's episodes succeed with p independently. In the power
cells the last checkpoint succeeds with max(p - 0.10, 0) in one environment.

Per cell it prints the share of trends that exit 1 (no change: the false-alarm
rate of the whole trend, wanted at most alpha = 5%; a drop: the power) and, on
the same trends, two rules the exit status does NOT follow, for reference: the
old rule (the last run against the previous run OR the best so far) and "any
step" (any run judged regressed against its previous run or its best so far).

    python benchmarks/gates/trend_calibration.py               # 300 trends per cell, 2 processes
    python benchmarks/gates/trend_calibration.py --sims 60     # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from pytest_agentgym.report.trend import FAILING, build_trend  # noqa: E402
from pytest_agentgym.results import fingerprint  # noqa: E402
from pytest_agentgym.results.records import EpisodeRecord, RunInfo  # noqa: E402
from pytest_agentgym.results.store import RunDir  # noqa: E402

#: The lightweight battery's shape (tasks per environment).
BATTERY = {"BabyAI": 90, "TextCraft": 100, "Maze": 25, "Wordle": 25}
DISTRIBUTIONS = {"Beta(2,2)": (2.0, 2.0), "Beta(0.3,0.3)": (0.3, 0.3)}
STEPS = 10
DROP = 0.10
#: cells: (label, environment whose last checkpoint drops, or None)
CELLS = (("no change", None), ("last -10 pts BabyAI (90)", "BabyAI"), ("last -10 pts Maze (25)", "Maze"))


def write_run(root: Path, run_id: str, step: int, outcomes: dict[str, np.ndarray]) -> Path:
    """A finished run directory at checkpoint ``ckpt/step-<step>``: one episode per
    task of each environment, reward 1.0 on success, else 0.0."""
    run_dir = RunDir(root / run_id)
    if run_dir.path.exists():
        shutil.rmtree(run_dir.path)
    run_dir.path.mkdir(parents=True)
    checkpoint = f"ckpt/step-{step}"
    envs = {env: {"max_rounds": 15, "sampling": {"temperature": 0.0}, "prompt_sha256": "0" * 64,
                  "server": f"simulated {env}"} for env in outcomes}
    run_dir.write_info(RunInfo(
        run_id=run_id, started_at=f"2026-01-01T00:{step:02d}:00Z", node="simulated", model="simulated",
        endpoint="none", endpoint_kind="simulated", environments=tuple(outcomes), command="trend_calibration",
        versions={"pytest-agentgym": "simulated"}, status="finished", checkpoint=checkpoint,
        fingerprint=fingerprint.build(model="simulated", endpoint_kind="simulated", checkpoint=checkpoint,
                                      envs=envs)))
    template = EpisodeRecord(run_id=run_id, env="", task_index=0, repeat=1, reward=0.0, success=False,
                             rounds=1, stop_reason="done", started_at="2026-01-01T00:00:00Z",
                             duration_s=0.0, model="simulated").to_dict()
    lines = []
    for env, wins in outcomes.items():
        for task, success in enumerate(wins.tolist()):
            lines.append(json.dumps(dict(template, env=env, task_index=task, success=success,
                                         reward=1.0 if success else 0.0,
                                         outcome="passed" if success else "unsolved",
                                         episode_id=f"{run_id}:{env}:{task}:r1")))
    run_dir.episodes_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir.path


def simulate(dist: tuple[float, float], drop_env: str | None, sims: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(("trends", "exit1", "old", "any_step", "exit1_error"), 0)
    with tempfile.TemporaryDirectory(prefix="trend-calibration-") as tmp:
        root = Path(tmp)
        for _ in range(sims):
            p = {env: rng.beta(*dist, size=n) for env, n in BATTERY.items()}
            paths = []
            for step in range(1, STEPS + 1):
                q = {env: (np.clip(p[env] - DROP, 0, 1) if step == STEPS and env == drop_env else p[env])
                     for env in BATTERY}
                outcomes = {env: rng.random(n) < q[env] for env, n in BATTERY.items()}
                paths.append(write_run(root, f"step-{step}", step, outcomes))
            trend = build_trend(paths)  # what `pytest-agentgym trend` runs; exit_code() is its status
            counts["trends"] += 1
            counts["exit1"] += trend.exit_code()
            last = [entries[-1] for entries in trend.envs.values()]
            counts["exit1_error"] += any(e.vs_previous is not None and e.vs_previous.verdict == "error" for e in last)
            counts["old"] += any(c is not None and c.verdict in FAILING for e in last for c in (e.vs_previous, e.vs_best))
            counts["any_step"] += any(c is not None and c.verdict in FAILING for entries in trend.envs.values()
                                      for e in entries for c in (e.vs_previous, e.vs_best))
    return counts


def _job(args: tuple) -> tuple[str, str, dict]:
    dist_name, cell, drop_env, sims, seed = args
    return dist_name, cell, simulate(DISTRIBUTIONS[dist_name], drop_env, sims, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=300, help="simulated trends per cell (default 300)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=23, help="seed (default 23)")
    parser.add_argument("--output", default=None, help="write the table as JSON here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    chunks = max(1, args.workers)
    jobs = [(d, cell, env, args.sims // chunks + (i < args.sims % chunks), args.seed * 1000 + k * 10 + i)
            for k, (d, (cell, env)) in enumerate((d, c) for d in DISTRIBUTIONS for c in CELLS)
            for i in range(chunks)]
    totals: dict[tuple[str, str], dict[str, int]] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for dist_name, cell, counts in pool.map(_job, jobs):
            into = totals.setdefault((dist_name, cell), dict.fromkeys(counts, 0))
            for key, value in counts.items():
                into[key] += value
    header = (f"{'p':<14} {'cell':<26} {'trends':>6} {'exit 1':>7} {'(error)':>7} "
              f"{'old rule':>8} {'any step':>8}")
    print(header)
    print("-" * len(header))
    rows = []
    for (dist_name, cell), c in totals.items():
        n = c["trends"]
        row = {"p": dist_name, "cell": cell, "trends": n, **{k: c[k] / n for k in ("exit1", "exit1_error", "old", "any_step")}}
        rows.append(row)
        print(f"{dist_name:<14} {cell:<26} {n:>6} {row['exit1']:>7.1%} {row['exit1_error']:>7.1%} "
              f"{row['old']:>8.1%} {row['any_step']:>8.1%}")
    se = math.sqrt(0.05 * 0.95 / max(1, args.sims))
    print(f"\n{STEPS} checkpoints x battery {BATTERY}; alpha 0.05, margin 0.05, metric success; "
          f"{args.sims} trends per cell (standard error of a 5% rate: {se:.1%}); "
          f"{time.monotonic() - started:.0f} s")
    print("exit 1: the CLI's exit status (the last run against the previous run, the discrete step-down "
          "across environments, as shipped: compare/statistics.discrete_holm);"
          " old rule: the last run against the previous run or the best so far;"
          " any step: any run against its previous run or best so far")
    if args.output:
        Path(args.output).write_text(json.dumps({"sims": args.sims, "seed": args.seed, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
