"""The issue-23 acceptance studies of benchmarks/gates/gate_calibration.py that came with the
discrete step-down, the errors rule and early stopping, and the one table of all studies.

* ``--holm``: plain Holm against the shipped discrete step-down (statistics.discrete_holm)
  on the same batteries: how often any environment is judged regressed;
* ``--errors``: keys that errored in one run and scored in the other (the issue's case:
  a drop hidden as errors; and what independent infrastructure errors cost an unchanged
  candidate);
* ``--sequential``: the early-stopping procedure of compare/sequential.py played as the
  plugin will play it, against the fixed-size comparison on the same data;
* ``--table``: the figures of every study's JSON as one markdown table.

Each study judges with the library's own functions (compare_runs on run directories in
the results format; the sequential looks on EpisodeRecords in memory, as the plugin
holds them). Run through gate_calibration.py, which documents the commands and runs --all;
of its siblings this module imports only simulated_runs.py.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, LOGS, RESULTS, write_run  # noqa: E402
from pytest_agentgym.compare import compare_runs  # noqa: E402
from pytest_agentgym.compare import statistics as stats  # noqa: E402
from pytest_agentgym.compare.comparison import worst  # noqa: E402
from pytest_agentgym.compare.judgement import _error_reason, _family  # noqa: E402
from pytest_agentgym.compare.pairing import pair_env  # noqa: E402
from pytest_agentgym.compare.runs import load_run  # noqa: E402
from pytest_agentgym.compare.sequential import SequentialPlan, decide_against_baseline, play_order  # noqa: E402
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE, TOLERANCE  # noqa: E402
from pytest_agentgym.results.records import EpisodeRecord  # noqa: E402

ALPHA, MARGIN = 0.05, 0.05


def _draw(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    """One run's successes, one repeat per task: a (tasks, 1) bool array."""
    return (rng.random(len(p)) < p)[:, None]


def _pool_map(function, jobs: list, workers: int) -> list:
    """``function`` over ``jobs`` in ``workers`` processes (in this one when 1: simpler to profile)."""
    if workers <= 1:
        return [function(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, jobs))


# -- plain Holm against the discrete step-down (--holm) ---------------------------------------------

HOLM_DROPS = (0.0, 0.05, 0.10)
#: Maze falls from 25/25 to 19/25: the candidate fails 6 random tasks the baseline solved
MAZE_FAILS = 6


def _plain_holm_regressed(comparison) -> dict[str, bool]:
    """Per environment, whether plain Holm on the same raw p-values gives ``regressed``:
    the adjusted p < alpha, and as in compare_runs a drop beyond the margin and an interval."""
    raw = {env: e.p_raw for env, e in comparison.environments.items() if e.p_raw is not None}
    adjusted = stats.holm(raw)
    return {env: (env in adjusted and e.ci is not None and adjusted[env] < ALPHA
                  and e.delta < -MARGIN - TOLERANCE) for env, e in comparison.environments.items()}


def holm_cell(job: tuple) -> dict:
    """One cell: ``scenario`` is a drop in every environment (a float) or ``"maze"``
    (Maze 25/25 -> 19/25, the other environments unchanged)."""
    dist_name, scenario, sims, seed = job
    rng = np.random.default_rng(seed)
    keys = ("pairs", "discrete_any", "plain_any", "discrete_only", "plain_only", "discrete_maze",
            "plain_maze", "discrete_others", "plain_others")
    c = dict.fromkeys(keys, 0)
    with tempfile.TemporaryDirectory(prefix="gate-holm-") as tmp:
        root = Path(tmp)
        for _ in range(sims):
            p = {env: rng.beta(*DISTRIBUTIONS[dist_name], size=n) for env, n in BATTERY.items()}
            base = {env: _draw(rng, p[env]) for env in BATTERY}
            drop = 0.0 if scenario == "maze" else scenario
            cand = {env: _draw(rng, np.clip(p[env] - drop, 0, 1)) for env in BATTERY}
            if scenario == "maze":
                base["Maze"] = np.ones((BATTERY["Maze"], 1), dtype=bool)
                cand["Maze"] = base["Maze"].copy()
                cand["Maze"][rng.choice(BATTERY["Maze"], MAZE_FAILS, replace=False)] = False
            comparison = compare_runs(write_run(root, "base", base), write_run(root, "cand", cand),
                                      alpha=ALPHA, margin=MARGIN)
            discrete = {env: e.verdict == "regressed" for env, e in comparison.environments.items()}
            plain = _plain_holm_regressed(comparison)
            c["pairs"] += 1
            c["discrete_any"] += any(discrete.values())
            c["plain_any"] += any(plain.values())
            c["discrete_only"] += any(discrete.values()) and not any(plain.values())
            c["plain_only"] += any(plain.values()) and not any(discrete.values())
            c["discrete_maze"] += discrete["Maze"]
            c["plain_maze"] += plain["Maze"]
            c["discrete_others"] += any(v for env, v in discrete.items() if env != "Maze")
            c["plain_others"] += any(v for env, v in plain.items() if env != "Maze")
    label = (f"Maze 25/25 -> {BATTERY['Maze'] - MAZE_FAILS}/25, others {dist_name} unchanged"
             if scenario == "maze" else f"{dist_name}, drop {scenario:g} in every environment")
    n = c["pairs"]
    return {"p": dist_name, "scenario": "maze" if scenario == "maze" else float(scenario), "cell": label,
            "pairs": n, **{k: c[k] / n for k in keys if k != "pairs"}}


