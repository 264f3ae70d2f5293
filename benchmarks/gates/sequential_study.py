"""Stopping when decided (issue 40): the exact O'Brien-Fleming looks against the looks they
replaced, and both against the fixed-size comparison, on the same simulated batteries.

Per cell (a success distribution and a drop) and simulation, the battery's tasks get success
probabilities p ~ Beta; the baseline succeeds with p, the candidate with max(p - drop, 0), one
episode per task, as gate_calibration.py's other studies draw them (the same draws, cell
seeds and order as calibration_studies.py's --sequential cells). Each shape (BabyAI alone,
Maze alone, the battery) is then judged three ways on those runs:

* ``after``: the procedure as the plugin runs it: run/stopping.Stopper (the plan's exact
  boundaries on exactly the first n tasks of the play order at each look, gates none), the
  environments left judged together by compare_runs at the Stopper's final alpha;
* ``before``: the looks before issue 40 (Haybittle-Peto-like: a regression at raw
  p <= alpha * 0.02 / m, ok when the 99.9% interval with errors counted against the
  candidate lies above -margin), the rest by compare_runs at 0.047, on the same play order;
* ``fixed``: compare_runs at alpha on every task.

It prints and writes, per cell: the share judged regressed (at drop 0 the false-alarm rate,
want <= 5%) and ok by each, and the share of the planned episodes each played.

    python benchmarks/gates/sequential_study.py --sims 1000 --workers 2   # results/sequential_study.json
    python benchmarks/gates/sequential_study.py --sims 50 --shapes "BabyAI (90)"   # a quick look
    python benchmarks/gates/sequential_study.py --table   # the JSON as docs/compare.md's table
    python benchmarks/gates/sequential_study.py --sims 1000 --shapes "BabyAI (90)" --spend rho=5 --out ...
        # a what-if: another spending function (rho=X: level * t^X; shares=a,b,...: the shares of
        # the level spent by the plugin's looks, straight lines between them); other looks and
        # spendings side by side on the same batteries: sequential_frontier.py
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

from benchmarks.gates.calibration_studies import (ALPHA, MARGIN, SEQ_DROPS, SEQ_SHAPES, _draw, _pool_map,  # noqa: E402
                                                  _records, library_state)
from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, RESULTS  # noqa: E402
from pytest_agentgym.compare import compare_runs  # noqa: E402
from pytest_agentgym.compare.comparison import worst  # noqa: E402
from pytest_agentgym.compare.judgement import _bounds, _estimate  # noqa: E402
from pytest_agentgym.compare.pairing import pair_env  # noqa: E402
from pytest_agentgym.compare.runs import LoadedRun  # noqa: E402
from pytest_agentgym.compare.sequential import SequentialPlan, play_order  # noqa: E402
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE, TOLERANCE  # noqa: E402
from pytest_agentgym.results.records import EpisodeRecord, RunInfo  # noqa: E402
from pytest_agentgym.run.plans import EnvPlan  # noqa: E402
from pytest_agentgym.run.stopping import Stopper  # noqa: E402

#: The looks before issue 40: a share of alpha per interim look, the rest for the final comparison,
#: at the quarters (whatever the plugin's looks are now).
BEFORE_SHARE = 0.02
BEFORE_LOOKS = (0.25, 0.5, 0.75)


def _loaded(run_id: str, records: list[EpisodeRecord]) -> LoadedRun:
    """A run as compare_runs reads one, held in memory (no directory: the study compares
    thousands of pairs)."""
    from pytest_agentgym.results import fingerprint

    envs = sorted({r.env for r in records})
    info = RunInfo(run_id=run_id, started_at="2026-01-01T00:00:00Z", node="simulated", model="simulated",
                   endpoint="none", endpoint_kind="simulated", environments=tuple(envs), command="sequential_study",
                   versions={"pytest-agentgym": "simulated"}, status="finished",
                   fingerprint=fingerprint.build(model="simulated", endpoint_kind="simulated", checkpoint=None,
                                                 envs={e: {"max_rounds": 15} for e in envs}))
    return LoadedRun(given=run_id, path=Path("/nonexistent") / run_id, info=info, records=tuple(records))


def play_after(envs: tuple[str, ...], base: list[EpisodeRecord], cand: list[EpisodeRecord],
               base_run: LoadedRun, cand_run: LoadedRun, seed: str) -> tuple[str, int]:
    """The run's verdict and the episodes played, as the plugin's Stopper decides."""
    plans = {env: EnvPlan(baseline_metric="success", max_error_rate=DEFAULT_MAX_ERROR_RATE) for env in envs}
    wanted = set(envs)
    keys = [r.key for r in cand if r.env in wanted]
    stopper = Stopper(plans, keys, baseline=[r for r in base if r.env in wanted], margin=MARGIN,
                      reward_ranges={}, seed=seed)
    by_task = {(r.env, r.task_index): r for r in cand}
    decided, played, rest = [], 0, []
    for env in envs:
        watch = stopper.watches[env]
        stop = None
        for point in stopper.plan(env).look_points(len(watch.order)):
            for task in watch.order[:point]:
                stopper.recorded(by_task[(env, task)])
            stop = stopper.look(env)
            if stop is not None:
                decided.append(stop.decision.verdict)
                played += stop.decision.tasks
                break
        if stop is None:
            for task in watch.order:
                stopper.recorded(by_task[(env, task)])
            rest.append(env)
            played += len(watch.order)
    if rest:
        decided.append(compare_runs(base_run, cand_run, alpha=stopper.final_alpha, margin=MARGIN, envs=rest).verdict)
    return worst(decided), played


def _before_look(env: str, base: list[EpisodeRecord], cand: list[EpisodeRecord], tasks: list[int],
                 n_envs: int) -> str | None:
    """The interim decision before issue 40 (compare/sequential.py at 4d20ddc)."""
    wanted = set(tasks)
    b = [r for r in base if r.env == env and r.task_index in wanted]
    c = [r for r in cand if r.env == env and r.task_index in wanted]
    pairs = pair_env(env, b, c, "success")
    if not pairs.units:
        return None
    level, ok_alpha = ALPHA * BEFORE_SHARE / n_envs, ALPHA * BEFORE_SHARE
    recorded = _estimate(pairs, ok_alpha)
    if recorded.ci is not None and recorded.p_raw <= level and recorded.delta < -MARGIN - TOLERANCE:
        return "regressed"
    against = _estimate(pair_env(env, b, c, "success", against_candidate=_bounds(pairs)), ok_alpha)
    if against.ci is not None and against.ci[0] > -MARGIN + TOLERANCE:
        return "ok"
    return None


def play_before(envs: tuple[str, ...], base: list[EpisodeRecord], cand: list[EpisodeRecord],
                base_run: LoadedRun, cand_run: LoadedRun, seed: str) -> tuple[str, int]:
    plan = SequentialPlan(alpha=ALPHA, margin=MARGIN, n_envs=len(envs), looks=BEFORE_LOOKS)
    decided, played, rest = [], 0, []
    for env in envs:
        n = BATTERY[env]
        order = play_order(range(n), seed)
        verdict = None
        for look in plan.look_points(n):
            verdict = _before_look(env, base, cand, order[:look], len(envs))
            if verdict is not None:
                decided.append(verdict)
                played += look
                break
        if verdict is None:
            rest.append(env)
            played += n
    if rest:
        final = ALPHA * (1 - len(plan.looks) * BEFORE_SHARE)
        decided.append(compare_runs(base_run, cand_run, alpha=final, margin=MARGIN, envs=rest).verdict)
    return worst(decided), played


def use_design(looks: int | tuple[float, ...] | None = None, rho: float | None = None) -> None:
    """A what-if in this process: interim looks after each ``1/looks`` of the tasks (or at the
    fractions given), and the spending function ``level * t^rho`` (the plugin's:
    compare/sequential.LOOKS and compare/boundaries.RHO)."""
    import pytest_agentgym.compare.boundaries as boundaries
    import pytest_agentgym.compare.sequential as sequential

    if rho is not None:
        boundaries.RHO = float(rho)
    if looks is not None:
        fractions = tuple(k / looks for k in range(1, looks)) if isinstance(looks, int) else tuple(looks)
        sequential.LOOKS = fractions
        n_envs, _, ok_share = SequentialPlan.__init__.__defaults__
        SequentialPlan.__init__.__defaults__ = (n_envs, fractions, ok_share)  # the Stopper's plans take it


def use_spending(spec: str | None) -> None:
    """``--spend``: replace the spending function of compare/boundaries.py in this process (a
    what-if for the frontier between episodes played and power). ``rho=X``: ``level * t^X``;
    ``shares=a,b,...``: the shares of the level spent by the plugin's looks, in order (one per
    look), straight lines between them."""
    if not spec:
        return
    import pytest_agentgym.compare.boundaries as boundaries
    import pytest_agentgym.compare.sequential as sequential

    name, _, value = spec.partition("=")
    if name == "rho":
        use_design(rho=float(value))
        return
    looks = tuple(sequential.LOOKS)
    shares = tuple(float(v) for v in value.split(",")) if name == "shares" else ()
    if name != "shares" or len(shares) != len(looks):
        raise SystemExit(f"--spend {spec}: use rho=X or shares= with one share per look ({len(looks)})")
    xs, ys = (0.0, *looks, 1.0), (0.0, *shares, 1.0)

    def spend(t: float, level: float) -> float:
        t = min(1.0, max(0.0, t))
        k = next(i for i in range(len(xs) - 1) if t <= xs[i + 1] + 1e-12)
        return level * (ys[k] + (ys[k + 1] - ys[k]) * (t - xs[k]) / (xs[k + 1] - xs[k]))

    boundaries.spend = sequential.spend = spend


def cell(job: tuple) -> list[dict]:
    """One distribution and drop, ``sims`` batteries, every shape judged the three ways."""
    dist_name, drop, sims, seed, shapes, spending = job
    use_spending(spending)
    rng = np.random.default_rng(seed)
    ways = ("after", "before", "fixed")
    counts = {label: {w: {"regressed": 0, "ok": 0, "played": 0} for w in ways} for label in shapes}
    for sim in range(sims):
        p = {env: rng.beta(*DISTRIBUTIONS[dist_name], size=n) for env, n in BATTERY.items()}
        base = {env: _draw(rng, p[env]) for env in BATTERY}
        cand = {env: _draw(rng, np.clip(p[env] - drop, 0, 1)) for env in BATTERY}
        base_records, cand_records = _records("base", base), _records("cand", cand)
        base_run, cand_run = _loaded("base", base_records), _loaded("cand", cand_records)
        for label in shapes:
            envs = SEQ_SHAPES[label]
            planned = sum(BATTERY[e] for e in envs)
            results = {
                "after": play_after(envs, base_records, cand_records, base_run, cand_run, f"{seed}:{sim}"),
                "before": play_before(envs, base_records, cand_records, base_run, cand_run, f"{seed}:{sim}"),
                "fixed": (compare_runs(base_run, cand_run, alpha=ALPHA, margin=MARGIN, envs=envs).verdict, planned),
            }
            for way, (verdict, played) in results.items():
                c = counts[label][way]
                c["regressed"] += verdict == "regressed"
                c["ok"] += verdict == "ok"
                c["played"] += played / planned
    return [{"p": dist_name, "drop": drop, "shape": label, "pairs": sims,
             **{f"{way}_{k}": v / sims for way, c in counts[label].items() for k, v in c.items()}}
            for label in shapes]


def study(sims: int, seed: int, workers: int, shapes: tuple[str, ...], spending: str | None = None) -> list[dict]:
    jobs = [(dist, drop, sims, seed * 100 + k, shapes, spending)
            for k, (dist, drop) in enumerate((d, x) for d in DISTRIBUTIONS for x in SEQ_DROPS)]
    rows = [row for one in _pool_map(cell, jobs, workers) for row in one]
    for r in rows:
        print(f"{r['p']:<14} {r['shape']:<12} drop {r['drop']:.2f} | regressed: after {r['after_regressed']:6.1%}"
              f" before {r['before_regressed']:6.1%} fixed {r['fixed_regressed']:6.1%} | ok: after {r['after_ok']:6.1%}"
              f" before {r['before_ok']:6.1%} fixed {r['fixed_ok']:6.1%} | played: after {r['after_played']:6.1%}"
              f" before {r['before_played']:6.1%}", flush=True)
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def table(path: Path) -> str:
    """The study's JSON as markdown: per shape, distribution and drop, regressed and ok by
    each way and the episodes played (docs/compare.md, "Stopping when decided")."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = ["| shape | p | drop | regressed: after / before / fixed | ok: after / before / fixed "
             "| episodes played: after / before |", "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['shape']} | {r['p']} | {r['drop']:g} | {_pct(r['after_regressed'])} / "
                     f"{_pct(r['before_regressed'])} / {_pct(r['fixed_regressed'])} | {_pct(r['after_ok'])} / "
                     f"{_pct(r['before_ok'])} / {_pct(r['fixed_ok'])} | {_pct(r['after_played'])} / "
                     f"{_pct(r['before_played'])} |")
    return "\n".join(lines + ["", f"{data['sims']} batteries a cell, seed {data['seed']}, alpha {data['alpha']}, "
                                   f"margin {data['margin']}; `{data['command']}` ({data['seconds']} s; library "
                                   f"{data['library']})"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shapes", nargs="+", default=list(SEQ_SHAPES), choices=list(SEQ_SHAPES))
    parser.add_argument("--spend", default=None, help="a what-if spending function: rho=X or shares=A,B,C")
    parser.add_argument("--out", default=str(RESULTS / "sequential_study.json"))
    parser.add_argument("--table", action="store_true", help="instead: print --out's figures as a markdown table")
    args = parser.parse_args()
    if args.table:
        print(table(Path(args.out)), end="")
        return
    import pytest_agentgym.compare.boundaries as boundaries
    import pytest_agentgym.compare.sequential as sequential

    started, library = time.monotonic(), library_state()  # what the workers import now, not at the end
    rows = study(args.sims, args.seed, args.workers, tuple(args.shapes), args.spend)
    seconds = round(time.monotonic() - started)
    command = (f"python benchmarks/gates/sequential_study.py --sims {args.sims} --seed {args.seed} "
               f"--workers {args.workers}" + ("" if args.shapes == list(SEQ_SHAPES) else
                                              " --shapes " + " ".join(f'"{s}"' for s in args.shapes))
               + (f" --spend {args.spend}" if args.spend else ""))
    Path(args.out).write_text(json.dumps({"sims": args.sims, "seed": args.seed, "alpha": ALPHA, "margin": MARGIN,
                                          "seconds": seconds, "library": library, "command": command,
                                          "spend": args.spend or f"rho={boundaries.RHO:g} (boundaries.RHO)",
                                          "looks": [round(f, 4) for f in sequential.LOOKS],
                                          "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"{seconds} s; wrote {args.out}")


if __name__ == "__main__":
    main()
