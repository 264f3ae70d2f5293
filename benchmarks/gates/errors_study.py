"""Issue 40's error study: what infrastructure errors cost an unchanged battery, and whether a
drop recorded as errors is still caught, under the error rule of the library it imports.

    python benchmarks/gates/errors_study.py --sims 1000 --workers 2 --label after
    python benchmarks/gates/errors_study.py --sims 1000 --workers 2 --label before --library /tmp/before
    python benchmarks/gates/errors_study.py --table       # before and after side by side

``--library PATH`` judges with the pytest_agentgym of another tree (a git worktree of the
commit before the change: ``git worktree add /tmp/before <commit>``), on the same seeds, so
the two JSONs differ only by the rule. Records are built in memory as the plugin holds them
and judged by the library's own pairing, family and error rule (``judge_records``; a tree
without it is judged by the steps its compare_runs took), never by a copy of the rule.

Cells (alpha 0.05, margin 0.05, one repeat per task, task success ~ Beta(2,2) or Beta(0.3,0.3),
the candidate unchanged):

* ``unchanged``: each episode of each run errs independently with chance 0 / 1 / 2 / 3%, for
  the lightweight battery (BabyAI 90, TextCraft 100, Maze 25, Wordle 25, judged together),
  each of its sizes alone, a battery of four 25-task environments, and the moderate suites'
  sizes (8, 30, 50, 200, 207 tasks, alone and as the local and field nodes run them; ``--shapes``
  picks shapes); CI red is any
  environment ``error`` or ``regressed`` (the target: at most alpha + 2 points);
* ``hidden drop``: BabyAI (90), 4 tasks the baseline solved fail in the candidate and are
  recorded as errors (the issue-23 case), alone and on top of 3% errors per run; beside it the
  same data with the failures recorded as played. A hidden drop must be red at least as often
  as before, and ``ok`` no more often than as played;
* ``candidate errs only``: 3% errors in the candidate, none in the baseline (an infrastructure
  that got worse between the runs): reported.

``--study gates`` (labels ``gates-before`` / ``gates-after``, ``--table gates``): one run of the
lightweight battery judged by its suites' threshold gates on the field nodes (:data:`GATES`),
each episode erring with chance 0 / 1 / 2 / 3%; CI red is any gate failed or a GATE ERROR, and
the errors' share of it is the GATE ERRORs (the target: at most alpha + 2 points).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "results"
ALPHA, MARGIN, BUDGET = 0.05, 0.05, 0.05
BATTERY = {"BabyAI": 90, "TextCraft": 100, "Maze": 25, "Wordle": 25}
SHAPES = {"battery (90/100/25/25)": BATTERY, "Maze (25)": {"Maze": 25}, "BabyAI (90)": {"BabyAI": 90},
          "TextCraft (100)": {"TextCraft": 100}, "four 25-task envs": {f"E{i}": 25 for i in range(4)},
          # the moderate suites' sizes (suites/moderate/*.yaml): on the local node ALFWorld 8, SQLGym
          # 30, WebShop 50 (SciWorld skipped); on the others 200 each and SciWorld 207
          "ALFWorld (8)": {"ALFWorld": 8}, "SQLGym (30)": {"SQLGym": 30}, "WebShop (50)": {"WebShop": 50},
          "moderate, local (8/30/50)": {"ALFWorld": 8, "SQLGym": 30, "WebShop": 50},
          "200 tasks": {"WebShop": 200}, "SciWorld (207)": {"SciWorld": 207},
          "moderate, field (200/200/200/207)": {"ALFWorld": 200, "SQLGym": 200, "WebShop": 200, "SciWorld": 207}}
DISTRIBUTIONS = {"Beta(2,2)": (2.0, 2.0), "Beta(0.3,0.3)": (0.3, 0.3)}
RATES = (0.0, 0.01, 0.02, 0.03)
HIDDEN = 4
#: --study gates: failed BabyAI episodes of one run recorded as errors (a drop hidden as errors)
GATES_HIDDEN = (4, 8)
RED = ("error", "regressed")
#: the lightweight suites' threshold gates on the field nodes (suites/lightweight/*.yaml, "4090" and gpu)
GATES = {"BabyAI": "success_rate >= 0.45", "TextCraft": "success_rate >= 0.10", "Maze": "success_rate >= 0.04",
         "Wordle": "success_rate >= 0.04"}

_library: dict = {}


def _lib(path: str | None) -> dict:
    """The library's functions, imported once per process from ``path`` (None: this tree)."""
    if not _library:
        sys.path.insert(0, str(Path(path).resolve()) if path else str(REPO))
        from pytest_agentgym.compare import judgement
        from pytest_agentgym.results import aggregate, gates
        from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

        # the advice of an inconclusive verdict ("or R repeats of the T tasks") is text, never a
        # verdict, and its t quantiles were two thirds of the time: not computed here
        judgement.stats.repeats_needed = lambda *args, **kwargs: None
        _library.update(judgement=judgement, gates=gates, summarize=aggregate.summarize,
                        EpisodeRecord=EpisodeRecord, ErrorInfo=ErrorInfo,
                        where=str(Path(judgement.__file__).parents[2]))
    return _library


