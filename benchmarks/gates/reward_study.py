"""The reward metric's calibration (gate_calibration.py --reward)

Binary, near-deterministic and continuous rewards on 5, 6, 25 and 100 tasks, unchanged and
with drops of 0.1 and 0.2: how often `compare --metric reward` says ok, regressed, or gives no
interval, and how often its interval misses or covers the true change. Run through
gate_calibration.py (its --reward study, JSON in results/gate_calibration_reward.json); kept
apart, as needed_study.py is, so that the command stays under the module size.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from benchmarks.gates.simulated_runs import write_run
from pytest_agentgym.compare import compare_runs

# -- the reward metric (--reward) ----------------------------------------------------------------------

REWARD_KINDS = ("binary", "near-deterministic", "continuous")
REWARD_TASKS = (5, 6, 25, 100)
REWARD_DROPS = (0.0, 0.10, 0.20)


def reward_pair(kind: str, n: int, drop: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Baseline and candidate rewards (n tasks, one repeat) and the true change of the mean.

    binary: reward 1 with probability p ~ Beta(2, 2), the candidate max(p - drop, 0);
    near-deterministic: each task's reward is a fixed level r ~ Beta(2, 2), or 0 with
    probability 0.05 (the candidate: 0.05 + drop / mean(r), so the mean falls by drop);
    continuous: reward ~ Beta(10 m, 10 (1 - m)), m ~ U(0.2, 0.9), the candidate's m - drop."""
    if kind == "binary":
        p = rng.beta(2, 2, n)
        q = np.clip(p - drop, 0, 1)
        return ((rng.random(n) < p).astype(float)[:, None], (rng.random(n) < q).astype(float)[:, None],
                float(np.mean(q - p)))
    if kind == "near-deterministic":
        r = rng.beta(2, 2, n)
        fail = min(0.95, 0.05 + drop / float(r.mean()))
        base = np.where(rng.random(n) < 0.05, 0.0, r)
        cand = np.where(rng.random(n) < fail, 0.0, r)
        return base[:, None], cand[:, None], float(-(fail - 0.05) * r.mean())
    m = rng.uniform(0.2, 0.9, n)
    mc = np.clip(m - drop, 0.02, 0.98)
    return (rng.beta(10 * m, 10 * (1 - m))[:, None], rng.beta(10 * mc, 10 * (1 - mc))[:, None],
            float(np.mean(mc - m)))


def reward_study(sims: int, seed: int, margin: float = 0.05) -> list[dict]:
    """Per cell: the share judged ok (at a true drop beyond the margin: a miss, want <= 2.5%),
    regressed (at drop 0: the false-alarm rate), with no interval, and how often the interval
    misses the true change from above (want <= 2.5%) and covers it."""
    rng, rows = np.random.default_rng(seed), []
    with tempfile.TemporaryDirectory(prefix="gate-reward-") as tmp:
        root = Path(tmp)
        for kind in REWARD_KINDS:
            for n in REWARD_TASKS:
                for drop in REWARD_DROPS:
                    c = dict.fromkeys(("ok", "regressed", "inconclusive", "error", "no_ci", "above",
                                       "covered", "regressed_no_ci"), 0)
                    for _ in range(sims):
                        base, cand, true = reward_pair(kind, n, drop, rng)
                        b = write_run(root, "base", {"Wordle": base})
                        k = write_run(root, "cand", {"Wordle": cand})
                        e = compare_runs(b, k, metric="reward", margin=margin).environments["Wordle"]
                        c[e.verdict] += 1
                        c["no_ci"] += e.ci is None
                        c["regressed_no_ci"] += e.ci is None and e.verdict == "regressed"
                        if e.ci is not None:
                            c["above"] += e.ci[0] > true + 1e-9
                            c["covered"] += e.ci[0] - 1e-9 <= true <= e.ci[1] + 1e-9
                    row = {"kind": kind, "tasks": n, "drop": drop, "pairs": sims,
                           **{key: value / sims for key, value in c.items()}}
                    rows.append(row)
                    print(f"{kind:<19} n={n:<4} drop={drop:.2f}  ok {row['ok']:6.1%}  regressed "
                          f"{row['regressed']:6.1%}  no interval {row['no_ci']:6.1%}  CI above {row['above']:5.1%}"
                          f"  covers {row['covered']:6.1%}  regressed w/o CI {row['regressed_no_ci']:.1%}",
                          flush=True)
    return rows
