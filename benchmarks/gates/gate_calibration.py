"""Calibration of the checkpoint gate: false alarms and power of `compare_runs`.

Simulates pairs of runs *in the results format* (real run directories with
run.json and episodes.jsonl, written to a temporary directory) and judges each
pair with :func:`pytest_agentgym.compare.compare_runs`, the code users run. Per
simulation every task gets a success probability p ~ Beta(a, b); the baseline's
episodes succeed with p, the candidate's with max(p - drop, 0), independently.

Per cell it prints the share of pairs judged ``regressed`` (at drop 0 the
false-alarm rate, else the power) and ``ok``, next to two references on the
same data: an exact McNemar test (scipy.stats.binomtest on the discordant
episodes, one-sided, same alpha, plain Holm across the battery's environments, where
compare_runs steps down with its discrete Holm) and
the OLD gate (unpaired means: ``mean_cand < mean_base - 0.05`` in any environment);
and, for single environments, how often the interval's lower end lies above the
true change (calibrated: at most alpha / 2 = 2.5%).

    python benchmarks/gates/gate_calibration.py                 # ~200 simulations per cell, 2 processes
    python benchmarks/gates/gate_calibration.py --sims 1000     # tighter figures
    python benchmarks/gates/gate_calibration.py --intervals     # the interval methods considered
    python benchmarks/gates/gate_calibration.py --reward --sims 300   # the reward metric (binary, near-deterministic,
                                                                      # continuous; 5/6/25/100 tasks)
    python benchmarks/gates/gate_calibration.py --needed --sims 300   # does "needs about N tasks" decide at N
    python benchmarks/gates/gate_calibration.py --strict --sims 300 [--strict-repeats 10]   # --strict on a battery
    python benchmarks/gates/gate_calibration.py --holm --sims 1000    # plain Holm against the discrete step-down
    python benchmarks/gates/gate_calibration.py --errors --sims 1000  # a drop hidden as errors; what errors cost
    python benchmarks/gates/gate_calibration.py --sequential --sims 1000   # early stopping against fixed size
    python benchmarks/gates/gate_calibration.py --all --sims 300 [--skip trend needed]   # every study, then the table
    python benchmarks/gates/gate_calibration.py --table         # one markdown table of the studies' JSON

--workers sets the processes of every study (use 1 beside other work on a small machine).
Writes benchmarks/gates/results/gate_calibration.json (the table and the settings); the --reward,
--needed, --strict, --holm, --errors and --sequential studies write
benchmarks/gates/results/gate_calibration_<study>.json (--strict with other repeats:
gate_calibration_strict_r<repeats>.json); --all also writes gate_calibration_trend.json
(benchmarks/gates/trend_calibration.py) and gate_calibration_coverage.json
(benchmarks/gates/interval_coverage.py); --table reads them all and writes
benchmarks/gates/logs/issue23-calibration-table.md. The --holm, --errors and --sequential
studies and the table are in benchmarks/gates/calibration_studies.py, the --reward and --needed
studies in reward_study.py and needed_study.py beside it; the battery and the run directories
both simulate, in benchmarks/gates/simulated_runs.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.gates import calibration_studies, interval_coverage, trend_calibration  # noqa: E402
from benchmarks.gates.needed_study import needed_study  # noqa: E402
from benchmarks.gates.reward_study import reward_study  # noqa: E402
from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, RESULTS, write_run  # noqa: E402
from pytest_agentgym.compare import compare_runs  # noqa: E402

#: Single-environment cells, by the battery environment that has that many tasks.
SINGLES = {25: "Maze", 90: "BabyAI", 100: "TextCraft"}
DROPS = (0.0, 0.03, 0.05, 0.10, 0.20)
REPEATS = (1, 3)
OLD_GATE_DROP = 0.05


# -- the two references ------------------------------------------------------------------------------


def mcnemar_p(base: np.ndarray, cand: np.ndarray) -> float:
    from scipy.stats import binomtest

    drops, gains = int(np.sum(base & ~cand)), int(np.sum(~base & cand))
    return 1.0 if drops + gains == 0 else binomtest(drops, drops + gains, 0.5, alternative="greater").pvalue


def holm_rejects(p_values: list[float], alpha: float) -> bool:
    """Whether Holm's procedure rejects at least one hypothesis: the smallest p < alpha / m."""
    return min(p_values) < alpha / len(p_values)