def _run(lib: dict, run_id: str, outcomes: dict[str, np.ndarray], errors: dict[str, np.ndarray]) -> list:
    record, error = lib["EpisodeRecord"], lib["ErrorInfo"]("ConnectError", "simulated infrastructure error", "env")
    out = []
    for env, won in outcomes.items():
        for task, (w, e) in enumerate(zip(won.tolist(), errors[env].tolist())):
            facts = dict(run_id=run_id, env=env, task_index=task, repeat=1, started_at="2026-01-01T00:00:00Z",
                         model="simulated")
            out.append(record.errored(error=error, **facts) if e else
                       record(reward=1.0 if w else 0.0, success=bool(w), rounds=1, stop_reason="done",
                              duration_s=0.0, **facts))
    return out


def _judge(lib: dict, base: list, cand: list, names: list[str]) -> dict[str, str]:
    """env -> verdict, as compare_runs gives it on these records."""
    j = lib["judgement"]
    if hasattr(j, "judge_records"):
        envs = j.judge_records(base, cand, names, metric="success", margin=MARGIN, alpha=ALPHA,
                               max_error_rate=BUDGET)
        return {env: e.verdict for env, e in envs.items()}
    # the tree before issue 40: compare_runs' steps after reading the runs (no mixed models here)
    pairs = {env: j.pair_env(env, base, cand, "success") for env in names}
    reasons = {env: j._error_reason(p, BUDGET) for env, p in pairs.items()}
    envs = j._family(pairs, reasons, margin=MARGIN, alpha=ALPHA)
    hiding = [env for env, p in pairs.items() if reasons[env] is None and any(j.one_sided_error(f) for f in p.flips)]
    if hiding:
        worst = {env: j.pair_env(env, base, cand, "success", against_candidate=j._bounds(p)) if env in hiding else p
                 for env, p in pairs.items()}
        against = j._family(worst, reasons, margin=MARGIN, alpha=ALPHA)
        for env in hiding:
            envs[env] = j._errors_decide(envs[env], against[env], pairs[env])
    return {env: e.verdict for env, e in envs.items()}


def _count(tally: dict, verdicts: dict[str, str]) -> None:
    tally["pairs"] += 1
    tally["red"] += any(v in RED for v in verdicts.values())
    tally["error"] += any(v == "error" for v in verdicts.values())
    tally["regressed"] += any(v == "regressed" for v in verdicts.values())
    tally["all ok"] += all(v == "ok" for v in verdicts.values())


def unchanged_cell(job: tuple) -> dict:
    """Unchanged batteries of ``shape`` with each episode of each run erring at ``base_rate``
    / ``cand_rate``: the share CI turns red."""
    library, dist, shape, base_rate, cand_rate, sims, seed = job
    lib = _lib(library)
    rng = np.random.default_rng(seed)
    envs = SHAPES[shape]
    tally = dict.fromkeys(("pairs", "red", "error", "regressed", "all ok"), 0)
    for _ in range(sims):
        p = {env: rng.beta(*DISTRIBUTIONS[dist], size=n) for env, n in envs.items()}
        won = [{env: rng.random(n) < p[env] for env, n in envs.items()} for _run_ in (0, 1)]
        erred = [{env: rng.random(n) < rate for env, n in envs.items()} for rate in (base_rate, cand_rate)]
        base, cand = _run(lib, "base", won[0], erred[0]), _run(lib, "cand", won[1], erred[1])
        _count(tally, _judge(lib, base, cand, list(envs)))
    n = tally.pop("pairs")
    return {"study": "unchanged", "p": dist, "shape": shape, "base_rate": base_rate, "cand_rate": cand_rate,
            "pairs": n, **{k: v / n for k, v in tally.items()}}


