"""Coverage of the run summary's 95% intervals (results/aggregate.py), measured.

For each true mean p in {0.02, 0.1, 0.5, 0.9, 0.98} and n in {25, 90} scored
episodes it draws ``--sims`` samples and counts how often each interval holds p
(coverage; wanted >= 95%, accepted >= 94%) and its mean width:

* binary rewards (Bernoulli(p), every reward 0 or 1; also the success rate):
  Clopper-Pearson (what :func:`~pytest_agentgym.results.aggregate.summarize_env`
  gives now), Wilson, and the old clipped Student t;
* continuous rewards in [0, 1], Beta(p k, (1 - p) k) with k = 2 (spread towards 0
  and 1) and k = 10 (around p): the padded t interval (what summarize_env gives
  now: Student t with one pseudo-reward at each end of the range), the old clipped
  t, t with two pseudo-rewards at each end, the Bernoulli-bound score interval
  (Wilson with variance p(1 - p), the most a [0, 1] reward can have) and the
  bootstrap percentile interval (1000 resamples).

The methods the summary uses are called through summarize_env on EpisodeRecords
(the project's code path); the others are written here for comparison.

    python benchmarks/gates/interval_coverage.py               # 1000 samples per cell
    python benchmarks/gates/interval_coverage.py --sims 300
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from pytest_agentgym.results.aggregate import summarize_env, t_critical_95, wilson_ci95  # noqa: E402
from pytest_agentgym.results.records import EpisodeRecord  # noqa: E402

PS = (0.02, 0.1, 0.5, 0.9, 0.98)
NS = (25, 90)
RANGE = (0.0, 1.0)


def summary_interval(rewards: np.ndarray, success: bool = False) -> tuple[float, float]:
    """The interval the run summary shows (reward_ci95, or success_ci95)."""
    records = [EpisodeRecord(run_id="r", env="E", task_index=n, repeat=0, reward=float(r), success=r >= 1,
                             rounds=1, stop_reason="done", started_at="t", duration_s=0.0, model="m")
               for n, r in enumerate(rewards.tolist())]
    summary = summarize_env("E", records, RANGE)
    return summary.success_ci95 if success else summary.reward_ci95


def old_t(x: np.ndarray) -> tuple[float, float]:
    n, m = len(x), float(x.mean())
    half = t_critical_95(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return max(m - half, RANGE[0]), min(m + half, RANGE[1])


def padded_t(x: np.ndarray, k: int) -> tuple[float, float]:
    n = len(x)
    y = np.concatenate([x, np.full(k, RANGE[0]), np.full(k, RANGE[1])])
    half = t_critical_95(n - 1) * float(y.std(ddof=1)) / math.sqrt(len(y))
    return max(float(y.mean()) - half, RANGE[0]), min(float(y.mean()) + half, RANGE[1])


def bernoulli_bound(x: np.ndarray) -> tuple[float, float]:
    """Wilson's interval solved with variance mu (1 - mu): valid for any reward in [0, 1]."""
    n, m, z = len(x), float(x.mean()), 1.96
    d = 1 + z * z / n
    c = (m + z * z / (2 * n)) / d
    h = z * math.sqrt(max(m * (1 - m), 0.0) / n + z * z / (4 * n * n)) / d
    return max(c - h, 0.0), min(c + h, 1.0)


def bootstrap(x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    means = x[rng.integers(0, len(x), (1000, len(x)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def run(sims: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    cells = [("binary", None), ("Beta k=2", 2.0), ("Beta k=10", 10.0)]
    for label, k in cells:
        for n in NS:
            for p in PS:
                if k is None:
                    methods = {"Clopper-Pearson (used)": lambda x: summary_interval(x),
                               "success_ci95 (used)": lambda x: summary_interval(x, success=True),
                               "Wilson": lambda x: wilson_ci95(int(x.sum()), len(x)),
                               "old clipped t": old_t}
                else:
                    methods = {"padded t (used)": lambda x: summary_interval(x),
                               "old clipped t": old_t,
                               "padded t, 2 each end": lambda x: padded_t(x, 2),
                               "Bernoulli bound": bernoulli_bound,
                               "bootstrap": lambda x: bootstrap(x, rng)}
                hits, widths = dict.fromkeys(methods, 0), dict.fromkeys(methods, 0.0)
                for _ in range(sims):
                    x = ((rng.random(n) < p).astype(float) if k is None
                         else rng.beta(p * k, (1 - p) * k, size=n))
                    for name, method in methods.items():
                        low, high = method(x)
                        hits[name] += low - 1e-12 <= p <= high + 1e-12
                        widths[name] += high - low
                for name in methods:
                    rows.append({"rewards": label, "n": n, "p": p, "method": name,
                                 "coverage": hits[name] / sims, "width": widths[name] / sims})
                print(f"{label:<10} n={n:<3} p={p:<5} " + "  ".join(
                    f"{name} {hits[name] / sims:6.1%} (w {widths[name] / sims:.3f})" for name in methods), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    """The coverage table as markdown: one line per (rewards, method), one column per (n, p)."""
    cols = [(n, p) for n in NS for p in PS]
    out = ["| rewards | interval | " + " | ".join(f"n={n} p={p:g}" for n, p in cols) + " |",
           "|---|---|" + "---|" * len(cols)]
    keys = list(dict.fromkeys((r["rewards"], r["method"]) for r in rows))
    for rewards, method in keys:
        got = {(r["n"], r["p"]): r["coverage"] for r in rows if (r["rewards"], r["method"]) == (rewards, method)}
        out.append(f"| {rewards} | {method} | " + " | ".join(f"{got[c]:.1%}" for c in cols) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=1000, help="samples per cell (default 1000)")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = run(args.sims, args.seed)
    print()
    print(table(rows))
    worst = min(r["coverage"] for r in rows if r["method"].endswith("(used)"))
    se = math.sqrt(0.05 * 0.95 / args.sims)
    print(f"\n{args.sims} samples per cell (standard error of a 95% coverage: {se:.1%}); lowest coverage of "
          f"the intervals used: {worst:.1%}; {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