def old_gate_fails(base: np.ndarray, cand: np.ndarray) -> bool:
    return bool(cand.mean() < base.mean() - OLD_GATE_DROP)


# -- simulation ------------------------------------------------------------------------------------------


def simulate(shape: dict[str, int], dist: tuple[float, float], repeats: int, drops: tuple[float, ...],
             sims: int, seed: int, *, alpha: float = 0.05, margin: float = 0.05,
             singles: tuple[str, ...] = ()) -> dict[str, dict[str, int]]:
    """Counts per cell ``"<shape>|<drop>"`` (shape ``battery`` for all of ``shape`` in
    one run, or an environment of ``singles`` in a run of its own): pairs, regressed,
    ok, inconclusive, error, mcnemar (the reference rejects), old (the old gate fails),
    above (single environments: the interval's lower end lies above the true change,
    the mean of max(p - drop, 0) - p over the tasks; at most alpha / 2 when calibrated)."""
    rng = np.random.default_rng(seed)
    counts: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="gate-calibration-") as tmp:
        root = Path(tmp)
        for _ in range(sims):
            p = {env: rng.beta(*dist, size=n) for env, n in shape.items()}
            base = {env: rng.random((n, repeats)) < p[env][:, None] for env, n in shape.items()}
            groups = {"battery": tuple(shape), **{env: (env,) for env in singles}}
            base_paths = {label: write_run(root / label, "base", {e: base[e] for e in envs})
                          for label, envs in groups.items()}
            for drop in drops:
                q = {env: np.clip(p[env] - drop, 0, 1) for env in shape}
                cand = {env: rng.random((n, repeats)) < q[env][:, None] for env, n in shape.items()}
                for label, envs in groups.items():
                    cand_path = write_run(root / label, "cand", {e: cand[e] for e in envs})
                    comparison = compare_runs(base_paths[label], cand_path, alpha=alpha, margin=margin)
                    cell = counts.setdefault(f"{label}|{drop:g}", dict.fromkeys(
                        ("pairs", "regressed", "ok", "inconclusive", "error", "mcnemar", "old",
                         "above"), 0))
                    cell["pairs"] += 1
                    cell[comparison.verdict] += 1
                    if len(envs) == 1:  # the interval misses the true change from above
                        ci = comparison.environments[envs[0]].ci
                        cell["above"] += ci is not None and ci[0] > float(np.mean(q[envs[0]] - p[envs[0]])) + 1e-9
                    cell["mcnemar"] += holm_rejects([mcnemar_p(base[e], cand[e]) for e in envs], alpha)
                    cell["old"] += any(old_gate_fails(base[e], cand[e]) for e in envs)
    return counts


# -- the interval methods considered --------------------------------------------------------------------


def _bootstrap_low(d: np.ndarray, alpha: float, rng: np.random.Generator) -> float:
    means = d[rng.integers(0, len(d), (2000, len(d)))].mean(axis=1)
    return float(np.quantile(means, alpha / 2))


def _sign_flip_inverted_low(d: np.ndarray, alpha: float, rng: np.random.Generator) -> float:
    """The smallest shift the upper-tail sign-flip test does not reject (by bisection)."""
    n = len(d)
    signs = (np.array(np.meshgrid(*[[1.0, -1.0]] * n)).reshape(n, -1).T if n <= 12
             else rng.choice([1.0, -1.0], size=(2000, n)))

    def p(shift: float) -> float:
        e = d - shift
        return float(np.mean(signs @ np.abs(e) >= e.sum() - 1e-12))

    low, high = -1.0, float(d.mean())
    if p(low) >= alpha / 2:
        return -1.0
    for _ in range(16):
        mid = (low + high) / 2
        low, high = (low, mid) if p(mid) >= alpha / 2 else (mid, high)
    return high