def hidden_cell(job: tuple) -> dict:
    """BabyAI (90), unchanged but for 4 tasks the baseline solved: the candidate fails them,
    recorded as errors (``hidden``) and as played (``played``); ``rate``: errors per run beside."""
    library, dist, rate, sims, seed = job
    lib = _lib(library)
    rng = np.random.default_rng(seed)
    n = BATTERY["BabyAI"]
    shares: dict[str, dict[str, int]] = {"hidden": {}, "played": {}}
    for _ in range(sims):
        p = rng.beta(*DISTRIBUTIONS[dist], size=n)
        won_b, won_c = rng.random(n) < p, rng.random(n) < p
        err_b, err_c = rng.random(n) < rate, rng.random(n) < rate
        solved = np.flatnonzero(won_b & ~err_b & ~err_c)
        lost = rng.choice(solved, min(HIDDEN, len(solved)), replace=False)
        won_c = won_c.copy()
        won_c[lost] = False
        hidden_err = err_c.copy()
        hidden_err[lost] = True
        base = _run(lib, "base", {"BabyAI": won_b}, {"BabyAI": err_b})
        for label, errors in (("hidden", hidden_err), ("played", err_c)):
            verdict = _judge(lib, base, _run(lib, "cand", {"BabyAI": won_c}, {"BabyAI": errors}), ["BabyAI"])["BabyAI"]
            shares[label][verdict] = shares[label].get(verdict, 0) + 1
    return {"study": "hidden drop", "p": dist, "rate": rate, "pairs": sims,
            **{label: {k: v / sims for k, v in sorted(s.items())} for label, s in shares.items()}}


def _gate_outcomes(lib: dict, gates: dict, won: dict, erred: dict) -> list[str]:
    summaries = lib["summarize"](_run(lib, "run", won, erred))
    return [v.outcome for env in BATTERY for v in lib["gates"].check_env(summaries[env], gates[env], BUDGET)]


def _tally_gates(tally: dict, outcomes: list[str], prefix: str = "") -> None:
    tally[prefix + "error"] += "error" in outcomes
    tally[prefix + "failed"] += "failed" in outcomes
    tally[prefix + "red"] += any(o in ("error", "failed") for o in outcomes)


def gates_cell(job: tuple) -> dict:
    """One run of the lightweight battery, each episode erring at ``rate``, judged by
    :data:`GATES` as the run judges them (``check_env`` at the default budget). ``hidden``
    > 0: that many of BabyAI's failed episodes (drawn among those not errored) are recorded
    as errors (a drop hidden as errors), and the same run is judged as played beside it."""
    library, dist, rate, sims, seed, hidden = (*job, 0) if len(job) == 5 else job
    lib = _lib(library)
    rng = np.random.default_rng(seed)
    gates = {env: (lib["gates"].Gate.parse(g),) for env, g in GATES.items()}
    tally = dict.fromkeys(("red", "error", "failed", "played red", "played error", "played failed"), 0)
    for _ in range(sims):
        won = {env: rng.random(n) < rng.beta(*DISTRIBUTIONS[dist], size=n) for env, n in BATTERY.items()}
        erred = {env: rng.random(n) < rate for env, n in BATTERY.items()}
        if hidden:
            lost = np.flatnonzero(~won["BabyAI"] & ~erred["BabyAI"])
            hide = rng.choice(lost, min(hidden, len(lost)), replace=False)
            _tally_gates(tally, _gate_outcomes(lib, gates, won, erred), "played ")
            erred = {**erred, "BabyAI": erred["BabyAI"].copy()}
            erred["BabyAI"][hide] = True
        _tally_gates(tally, _gate_outcomes(lib, gates, won, erred))
    if not hidden:
        tally = {k: v for k, v in tally.items() if not k.startswith("played")}
    return {"study": "gates", "p": dist, "rate": rate, "hidden": hidden, "pairs": sims,
            **{k: v / sims for k, v in tally.items()}}


def _job(job: tuple) -> dict:
    cells = {"hidden": hidden_cell, "gates": gates_cell, "unchanged": unchanged_cell}
    return cells[job[0]](job[1:])