def holm_study(sims: int, seed: int, workers: int) -> list[dict]:
    """Per cell, the share of batteries with any environment regressed under plain Holm
    and under the discrete step-down (at drop 0: the false-alarm rate, want <= 5%)."""
    jobs = [(dist, scenario, sims, seed * 100 + k)
            for k, (dist, scenario) in enumerate((d, s) for d in DISTRIBUTIONS for s in (*HOLM_DROPS, "maze"))]
    rows = _pool_map(holm_cell, jobs, workers)
    for r in rows:
        extra = (f"  Maze regressed: Holm {r['plain_maze']:6.1%} discrete {r['discrete_maze']:6.1%}"
                 f"  others regressed: Holm {r['plain_others']:5.1%} discrete {r['discrete_others']:5.1%}"
                 if r["scenario"] == "maze" else "")
        print(f"{r['cell']:<52} any regressed: Holm {r['plain_any']:6.1%}  discrete {r['discrete_any']:6.1%}"
              f"  (discrete only {r['discrete_only']:5.1%}, Holm only {r['plain_only']:4.1%}){extra}", flush=True)
    return rows


# -- errors that errored in one run and scored in the other (--errors) -----------------------------------

ERROR_RATES = (0.01, 0.02, 0.04)
ERROR_SINGLES = ("BabyAI", "TextCraft")
HIDDEN_ERRORS = 4
#: The issue's fixed case: 60 of 90 BabyAI tasks solved in both runs
ISSUE_BASE = np.array([True] * 60 + [False] * 30)[:, None]


def verdict_left_out(base: Path, cand: Path, env: str) -> str:
    """The verdict before the errors rule: the keys that errored in either run left out
    (``_family`` on the pairs as recorded, with the error budget as compare_runs applies it)."""
    b, k = load_run(base, "baseline"), load_run(cand, "candidate")
    pairs = {env: pair_env(env, b.records, k.records, "success")}
    reasons = {env: _error_reason(pairs[env], DEFAULT_MAX_ERROR_RATE)}
    return _error_kind(_family(pairs, reasons, margin=MARGIN, alpha=ALPHA)[env])


def _error_kind(e) -> str:
    """The verdict, and for ``error`` why: ``error (errors decide)`` (counted against the
    candidate the errors would make it regressed), ``error (budget)``; an ``inconclusive``
    that only the errors leave open is ``inconclusive (errors leave it open)``."""
    if e.verdict == "inconclusive" and e.detail.startswith("the errors leave it open"):
        return "inconclusive (errors leave it open)"
    if e.verdict != "error":
        return e.verdict
    return "error (errors decide)" if e.detail.startswith("the errors decide") else "error (budget)"