def interval_study(sims: int, seed: int, alpha: float = 0.05) -> list[dict]:
    """How often each candidate interval's lower end lies above the true change
    (mean of q - p over the tasks), per cell; calibrated: at most alpha / 2."""
    from pytest_agentgym.compare import statistics as stats

    rng, rows = np.random.default_rng(seed), []
    for name, dist in DISTRIBUTIONS.items():
        for n in (5, 25, 90):
            for repeats in REPEATS:
                for drop in (0.0, 0.05, 0.10):
                    above = dict.fromkeys(("bootstrap", "t", "sign-flip inverted", "Tango"), 0)
                    for _ in range(sims):
                        p = rng.beta(*dist, size=n)
                        q = np.clip(p - drop, 0, 1)
                        x, y = rng.random((n, repeats)) < p[:, None], rng.random((n, repeats)) < q[:, None]
                        d, true = y.mean(axis=1) - x.mean(axis=1), float(np.mean(q - p))
                        t = stats.t_interval(list(d), alpha)
                        tango = stats.paired_score_interval(int(np.sum(x & ~y)), int(np.sum(~x & y)),
                                                            n * repeats, alpha)
                        lows = {"bootstrap": _bootstrap_low(d, alpha, rng),
                                "t": t[0] if t is not None else -1.0,
                                "sign-flip inverted": _sign_flip_inverted_low(d, alpha, rng),
                                "Tango": tango[0] if repeats == 1 or t is None else min(tango[0], t[0])}
                        for method, low in lows.items():
                            above[method] += low > true + 1e-9
                    rows.append({"p": name, "tasks": n, "repeats": repeats, "drop": drop,
                                 **{m: c / sims for m, c in above.items()}})
                    print(f"{name:<14} n={n:<3} r={repeats} drop={drop:.2f}  " + "  ".join(
                        f"{m} {c / sims:5.1%}" for m, c in above.items()), flush=True)
    return rows


# -- --strict on an unchanged battery, and drops inside the margin (--strict) ------------------------------

STRICT_REPEATS = (1, 3)


def strict_study(sims: int, seed: int, margin: float = 0.05,
                 repeats_list: tuple[int, ...] = STRICT_REPEATS, dists: tuple[str, ...] = tuple(DISTRIBUTIONS),
                 drops: tuple[float, ...] = (0.0, 0.03)) -> list[dict]:
    """The whole battery, unchanged (drop 0) and with a true drop inside the margin (0.03):
    the share judged ok (what --strict passes) and regressed, per repeats. ``dists`` and
    ``drops`` pick cells (one random stream runs through the cells picked, so a subset draws
    other batteries than the whole study)."""
    rng, rows = np.random.default_rng(seed), []
    with tempfile.TemporaryDirectory(prefix="gate-strict-") as tmp:
        root = Path(tmp)
        for dist in dists:
            for repeats in repeats_list:
                for drop in drops:
                    c = dict.fromkeys(VERDICTS_ORDER, 0)
                    for _ in range(sims):
                        p = {env: rng.beta(*DISTRIBUTIONS[dist], size=n) for env, n in BATTERY.items()}
                        base = {env: rng.random((n, repeats)) < p[env][:, None] for env, n in BATTERY.items()}
                        cand = {env: rng.random((n, repeats)) < np.clip(p[env] - drop, 0, 1)[:, None]
                                for env, n in BATTERY.items()}
                        comparison = compare_runs(write_run(root, "base", base), write_run(root, "cand", cand),
                                                  margin=margin)
                        c[comparison.verdict] += 1
                    row = {"p": dist, "repeats": repeats, "drop": drop, "pairs": sims,
                           **{key: value / sims for key, value in c.items()}}
                    rows.append(row)
                    print(f"{dist:<14} r={repeats:<2} drop={drop:.2f}  ok (strict passes) {row['ok']:6.1%}  "
                          f"inconclusive {row['inconclusive']:6.1%}  regressed {row['regressed']:6.1%}", flush=True)
    return rows


VERDICTS_ORDER = ("ok", "inconclusive", "regressed", "error")


def _study_job(args: tuple) -> list[dict]:
    study, sims, seed, strict_repeats, *cells = args
    if study == "strict":
        dists, drops = cells if cells else (tuple(DISTRIBUTIONS), (0.0, 0.03))
        return strict_study(sims, seed, repeats_list=strict_repeats, dists=dists, drops=drops)
    return {"reward": reward_study, "needed": needed_study}[study](sims, seed)


def _job(args: tuple) -> tuple[str, int, dict]:
    name, repeats, sims, seed = args
    return name, repeats, simulate(BATTERY, DISTRIBUTIONS[name], repeats, DROPS, sims, seed,
                                   singles=tuple(SINGLES.values()))