def gates_jobs(library: str | None, sims: int, seed: int) -> list[tuple]:
    # the same seed at every rate: the same tasks and draws, so a cell differs from 0% only by its errors
    # the hidden drops: a seed of their own per cell (the unchanged cells keep theirs)
    return [("gates", library, dist, rate, sims, seed + 70_000 + 1000 * d)
            for d, dist in enumerate(DISTRIBUTIONS) for rate in RATES] + [
            ("gates", library, dist, rate, sims, seed + 80_000 + 1000 * d + 10 * h + r, hidden)
            for d, dist in enumerate(DISTRIBUTIONS) for h, hidden in enumerate(GATES_HIDDEN)
            for r, rate in enumerate((0.0, 0.03))]


def jobs(library: str | None, sims: int, seed: int, *, no_errors: bool = True,
         asymmetric: bool = True, shapes: tuple[str, ...] | None = None) -> list[tuple]:
    """Every cell's job; a cell's seed depends only on its place, so a subset draws the same.
    ``no_errors`` False leaves out the 0% cells (no error: every rule judges them alike);
    ``asymmetric`` False the candidate-only errors; ``shapes`` only those shapes (and then no
    hidden-drop cells)."""
    out = []
    for d, dist in enumerate(DISTRIBUTIONS):
        for s, shape in enumerate(SHAPES):
            if shapes is not None and shape not in shapes:
                continue
            for r, rate in enumerate(RATES):
                if rate or no_errors:
                    out.append(("unchanged", library, dist, shape, rate, rate, sims, seed + 1000 * d + 100 * s + r))
            if asymmetric:
                out.append(("unchanged", library, dist, shape, 0.0, 0.03, sims, seed + 1000 * d + 100 * s + 9))
        for r, rate in enumerate((0.0, 0.03)):
            if shapes is None:
                out.append(("hidden", library, dist, rate, sims, seed + 50_000 + 1000 * d + r))
    return out


def run(label: str, library: str | None, sims: int, seed: int, workers: int, *, study: str = "compare",
        **cells: object) -> Path:
    started = time.monotonic()
    work = gates_jobs(library, sims, seed) if study == "gates" else jobs(library, sims, seed, **cells)
    if workers <= 1:
        rows = [_job(j) for j in work]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(_job, work))
    for r in rows:
        print(_row_text(r), flush=True)
    seconds = time.monotonic() - started
    where = _lib(library)["where"]
    out = RESULTS / f"errors_study_{label}.json"
    out.write_text(json.dumps({"sims": sims, "seed": seed, "alpha": ALPHA, "margin": MARGIN, "max_error_rate": BUDGET,
                               "library": where, "commit": _commit(where), "seconds": round(seconds),
                               "command": " ".join(["python", "benchmarks/gates/errors_study.py", *sys.argv[1:]]),
                               "rows": rows}, indent=1) + "\n")
    print(f"{sims} per cell, {seconds:.0f} s -> {out.relative_to(REPO)}", flush=True)
    return out


def _commit(tree: str) -> str:
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", tree, *args], capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", "pytest_agentgym")
    return git("log", "-1", "--format=%h") + (" + uncommitted changes in pytest_agentgym/" if dirty else "")


def _cell(r: dict) -> str:
    if r["study"] == "gates" and r.get("hidden"):
        return (f"{r['p']}, one run of the battery, {r['hidden']} BabyAI failures recorded as errors, "
                f"{r['rate']:.0%} errors beside")
    if r["study"] == "gates":
        return f"{r['p']}, one run of the battery (90/100/25/25), its threshold gates, {r['rate']:.0%} errors"
    if r["study"] == "hidden drop":
        return f"{r['p']}, BabyAI (90), 4 solved tasks fail as errors, {r['rate']:.0%} errors per run beside"
    rates = (f"{r['base_rate']:.0%} errors per run" if r["base_rate"] == r["cand_rate"]
             else f"errors {r['base_rate']:.0%} baseline / {r['cand_rate']:.0%} candidate")
    return f"{r['p']}, {r['shape']}, {rates}"


def _row_text(r: dict) -> str:
    if r["study"] == "gates":
        played = f"; as played: red {r['played red']:6.1%}" if r.get("hidden") else ""
        return f"{_cell(r):<80} red {r['red']:6.1%} (GATE ERROR {r['error']:5.1%}, failed {r['failed']:5.1%}){played}"
    if r["study"] == "hidden drop":
        return f"{_cell(r):<80} hidden: {_shares(r['hidden'])} | as played: {_shares(r['played'])}"
    return (f"{_cell(r):<80} red {r['red']:6.1%} (error {r['error']:5.1%}, regressed {r['regressed']:5.1%}), "
            f"all ok {r['all ok']:5.1%}")