def hidden_drop_cell(job: tuple) -> dict:
    """The issue's case simulated: an unchanged candidate, except that 4 tasks the baseline
    solved now fail and are recorded as errors. ``dist_name`` None: the fixed case once.
    Also the verdict as played (the 4 recorded as the failures they are): with the errors
    counted against the candidate, compare_runs may say ``ok`` only where that one does."""
    dist_name, sims, seed = job
    rng = np.random.default_rng(seed)
    before, after, played = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="gate-errors-") as tmp:
        root = Path(tmp)
        for _ in range(sims if dist_name else 1):
            if dist_name is None:
                base = cand = ISSUE_BASE
            else:
                p = rng.beta(*DISTRIBUTIONS[dist_name], size=BATTERY["BabyAI"])
                base, cand = _draw(rng, p), _draw(rng, p)
            solved = np.flatnonzero(base[:, 0])
            hidden = set(solved[:HIDDEN_ERRORS] if dist_name is None
                         else rng.choice(solved, min(HIDDEN_ERRORS, len(solved)), replace=False))
            cand = cand.copy()
            cand[list(hidden)] = False  # what the candidate would have scored: fails
            b = write_run(root, "base", {"BabyAI": base})
            k = write_run(root, "cand", {"BabyAI": cand}, errors={"BabyAI": {int(t) for t in hidden}})
            v_before = verdict_left_out(b, k, "BabyAI")
            v_after = _error_kind(compare_runs(b, k, alpha=ALPHA, margin=MARGIN).environments["BabyAI"])
            as_played = write_run(root, "played", {"BabyAI": cand})  # the failures recorded as failures
            v_played = compare_runs(b, as_played, alpha=ALPHA, margin=MARGIN).environments["BabyAI"].verdict
            before[v_before] = before.get(v_before, 0) + 1
            after[v_after] = after.get(v_after, 0) + 1
            played[v_played] = played.get(v_played, 0) + 1
    n = sum(before.values())
    label = ("fixed: 60/90 solved in both, 4 solved tasks errored in the candidate" if dist_name is None
             else f"{dist_name}, 4 solved tasks fail and are recorded as errors")
    return {"study": "hidden drop", "cell": label, "p": dist_name, "pairs": n,
            "before": {k: v / n for k, v in before.items()}, "after": {k: v / n for k, v in after.items()},
            "as_played": {k: v / n for k, v in played.items()}}


def error_cost_cell(job: tuple) -> dict:
    """Unchanged candidates; each run has infrastructure errors on round(rate * n) random
    keys (at least one), independently: what the errors rule costs."""
    env, rate, sims, seed = job
    rng = np.random.default_rng(seed)
    n = BATTERY[env]
    count = max(1, round(rate * n))
    before, after = {}, {}
    with tempfile.TemporaryDirectory(prefix="gate-errors-") as tmp:
        root = Path(tmp)
        for _ in range(sims):
            p = rng.beta(*DISTRIBUTIONS["Beta(2,2)"], size=n)
            b = write_run(root, "base", {env: _draw(rng, p)},
                          errors={env: {int(t) for t in rng.choice(n, count, replace=False)}})
            k = write_run(root, "cand", {env: _draw(rng, p)},
                          errors={env: {int(t) for t in rng.choice(n, count, replace=False)}})
            v_before = verdict_left_out(b, k, env)
            v_after = _error_kind(compare_runs(b, k, alpha=ALPHA, margin=MARGIN).environments[env])
            before[v_before] = before.get(v_before, 0) + 1
            after[v_after] = after.get(v_after, 0) + 1
    return {"study": "cost", "cell": f"{env} ({n}), Beta(2,2), unchanged, {count} errored key(s) per run "
                                     f"({rate:.0%})", "env": env, "rate": rate, "errors_per_run": count,
            "pairs": sims, "before": {k: v / sims for k, v in before.items()},
            "after": {k: v / sims for k, v in after.items()}}


def _verdicts(shares: dict[str, float]) -> str:
    order = ("ok", "inconclusive", "inconclusive (errors leave it open)", "regressed", "error",
             "error (errors decide)", "error (budget)")
    return ", ".join(f"{k} {shares[k]:.1%}" for k in sorted(shares, key=lambda k: order.index(k)))


def errors_study(sims: int, seed: int, workers: int) -> list[dict]:
    jobs = [("hidden", None, 1, seed), ("hidden", "Beta(2,2)", sims, seed + 1),
            ("hidden", "Beta(0.3,0.3)", sims, seed + 2)]
    jobs += [("cost", env, rate, sims, seed * 100 + k)
             for k, (env, rate) in enumerate((e, r) for e in ERROR_SINGLES for r in ERROR_RATES)]
    rows = _pool_map(_errors_job, jobs, workers)
    for r in rows:
        played = f"  |  as played: {_verdicts(r['as_played'])}" if "as_played" in r else ""
        print(f"{r['cell']:<75} pairs {r['pairs']:>4}  before: {_verdicts(r['before'])}  |  after: "
              f"{_verdicts(r['after'])}{played}", flush=True)
    return rows