def _merge(into: dict, counts: dict) -> None:
    for cell, values in counts.items():
        target = into.setdefault(cell, dict.fromkeys(values, 0))
        for key, value in values.items():
            target[key] += value


def default_table(path: Path) -> str:
    """The default study (per shape, repeats and distribution: the share regressed at each drop by
    the gate, by exact McNemar and by the old gate, ok at no drop, the interval above the truth
    averaged over the drops) as markdown, the figures in percent."""
    data = json.loads(path.read_text(encoding="utf-8"))
    cells: dict[tuple, list[dict]] = {}
    for r in data["rows"]:
        cells.setdefault((r["p"], r["repeats"], r["shape"]), []).append(r)
    lines = ["| p | r | shape | regressed | McNemar | old gate | ok at 0 | CI above (mean) |",
             "|---|---|---|---|---|---|---|---|"]
    for (dist, repeats, shape), rows in cells.items():
        rows = sorted(rows, key=lambda r: r["drop"])
        by_drop = {key: " / ".join(f"{100 * r[key]:.1f}" for r in rows) for key in ("regressed", "mcnemar", "old")}
        ok = next((r["ok"] for r in rows if r["drop"] == 0), None)
        above = [r["above"] for r in rows if r.get("above") is not None and "battery" not in shape]
        lines.append(f"| {dist} | {repeats} | {shape} | {by_drop['regressed']} | {by_drop['mcnemar']} | "
                     f"{by_drop['old']} | {'' if ok is None else f'{100 * ok:.1f}'} | "
                     f"{f'{100 * sum(above) / len(above):.1f}' if above else ''} |")
    return "\n".join(lines) + f"\n\n{data['sims']} pairs a cell, seed {data['seed']}; `{data['command']}`\n"


def reward_table(path: Path) -> str:
    """The reward study (per kind of reward and number of tasks: ok, regressed, no interval, the
    interval above and covering the true change, at drops 0 / 10 / 20) as markdown, in percent."""
    data = json.loads(path.read_text(encoding="utf-8"))
    cells: dict[tuple, list[dict]] = {}
    for r in data["reward"]:
        cells.setdefault((r["kind"], r["tasks"]), []).append(r)

    def per_drop(rows: list[dict], key: str) -> str:
        return " / ".join(f"{100 * r[key]:.1f}" for r in rows)

    lines = ["| reward | tasks | ok at drop 0 / 10 / 20 | regressed at drop 0 / 10 / 20 | no interval | "
             "CI above (0 / 10 / 20) | covers (0 / 10 / 20) | regressed w/o interval |",
             "|---|---|---|---|---|---|---|---|"]
    for (kind, tasks), rows in cells.items():
        rows = sorted(rows, key=lambda r: r["drop"])
        lines.append(f"| {kind} | {tasks} | {per_drop(rows, 'ok')} | {per_drop(rows, 'regressed')} | "
                     f"{100 * max(r['no_ci'] for r in rows):.1f} | {per_drop(rows, 'above')} | "
                     f"{per_drop(rows, 'covered')} | {100 * max(r['regressed_no_ci'] for r in rows):.1f} |")
    return "\n".join(lines) + f"\n\n{data['sims']} pairs a cell, seed {data['seed']}; `{data['command']}`\n"


# -- every study (--all) ------------------------------------------------------------------------------

#: The studies of --all, in the order they run; each writes the JSON the table reads.
ALL_STUDIES = ("default", "reward", "needed", "strict", "holm", "errors", "sequential", "trend", "coverage")
#: Samples per cell of the run-summary coverage at least (it is cheap: 1000 take ~80 s)
COVERAGE_SAMPLES = 1000