def _shares(s: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1%}" for k, v in sorted(s.items(), key=lambda kv: ("ok", "inconclusive",
                                                                                  "regressed", "error").index(kv[0])))


def _red(s: dict[str, float]) -> float:
    return sum(v for k, v in s.items() if k in RED)


def gates_table(labels: tuple[str, str] = ("gates-before", "gates-after")) -> str:
    """The threshold gates' study before and after (the JSONs of ``labels``); a hidden drop's
    row also gives the same runs judged as played."""
    before, after = (json.loads((RESULTS / f"errors_study_{label}.json").read_text()) for label in labels)
    lines = ["| cell | before: red (GATE ERROR) | after: red (GATE ERROR) | failed | as played: red |",
             "|---|---|---|---|---|"]
    earlier = {_cell(b): b for b in before["rows"]}
    for a in after["rows"]:
        b = earlier.get(_cell(a))
        was = f"{b['red']:.1%} ({b['error']:.1%})" if b else "-"
        played = f"{a['played red']:.1%}" if a.get("hidden") else ""
        lines.append(f"| {_cell(a)} | {was} | {a['red']:.1%} ({a['error']:.1%}) | {a['failed']:.1%} | {played} |")
    return "\n".join(lines) + (f"\n\n({after['sims']} runs per cell, the same seeds; before: {before['commit']}; "
                               f"after: {after['commit']}; {after['command']})\n")


def table() -> str:
    """Before and after side by side (the JSONs of the two labels)."""
    before, after = (json.loads((RESULTS / f"errors_study_{label}.json").read_text()) for label in ("before", "after"))
    lines = ["| cell | before: CI red | after: CI red (error / regressed) | after: all ok |", "|---|---|---|---|"]
    hidden = ["| cell | red: before / after / as played | ok: before / after / as played |", "|---|---|---|"]
    earlier = {_cell(b): b for b in before["rows"]}
    for a in after["rows"]:
        # a cell without errors is judged alike by every rule: measured once, after
        b = earlier.get(_cell(a), a if a.get("base_rate") == a.get("cand_rate") == 0 else None)
        if b is None:
            continue
        if a["study"] == "hidden drop":
            hidden.append(f"| {_cell(a)} | {_red(b['hidden']):.1%} / {_red(a['hidden']):.1%} / {_red(a['played']):.1%} "
                          f"| {b['hidden'].get('ok', 0):.1%} / {a['hidden'].get('ok', 0):.1%} / "
                          f"{a['played'].get('ok', 0):.1%} |")
        else:
            lines.append(f"| {_cell(a)} | {b['red']:.1%} | {a['red']:.1%} ({a['error']:.1%} / {a['regressed']:.1%}) "
                         f"| {a['all ok']:.1%} |")
    se = math.sqrt(0.05 * 0.95 / after["sims"])
    foot = (f"\n({after['sims']} batteries per cell, the same seeds before and after; standard error of a 5% "
            f"rate {se:.1%}. before: {before['commit']}; after: {after['commit']}; {after['command']})\n")
    return "\n".join(lines) + "\n\n" + "\n".join(hidden) + "\n" + foot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--label", default="after")
    parser.add_argument("--library", help="a tree whose pytest_agentgym judges (default: this one)")
    parser.add_argument("--table", nargs="?", const="compare", choices=("compare", "gates"),
                        help="print before and after side by side (gates: the threshold gates' study)")
    parser.add_argument("--labels", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="--table gates: the two labels to set side by side (default gates-before gates-after)")
    parser.add_argument("--study", choices=("compare", "gates"), default="compare",
                        help="gates: one run judged by its threshold gates (see the module)")
    parser.add_argument("--skip-no-errors", action="store_true",
                        help="leave out the cells without errors (the same under any rule: for --label before)")
    parser.add_argument("--skip-asymmetric", action="store_true", help="leave out the candidate-only errors")
    parser.add_argument("--shapes", nargs="+", choices=tuple(SHAPES), metavar="SHAPE",
                        help=f"only these shapes, no hidden-drop cells (of: {'; '.join(SHAPES)})")
    args = parser.parse_args(argv)
    if args.table:
        print(gates_table(*([tuple(args.labels)] if args.labels else [])) if args.table == "gates" else table())
        return 0
    run(args.label, args.library, args.sims, args.seed, args.workers, study=args.study,
        no_errors=not args.skip_no_errors, asymmetric=not args.skip_asymmetric,
        shapes=tuple(args.shapes) if args.shapes else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