def _errors_job(job: tuple) -> dict:
    return hidden_drop_cell(job[1:]) if job[0] == "hidden" else error_cost_cell(job[1:])


# -- early stopping (--sequential) --------------------------------------------------------------------

SEQ_DROPS = (0.0, 0.10, 0.20, 0.30)
#: the cells: label -> the environments compared (the battery, or one environment alone)
SEQ_SHAPES = {"BabyAI (90)": ("BabyAI",), "Maze (25)": ("Maze",), "battery": tuple(BATTERY)}


def _records(run_id: str, outcomes: dict[str, np.ndarray]) -> list[EpisodeRecord]:
    """The run's episodes as the plugin holds them in memory (one repeat per task)."""
    return [EpisodeRecord(run_id=run_id, env=env, task_index=task, repeat=1, reward=1.0 if won else 0.0,
                          success=bool(won), rounds=1, stop_reason="done", started_at="2026-01-01T00:00:00Z",
                          duration_s=0.0, model="simulated")
            for env, table in outcomes.items() for task, won in enumerate(table[:, 0].tolist())]


def play_sequential(envs: tuple[str, ...], base: list[EpisodeRecord], cand: list[EpisodeRecord],
                    base_path: Path, cand_path: Path, order_seed: str) -> tuple[str, int]:
    """The run's verdict with early stopping, and the episodes it played. Per environment
    the tasks in play order; at each look the interim decision on the completed tasks;
    a decided environment stops and keeps its decision; the others are judged together
    at the end by compare_runs at the plan's largest final alpha (the plugin's exact final
    alpha, its Stopper and the looks before issue 40: benchmarks/gates/sequential_study.py)."""
    plan = SequentialPlan(alpha=ALPHA, margin=MARGIN, n_envs=len(envs))
    decided, played = [], 0
    rest = []
    for env in envs:
        n = BATTERY[env]
        order = play_order(range(n), f"{order_seed}:{env}")
        decision = None
        points = plan.look_points(n)
        for k, look in enumerate(points):
            decision = decide_against_baseline(env, base, cand, order, points[:k + 1], plan, metric="success",
                                               max_error_rate=DEFAULT_MAX_ERROR_RATE)
            if decision is not None:
                decided.append(decision[0])
                played += look
                break
        if decision is None:
            rest.append(env)
            played += n
    if rest:
        decided.append(compare_runs(base_path, cand_path, alpha=plan.final_alpha, margin=MARGIN,
                                    envs=rest).verdict)
    return worst(decided), played


def sequential_cell(job: tuple) -> list[dict]:
    """One distribution and drop: every shape of SEQ_SHAPES judged on the same simulated
    runs, with early stopping and at fixed size (compare_runs at alpha on all tasks)."""
    dist_name, drop, sims, seed = job
    rng = np.random.default_rng(seed)
    keys = ("regressed", "ok", "inconclusive", "error", "fixed_regressed", "fixed_ok", "stopped")
    counts = {label: dict(dict.fromkeys(keys, 0), played=0, planned=0) for label in SEQ_SHAPES}
    with tempfile.TemporaryDirectory(prefix="gate-sequential-") as tmp:
        root = Path(tmp)
        for sim in range(sims):
            p = {env: rng.beta(*DISTRIBUTIONS[dist_name], size=n) for env, n in BATTERY.items()}
            base = {env: _draw(rng, p[env]) for env in BATTERY}
            cand = {env: _draw(rng, np.clip(p[env] - drop, 0, 1)) for env in BATTERY}
            base_path, cand_path = write_run(root, "base", base), write_run(root, "cand", cand)
            base_records, cand_records = _records("base", base), _records("cand", cand)
            for label, envs in SEQ_SHAPES.items():
                verdict, played = play_sequential(envs, base_records, cand_records, base_path, cand_path,
                                                  f"{seed}:{sim}")
                fixed = compare_runs(base_path, cand_path, alpha=ALPHA, margin=MARGIN, envs=envs).verdict
                c = counts[label]
                c[verdict] += 1
                c["fixed_regressed"] += fixed == "regressed"
                c["fixed_ok"] += fixed == "ok"
                planned = sum(BATTERY[e] for e in envs)
                c["stopped"] += played < planned
                c["played"] += played
                c["planned"] += planned
    return [{"p": dist_name, "drop": drop, "shape": label, "pairs": sims,
             **{k: c[k] / sims for k in keys}, "played": c["played"] / c["planned"]}
            for label, c in counts.items()]


