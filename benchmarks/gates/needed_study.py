"""Does "needs about N tasks" decide at N? (gate_calibration.py --needed)

For an unchanged candidate on one environment of the battery, the advice of an
inconclusive comparison is taken and a fresh unchanged pair is judged at the advised size.
Run through gate_calibration.py (its --needed study, JSON in
results/gate_calibration_needed.json); kept apart so that the command stays under the
module size.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, write_run
from pytest_agentgym.compare import compare_runs

# -- the sample-size advice (--needed) ---------------------------------------------------------------------

NEEDED_SCENARIOS = [(dist, env, r) for dist in ("Beta(2,2)", "Beta(0.3,0.3)") for env in ("Maze", "BabyAI")
                    for r in (1, 3)]


def _paired_differences(e) -> list[float]:
    """Per task, the mean paired difference (candidate - baseline) of its scored keys."""
    by_task: dict[int, list[float]] = {}
    for f in e.flips:
        if f.base in ("pass", "fail") and f.cand in ("pass", "fail"):
            by_task.setdefault(f.task_index, []).append(float(f.cand == "pass") - float(f.base == "pass"))
    return [sum(v) / len(v) for v in by_task.values()]


def _decided_at(rng, root: Path, env: str, dist: str, tasks: int, repeats: int, margin: float) -> bool:
    """A fresh unchanged pair of ``tasks`` tasks at ``repeats``: judged ok or regressed?"""
    p_big = rng.beta(*DISTRIBUTIONS[dist], size=tasks)
    verdict = compare_runs(write_run(root, "base", {env: rng.random((tasks, repeats)) < p_big[:, None]}),
                           write_run(root, "cand", {env: rng.random((tasks, repeats)) < p_big[:, None]}),
                           margin=margin).environments[env].verdict
    return verdict in ("ok", "regressed")


def needed_study(sims: int, seed: int, margin: float = 0.05) -> list[dict]:
    """For an unchanged candidate: compare at the battery size; where the verdict is
    inconclusive, take the advice (about N tasks, or R repeats of the T tasks), and
    judge a fresh unchanged pair at the advised size, once as N fresh tasks at the same
    repeats and once as R repeats of the same T tasks. Share that reaches ok or
    regressed: want >= 80%. Issue 40: the same at N/2 (the shipped advice asked about
    twice too many tasks on near-deterministic tasks: it took the baseline's pooled
    p(1 - p) as the variance within a task) and at the advice from the variance the
    paired differences show (statistics.tasks_needed(..., differences=...)): N'."""
    from pytest_agentgym.compare import statistics as stats

    rng, rows = np.random.default_rng(seed), []
    with tempfile.TemporaryDirectory(prefix="gate-needed-") as tmp:
        root = Path(tmp)
        for dist, env, repeats in NEEDED_SCENARIOS:
            n = BATTERY[env]
            advised, decided_tasks, decided_repeats, decided_half, decided_paired = 0, 0, 0, 0, 0
            sizes, paired_sizes = [], []
            for _ in range(sims):
                p = rng.beta(*DISTRIBUTIONS[dist], size=n)
                base = write_run(root, "base", {env: rng.random((n, repeats)) < p[:, None]})
                cand = write_run(root, "cand", {env: rng.random((n, repeats)) < p[:, None]})
                e = compare_runs(base, cand, margin=margin).environments[env]
                if e.verdict != "inconclusive" or e.needed_for_margin is None or e.needed_for_margin <= n:
                    continue
                advised += 1
                big = e.needed_for_margin
                sizes.append(big)
                paired = stats.tasks_needed(0.25, repeats, margin, 0.05, binary=True,
                                            differences=_paired_differences(e)) or big
                paired_sizes.append(paired)
                decided_tasks += _decided_at(rng, root, env, dist, big, repeats, margin)
                decided_half += _decided_at(rng, root, env, dist, max(n, big // 2), repeats, margin)
                decided_paired += _decided_at(rng, root, env, dist, max(n, paired), repeats, margin)
                more = e.repeats_for_margin or repeats
                verdict = compare_runs(write_run(root, "base", {env: rng.random((n, more)) < p[:, None]}),
                                       write_run(root, "cand", {env: rng.random((n, more)) < p[:, None]}),
                                       margin=margin).environments[env].verdict
                decided_repeats += verdict in ("ok", "regressed")
            share = (lambda k: k / advised if advised else None)
            row = {"p": dist, "shape": f"{env} ({n})", "repeats": repeats, "pairs": sims, "advised": advised,
                   "median_advice": float(np.median(sizes)) if sizes else None,
                   "median_paired_advice": float(np.median(paired_sizes)) if paired_sizes else None,
                   "decided_at_n_tasks": share(decided_tasks), "decided_at_half_n": share(decided_half),
                   "decided_at_paired_n": share(decided_paired),
                   "decided_at_r_repeats": share(decided_repeats)}
            rows.append(row)
            print(f"{dist:<14} {env:<7} r={repeats}  advised {advised}/{sims}  median N {row['median_advice']}"
                  f"  decided at N {row['decided_at_n_tasks'] or 0:6.1%}  at N/2 {row['decided_at_half_n'] or 0:6.1%}"
                  f"  | median N' (paired variance) {row['median_paired_advice']}  decided at N' "
                  f"{row['decided_at_paired_n'] or 0:6.1%}  | at R repeats {row['decided_at_r_repeats'] or 0:6.1%}",
                  flush=True)
    return rows