def run_all(sims: int, seed: int, workers: int, skip: tuple[str, ...] = ()) -> None:
    """Every study of ALL_STUDIES but ``skip``, at ``sims`` per cell, each writing its JSON;
    the table then reads the JSON of the skipped ones as they are."""
    for name in ALL_STUDIES:
        if name in skip:
            print(f"== {name}: skipped, its JSON is reused", flush=True)
            continue
        print(f"== {name}", flush=True)
        common = ["--sims", str(sims), "--workers", str(workers)]
        if name == "default":
            main([*common, "--seed", str(seed)])
        elif name in ("reward", "needed"):
            main([f"--{name}", *common, "--seed", str(seed)])
        elif name == "strict":  # the documented pass rates: 1 and 3 repeats, and 10
            main(["--strict", *common, "--seed", str(seed)])
            main(["--strict", "--strict-repeats", "10", *common, "--seed", str(seed)])
        elif name in calibration_studies.STUDIES:
            calibration_studies.run_study(name, sims, seed, workers)
        elif name == "trend":
            trend_calibration.main([*common, "--output", str(RESULTS / "gate_calibration_trend.json")])
        else:
            samples = max(sims, COVERAGE_SAMPLES)
            rows = interval_coverage.run(samples, 23)
            (RESULTS / "gate_calibration_coverage.json").write_text(json.dumps(
                {"sims": samples, "seed": 23,
                 "command": f"python benchmarks/gates/gate_calibration.py --all --sims {sims}", "coverage": rows},
                indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=200, help="simulated run pairs per cell (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=10, help="seed (default 10)")
    parser.add_argument("--output", default=str(RESULTS / "gate_calibration.json"))
    parser.add_argument("--intervals", action="store_true",
                        help="instead: the interval methods considered (bootstrap, t, inverted "
                             "sign-flip, Tango), how often each lower end lies above the true change")
    parser.add_argument("--reward", action="store_true",
                        help="instead: the reward metric on binary, near-deterministic and continuous "
                             "rewards (5, 6, 25, 100 tasks; drops 0, 0.1, 0.2)")
    parser.add_argument("--needed", action="store_true",
                        help="instead: does the 'needs about N tasks' advice decide at N (want >= 80%%)")
    parser.add_argument("--strict", action="store_true",
                        help="instead: how often an unchanged battery (and a 3-point drop) is ok, per repeats")
    parser.add_argument("--strict-dist", choices=tuple(DISTRIBUTIONS), default=None,
                        help="--strict: only this distribution's cells (its own random stream)")
    parser.add_argument("--strict-drop", type=float, choices=(0.0, 0.03), default=None,
                        help="--strict: only this drop's cells (its own random stream)")
    parser.add_argument("--strict-repeats", type=int, nargs="+", default=list(STRICT_REPEATS),
                        help=f"repeats per task of the --strict study (default {' '.join(map(str, STRICT_REPEATS))})")
    parser.add_argument("--holm", action="store_true",
                        help="instead: plain Holm against the discrete step-down on the battery "
                             "(drops 0, 0.05, 0.10; Maze 25/25 -> 19/25)")
    parser.add_argument("--errors", action="store_true",
                        help="instead: a drop hidden as errors, and what independent errors cost")
    parser.add_argument("--sequential", action="store_true",
                        help="instead: early stopping (compare/sequential.py) against the fixed-size comparison")
    parser.add_argument("--all", action="store_true",
                        help="every study (default, reward, needed, strict, holm, errors, sequential, trend, "
                             "coverage) at --sims, each writing its JSON, then the table")
    parser.add_argument("--skip", nargs="+", default=[], metavar="STUDY",
                        help="with --all: studies not to rerun (their JSON is reused by the table)")
    parser.add_argument("--table", action="store_true",
                        help="instead: one markdown table of every study's JSON, to stdout and "
                             "benchmarks/gates/logs/issue23-calibration-table.md")
    parser.add_argument("--default-table", action="store_true",
                        help="instead: the default study's JSON (--output) as docs/compare.md's Calibration table")
    parser.add_argument("--reward-table", action="store_true",
                        help="instead: the reward study's JSON as docs/compare.md's table of the reward metric")
    args = parser.parse_args(argv)
    if args.default_table:
        print(default_table(Path(args.output)), end="")
        return 0
    if args.reward_table:
        print(reward_table(Path(args.output).with_name("gate_calibration_reward.json")), end="")
        return 0
    if args.all or args.table:
        unknown = [name for name in args.skip if name not in ALL_STUDIES]
        if unknown:
            parser.error(f"--skip {' '.join(unknown)}: not a study; the studies are {', '.join(ALL_STUDIES)}")
        if args.all:
            run_all(args.sims, args.seed, args.workers, tuple(args.skip))
        print(calibration_studies.write_table(), end="")
        return 0
    new_studies = [name for name in ("holm", "errors", "sequential") if getattr(args, name)]
    if new_studies:
        for name in new_studies:
            calibration_studies.run_study(name, args.sims, args.seed, args.workers)
        return 0
    if args.intervals:
        interval_study(args.sims, args.seed)
        return 0
    studies = [name for name in ("reward", "needed", "strict") if getattr(args, name)]
    if studies:
        started = time.monotonic()
        cells = () if args.strict_dist is None and args.strict_drop is None else (
            (args.strict_dist,) if args.strict_dist else tuple(DISTRIBUTIONS),
            (args.strict_drop,) if args.strict_drop is not None else (0.0, 0.03))
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            results = list(pool.map(_study_job, [(name, args.sims, args.seed + i, tuple(args.strict_repeats), *cells)
                                                 for i, name in enumerate(studies)]))
        print(f"\n{args.sims} simulated pairs per cell; alpha 0.05, margin 0.05; "
              f"{time.monotonic() - started:.0f} s")
        other_repeats = args.strict and tuple(args.strict_repeats) != STRICT_REPEATS
        repeats_flag = f" --strict-repeats {' '.join(map(str, args.strict_repeats))}" if other_repeats else ""
        suffix = "_".join(studies) + ("_r" + "-".join(map(str, args.strict_repeats)) if other_repeats else "")
        if cells:
            repeats_flag += (f" --strict-dist '{args.strict_dist}'" if args.strict_dist else "") + (
                f" --strict-drop {args.strict_drop:g}" if args.strict_drop is not None else "")
            suffix += "_" + "_".join("".join(c for c in str(v) if c.isalnum() or c in ".-")
                                     for v in (args.strict_dist, args.strict_drop) if v is not None)
        out = Path(args.output).with_name(f"gate_calibration_{suffix}.json")
        out.write_text(json.dumps({"sims": args.sims, "seed": args.seed, "alpha": 0.05, "margin": 0.05,
                                   "command": "python benchmarks/gates/gate_calibration.py "
                                   + " ".join(f"--{name}" for name in studies) + f" --sims {args.sims}"
                                   + repeats_flag,
                                   **dict(zip(studies, results))}, indent=1) + "\n")
        return 0
    started = time.monotonic()
    chunks = max(1, args.workers)
    jobs = [(name, r, args.sims // chunks + (i < args.sims % chunks), args.seed * 1000 + k * 10 + i)
            for k, (name, r) in enumerate((n, r) for n in DISTRIBUTIONS for r in REPEATS) for i in range(chunks)]
    results: dict[tuple[str, int], dict] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for name, repeats, counts in pool.map(_job, jobs):
            _merge(results.setdefault((name, repeats), {}), counts)
    rows = []
    for (name, repeats), counts in results.items():
        for shape in ("Maze", "BabyAI", "TextCraft", "battery"):
            for drop in DROPS:
                cell = counts[f"{shape}|{drop:g}"]
                n = cell["pairs"]
                label = f"{shape} ({BATTERY[shape]})" if shape in BATTERY else "battery (90/100/25/25, discrete Holm)"
                rows.append({"p": name, "repeats": repeats, "shape": label,
                             "drop": drop, "pairs": n,
                             **{key: cell[key] / n for key in ("regressed", "ok", "inconclusive", "error",
                                                               "mcnemar", "old", "above")}})
    header = (f"{'p':<14} {'r':>1} {'shape':<38} {'drop':>5} {'regressed':>9} {'ok':>6} "
              f"{'McNemar':>8} {'old gate':>8} {'CI above':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['p']:<14} {row['repeats']:>1} {row['shape']:<38} {row['drop']:>5.2f} "
              f"{row['regressed']:>9.1%} {row['ok']:>6.1%} {row['mcnemar']:>8.1%} {row['old']:>8.1%} "
              + (f"{row['above']:>8.1%}" if not row["shape"].startswith("battery") else f"{'':>8}"))
    se = math.sqrt(0.05 * 0.95 / args.sims)
    print(f"\n{args.sims} simulated pairs per cell (standard error of a 5% rate: {se:.1%}); "
          f"alpha 0.05, margin 0.05; {time.monotonic() - started:.0f} s")
    Path(args.output).write_text(json.dumps({"sims": args.sims, "seed": args.seed, "alpha": 0.05,
                                             "margin": 0.05, "old_gate_drop": OLD_GATE_DROP,
                                             "command": "python benchmarks/gates/gate_calibration.py"
                                             + (f" --sims {args.sims}" if args.sims != 200 else ""),
                                             "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