def sequential_study(sims: int, seed: int, workers: int) -> list[dict]:
    """Per cell: regressed (at drop 0 the false-alarm rate, want <= 5%) and ok with early
    stopping, the fixed-size comparison's regressed and ok on the same data, and the mean
    share of the planned episodes played."""
    jobs = [(dist, drop, sims, seed * 100 + k)
            for k, (dist, drop) in enumerate((d, x) for d in DISTRIBUTIONS for x in SEQ_DROPS)]
    rows = [row for cell in _pool_map(sequential_cell, jobs, workers) for row in cell]
    for r in rows:
        print(f"{r['p']:<14} {r['shape']:<12} drop {r['drop']:.2f}  sequential: regressed {r['regressed']:6.1%}"
              f" ok {r['ok']:6.1%}  | fixed: regressed {r['fixed_regressed']:6.1%} ok {r['fixed_ok']:6.1%}"
              f"  | episodes played {r['played']:6.1%}  stopped early {r['stopped']:6.1%}", flush=True)
    return rows


STUDIES = {"holm": holm_study, "errors": errors_study, "sequential": sequential_study}


def library_state() -> str:
    """The commit the library was measured at, and its files changed since (uncommitted
    work in pytest_agentgym/ changes what the figures mean)."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
        return done.stdout

    changed = [line[3:] for line in git("status", "--porcelain", "--", "pytest_agentgym").splitlines() if line]
    return git("log", "-1", "--format=%h").strip() + (f" + uncommitted: {', '.join(changed)}" if changed else "")


def run_study(name: str, sims: int, seed: int, workers: int) -> Path:
    """Run one of STUDIES and write benchmarks/gates/results/gate_calibration_<name>.json."""
    import time

    started, library = time.monotonic(), library_state()
    print(f"library: {library}", flush=True)
    rows = STUDIES[name](sims, seed, workers)
    seconds = time.monotonic() - started
    se = math.sqrt(0.05 * 0.95 / sims)
    print(f"\n{sims} simulated pairs per cell (standard error of a 5% rate: {se:.1%}); alpha {ALPHA}, "
          f"margin {MARGIN}; {seconds:.0f} s", flush=True)
    out = RESULTS / f"gate_calibration_{name}.json"
    out.write_text(json.dumps({"sims": sims, "seed": seed, "alpha": ALPHA, "margin": MARGIN, "seconds": round(seconds),
                               "library": library,
                               "command": f"python benchmarks/gates/gate_calibration.py --{name} --sims {sims}",
                               name: rows}, indent=1) + "\n")
    return out


# -- every study (--all) and the one table (--table) --------------------------------------------------------

TABLE = LOGS / "issue23-calibration-table.md"


def _load(*paths: Path) -> dict | None:
    """The first of ``paths`` that exists, read as JSON."""
    for path in paths:
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            data["_file"] = str(path.relative_to(REPO))
            return data
    return None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _at_most(checks: list[tuple[float | None, float]], pairs: int) -> str:
    """Whether every measured rate is at most its limit: ``yes``; ``no (within noise)`` when
    each excess is under two standard errors of the limit at ``pairs``; else ``NO``."""
    worst_z = 0.0
    for rate, limit in checks:
        if rate is None or rate <= limit + 1e-12:
            continue
        worst_z = max(worst_z, (rate - limit) / math.sqrt(limit * (1 - limit) / pairs))
    return "yes" if worst_z == 0 else ("no (within 2 SE)" if worst_z < 2 else "NO")


def _at_least(rate: float | None, limit: float, pairs: int) -> str:
    return _at_most([(None if rate is None else 1 - rate, 1 - limit)], pairs)


def _trend_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["rows"]:
        null = r["cell"] == "no change"
        rows.append(("trend", f"{r['p']}, {r['cell']}", r["trends"], f"exit 1 {_pct(r['exit1'])}",
                     "<= 5% (no change)" if null else "power: reported",
                     _at_most([(r["exit1"], 0.05)], r["trends"]) if null else ""))
    return rows


def _reward_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["reward"]:
        measured = (f"regressed {_pct(r['regressed'])}, ok {_pct(r['ok'])}, CI above {_pct(r['above'])}, "
                    f"covers {_pct(r['covered'])}, regressed w/o CI {_pct(r['regressed_no_ci'])}")
        if r["drop"] == 0:
            target, checks = "regressed <= 5%; CI above <= 2.5%", [(r["regressed"], 0.05), (r["above"], 0.025)]
        else:
            target = "ok <= 2.5%; CI above <= 2.5%; never regressed w/o CI"
            checks = [(r["ok"], 0.025), (r["above"], 0.025)]
        meets = _at_most(checks, r["pairs"]) if r["regressed_no_ci"] == 0 else "NO"
        rows.append(("reward metric", f"{r['kind']}, {r['tasks']} tasks, drop {r['drop']:g}", r["pairs"],
                     measured, target, meets))
    return rows


def _coverage_rows(data: dict) -> list[tuple]:
    rows = []
    for rewards, method in dict.fromkeys((r["rewards"], r["method"]) for r in data["coverage"]):
        if not method.endswith("(used)"):
            continue
        cells = [r for r in data["coverage"] if (r["rewards"], r["method"]) == (rewards, method)]
        low = min(cells, key=lambda r: r["coverage"])
        rows.append(("run-summary coverage", f"{rewards}, {method}, n 25/90 x p 0.02-0.98 ({len(cells)} cells)",
                     data["sims"] * len(cells),
                     f"lowest {_pct(low['coverage'])} (n={low['n']}, p={low['p']:g}), "
                     f"mean {_pct(sum(r['coverage'] for r in cells) / len(cells))}",
                     ">= 95% (accepted >= 94%) in every cell", _at_least(low["coverage"], 0.94, data["sims"])))
    return rows


def _needed_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["needed"]:
        decided = [x for x in (r["decided_at_n_tasks"], r["decided_at_r_repeats"]) if x is not None]
        rows.append(("needed-for-margin at its own N", f"{r['p']}, {r['shape']}, {r['repeats']} repeat(s)",
                     r["pairs"], f"advised {r['advised']}; decided at N tasks {_pct(r['decided_at_n_tasks'])}, "
                                 f"at R repeats {_pct(r['decided_at_r_repeats'])} (median N {r['median_advice']:g})",
                     ">= 80% decided", _at_least(min(decided), 0.80, r["advised"]) if decided else ""))
    return rows


def _strict_rows(data: dict) -> list[tuple]:
    return [("strict (battery)", f"{r['p']}, {r['repeats']} repeat(s), drop {r['drop']:g}", r["pairs"],
             f"ok (--strict passes) {_pct(r['ok'])}, inconclusive {_pct(r['inconclusive'])}, "
             f"regressed {_pct(r['regressed'])}",
             "regressed <= 5%; ok reported" if r["drop"] == 0 else "reported (drop inside the margin)",
             _at_most([(r["regressed"], 0.05)], r["pairs"]) if r["drop"] == 0 else "")
            for r in data["strict"]]


def _holm_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["holm"]:
        measured = f"any env regressed: Holm {_pct(r['plain_any'])}, discrete {_pct(r['discrete_any'])}"
        if r["scenario"] == "maze":
            measured += (f"; Maze regressed: Holm {_pct(r['plain_maze'])}, discrete {_pct(r['discrete_maze'])}; "
                         f"another env regressed: Holm {_pct(r['plain_others'])}, "
                         f"discrete {_pct(r['discrete_others'])}")
            target = "Maze regressed (inconclusive under Holm when the others have few changed tasks); others <= 5%"
            meets = _at_most([(r["discrete_others"], 0.05)], r["pairs"])
        elif r["scenario"] == 0:
            target, meets = "<= 5% (issue: Holm 0-3.7%)", _at_most([(r["discrete_any"], 0.05)], r["pairs"])
        else:
            target = "power: discrete >= Holm"
            meets = "yes" if r["discrete_any"] >= r["plain_any"] else "NO"
        rows.append(("Holm vs discrete step-down", r["cell"], r["pairs"], measured, target, meets))
    return rows


def _errors_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["errors"]:
        measured = f"before: {_verdicts(r['before'])}; after: {_verdicts(r['after'])}"
        if r["study"] == "hidden drop":
            measured += f"; as played: {_verdicts(r['as_played'])}" if "as_played" in r else ""
            target = "after: ok no more often than as played (the errors never make it look better)"
            meets = ("yes" if r["after"].get("ok", 0) <= r.get("as_played", {}).get("ok", 0) + 1e-12 else "NO")
        else:
            target, meets = "reported: the share the errors decide (unchanged candidates)", ""
        rows.append(("errors", r["cell"], r["pairs"], measured, target, meets))
    return rows


def _sequential_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["sequential"]:
        measured = (f"regressed {_pct(r['regressed'])}, ok {_pct(r['ok'])}; fixed size: regressed "
                    f"{_pct(r['fixed_regressed'])}, ok {_pct(r['fixed_ok'])}; episodes played {_pct(r['played'])}")
        if r["drop"] == 0:
            target, meets = "regressed <= 5%", _at_most([(r["regressed"], 0.05)], r["pairs"])
        else:
            target = "power within ~3 points of fixed size"
            meets = "yes" if r["regressed"] >= r["fixed_regressed"] - 0.03 else "NO"
        rows.append(("sequential", f"{r['p']}, {r['shape']}, drop {r['drop']:g}", r["pairs"], measured, target,
                     meets))
    return rows


def _default_rows(data: dict) -> list[tuple]:
    rows = []
    for r in data["rows"]:
        if r["drop"] not in (0.0, 0.1):
            continue
        single = not r["shape"].startswith("battery")
        measured = f"regressed {_pct(r['regressed'])}, ok {_pct(r['ok'])}" + (
            f", CI above {_pct(r['above'])}" if single else "")
        target = ("regressed <= 5%" if r["drop"] == 0 else "power: reported") + ("; CI above <= 2.5%" if single else "")
        checks = ([(r["regressed"], 0.05)] if r["drop"] == 0 else []) + ([(r["above"], 0.025)] if single else [])
        rows.append(("gate (default study)", f"{r['p']}, {r['repeats']} repeat(s), {r['shape']}, drop {r['drop']:g}",
                     r["pairs"], measured, target, _at_most(checks, r["pairs"]) if checks else ""))
    return rows


#: table sections: (JSON files, first found is read; the rows it gives)
SECTIONS = (
    ((RESULTS / "gate_calibration_trend.json", LOGS / "issue23-trend.json"), _trend_rows),
    ((RESULTS / "gate_calibration_reward.json",), _reward_rows),
    ((RESULTS / "gate_calibration_coverage.json",), _coverage_rows),
    ((RESULTS / "gate_calibration_needed.json",), _needed_rows),
    ((RESULTS / "gate_calibration_strict.json",), _strict_rows),
    ((RESULTS / "gate_calibration_strict_r10.json",), _strict_rows),
    ((RESULTS / "gate_calibration_holm.json",), _holm_rows),
    ((RESULTS / "gate_calibration_errors.json",), _errors_rows),
    ((RESULTS / "gate_calibration_sequential.json",), _sequential_rows),
    ((RESULTS / "gate_calibration.json",), _default_rows),
)


def table() -> str:
    """One markdown table of every study's JSON (path, cell, pairs, measured, target, and
    whether the figure meets it: ``no (within 2 SE)`` is an excess smaller than two
    standard errors at that many pairs), with the sources it was read from underneath;
    a study with no JSON yet is named as missing."""
    lines = ["| path | cell | pairs | measured | target | meets |", "|---|---|---|---|---|---|"]
    sources = []
    for names, rows_of in SECTIONS:
        data = _load(*names)
        if data is None:
            sources.append(f"- {names[0].relative_to(REPO)}: missing (run its study)")
            continue
        lines += [f"| {' | '.join(str(part) for part in row)} |" for row in rows_of(data)]
        library = f"; library {data['library']}" if data.get("library") else ""
        sources.append(f"- {data['_file']}: {data.get('command', 'python benchmarks/gates/trend_calibration.py')}"
                       f" ({data.get('sims')} per cell, seed {data.get('seed')}{library})")
    return "\n".join(lines + ["", "Sources (alpha 0.05, margin 0.05):", *sources]) + "\n"


def write_table() -> str:
    text = table()
    TABLE.write_text(text, encoding="utf-8")
    return text
