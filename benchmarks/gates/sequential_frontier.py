"""Stopping when decided: other looks and spending functions, side by side on the same batteries.

Each design ``K/tR`` looks after each ``1/K`` of an environment's tasks (K - 1 interim looks;
``K/tR:M`` only up to ``M/K``) and spends its level along ``level * t^R``; ``8/t4:6`` is the
plugin's (compare/sequential.LOOKS, compare/boundaries.RHO), ``4/t3`` the one it replaced
(looks at quarters). Per cell (a success distribution and a
drop) and simulation, BabyAI's 90 tasks get success probabilities p ~ Beta, the baseline
succeeds with p and the candidate with max(p - drop, 0), one episode per task (as
sequential_study.py draws them); every design then plays the same runs through the plugin's
Stopper (sequential_study.play_after), and the fixed-size comparison judges every task.

Per design and cell it prints the share judged regressed, the power lost against the fixed-size
comparison on the same runs (with the runs the design lost and won: the paired difference's
standard error is about sqrt(lost + won) / sims) and the share of the episodes played.

    python benchmarks/gates/sequential_frontier.py --sims 4000 --workers 2   # results/sequential_frontier.json
    python benchmarks/gates/sequential_frontier.py --sims 200 --designs 8/t4:6 4/t3   # a quick look
    python benchmarks/gates/sequential_frontier.py --table   # the JSON as docs/compare.md's table
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.gates import sequential_study  # noqa: E402
from benchmarks.gates.calibration_studies import ALPHA, MARGIN, _draw, _pool_map, _records, library_state  # noqa: E402
from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, RESULTS  # noqa: E402
from pytest_agentgym.compare import compare_runs  # noqa: E402

DESIGNS = ("4/t3", "8/t4:6", "8/t4", "8/t4:5", "8/t3.5:6", "8/t5")
DROPS = (0.10, 0.20, 0.30)
ENV = "BabyAI"


def parse_design(name: str) -> tuple[tuple[float, ...], float]:
    """``8/t4`` -> (1/8, ..., 7/8) and 4.0: looks after each eighth, spending level * t^4;
    ``8/t4:6`` stops looking after 6/8."""
    looks, _, rest = name.partition("/t")
    rho, _, last = rest.partition(":")
    try:
        k, r = int(looks), float(rho)
        m = int(last) if last else k - 1
    except ValueError:
        raise SystemExit(f"design {name!r}: write it K/tR or K/tR:M, e.g. 8/t4 (looks after each 1/K up to "
                         f"M/K, spending t^R)") from None
    if k < 2 or r <= 0 or not 1 <= m < k:
        raise SystemExit(f"design {name!r}: K must be 2 or more, R above 0 and M from 1 to K - 1")
    return tuple(j / k for j in range(1, m + 1)), r


def cell(job: tuple) -> dict:
    """One distribution, drop and seed: ``sims`` runs, every design judged on each."""
    dist, drop, sims, seed, designs = job
    rng = np.random.default_rng(seed)
    counts = {name: {"regressed": 0, "played": 0.0, "lost": 0, "won": 0} for name in designs}
    fixed_regressed = 0
    for sim in range(sims):
        p = {env: rng.beta(*DISTRIBUTIONS[dist], size=n) for env, n in BATTERY.items()}
        base = {env: _draw(rng, p[env]) for env in BATTERY}
        cand = {env: _draw(rng, np.clip(p[env] - drop, 0, 1)) for env in BATTERY}
        base_records, cand_records = _records("base", base), _records("cand", cand)
        base_run, cand_run = sequential_study._loaded("base", base_records), sequential_study._loaded("cand", cand_records)
        fixed = compare_runs(base_run, cand_run, alpha=ALPHA, margin=MARGIN, envs=(ENV,)).verdict == "regressed"
        fixed_regressed += fixed
        for name in designs:
            looks, rho = parse_design(name)
            sequential_study.use_design(looks, rho)
            verdict, played = sequential_study.play_after((ENV,), base_records, cand_records, base_run, cand_run,
                                                          f"{seed}:{sim}")
            found = verdict == "regressed"
            c = counts[name]
            c["regressed"] += found
            c["played"] += played / BATTERY[ENV]
            c["lost"] += fixed and not found
            c["won"] += found and not fixed
    return {"p": dist, "drop": drop, "sims": sims, "fixed_regressed": fixed_regressed, "designs": counts}


def study(sims: int, chunks: int, workers: int, designs: tuple[str, ...], drops: tuple[float, ...],
          seed: int = 4000) -> list[dict]:
    """Every cell in ``chunks`` seeded parts (so two processes share a cell), merged."""
    jobs = [(dist, drop, sims // chunks, seed + 10 * k + int(drop * 10) + 1000 * part, designs)
            for k, dist in enumerate(DISTRIBUTIONS) for drop in drops for part in range(chunks)]
    merged: dict[tuple[str, float], dict] = {}
    for part in _pool_map(cell, jobs, workers):
        key = (part["p"], part["drop"])
        if key not in merged:
            merged[key] = part
            continue
        into = merged[key]
        into["sims"] += part["sims"]
        into["fixed_regressed"] += part["fixed_regressed"]
        for name, c in part["designs"].items():
            for field, value in c.items():
                into["designs"][name][field] += value
    rows = []
    for (dist, drop), m in merged.items():
        n = m["sims"]
        fixed = m["fixed_regressed"] / n
        for name, c in m["designs"].items():
            rows.append({"p": dist, "drop": drop, "design": name, "sims": n, "fixed_regressed": fixed,
                         "regressed": c["regressed"] / n, "power_lost": fixed - c["regressed"] / n,
                         "lost": c["lost"], "won": c["won"], "played": c["played"] / n})
    for r in rows:
        print(f"{r['p']:<14} drop {r['drop']:.2f} {r['design']:<7} regressed {r['regressed']:6.1%} (fixed "
              f"{r['fixed_regressed']:6.1%}: lost {100 * r['power_lost']:+.1f} points, {r['lost']} runs lost, "
              f"{r['won']} won) played {r['played']:6.1%}", flush=True)
    return rows


def table(path: Path) -> str:
    """Per design: the largest power lost over the cells, and the episodes played at 20 and 30 points."""
    data = json.loads(path.read_text(encoding="utf-8"))
    by = {}
    for r in data["rows"]:
        by.setdefault(r["design"], {})[(r["p"], r["drop"])] = r
    lines = ["| looks / spending | power lost, largest (cell) | played at 20 points, Beta(2,2) / Beta(0.3,0.3) "
             "| played at 30 points |", "|---|---|---|---|"]
    for name, cells in by.items():
        worst = max(cells.values(), key=lambda r: r["power_lost"])
        played = {drop: " / ".join(f"{100 * cells[(dist, drop)]['played']:.1f}%" for dist in DISTRIBUTIONS)
                  for drop in (0.2, 0.3) if all((dist, drop) in cells for dist in DISTRIBUTIONS)}
        lines.append(f"| `{name}` | {100 * worst['power_lost']:.1f} ({worst['p']}, {worst['drop'] * 100:.0f} points; "
                     f"{worst['lost']} lost, {worst['won']} won) | {played.get(0.2, '-')} | {played.get(0.3, '-')} |")
    return "\n".join(lines + ["", f"BabyAI (90) alone, {data['sims']} batteries a cell, alpha {data['alpha']}, margin "
                                   f"{data['margin']}; `{data['command']}` ({data['seconds']} s; library "
                                   f"{data['library']})"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--chunks", type=int, default=4, help="seeded parts per cell (default 4)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS))
    parser.add_argument("--drops", nargs="+", type=float, default=list(DROPS))
    parser.add_argument("--seed", type=int, default=4000, help="the first part's seed (default 4000)")
    parser.add_argument("--out", default=str(RESULTS / "sequential_frontier.json"))
    parser.add_argument("--table", action="store_true", help="instead: print --out's figures as a markdown table")
    args = parser.parse_args()
    if args.table:
        print(table(Path(args.out)), end="")
        return
    for name in args.designs:
        parse_design(name)
    started, library = time.monotonic(), library_state()
    rows = study(args.sims, args.chunks, args.workers, tuple(args.designs), tuple(args.drops), args.seed)
    seconds = round(time.monotonic() - started)
    command = (f"python benchmarks/gates/sequential_frontier.py --sims {args.sims} --chunks {args.chunks} "
               f"--workers {args.workers}" + ("" if args.designs == list(DESIGNS) else
                                              " --designs " + " ".join(args.designs))
               + ("" if args.drops == list(DROPS) else " --drops " + " ".join(map(str, args.drops)))
               + ("" if args.seed == 4000 else f" --seed {args.seed}"))
    Path(args.out).write_text(json.dumps({"sims": args.sims, "alpha": ALPHA, "margin": MARGIN, "seconds": seconds,
                                          "library": library, "command": command, "rows": rows}, indent=1) + "\n",
                              encoding="utf-8")
    print(f"{seconds} s; wrote {args.out}")


if __name__ == "__main__":
    main()
