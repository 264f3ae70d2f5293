"""The data commands on synthetic runs: compare, trend and merge, each in a fresh process.

    python benchmarks/data/data_commands.py [--before TREE] [--repeats 3] [--quick]

Synthetic runs are written once (tests/helpers/report_fixtures.py: realistic turns, 10 to 20
per episode, about 13 KB a line; 55% pass, 40% fail, 5% errors), by the --before tree's
fixtures when there is one (an older reader may refuse a newer record's fields), and left
as each measured tree's harness leaves a finished run (``pytest-agentgym report`` renders each
run's report, whose reading writes the light index, results/light_index.py). An index holds
the digest of the reader rules that wrote it and another tree's reader passes it over, so each
tree finishes the runs once and is measured with its own index in place (a tree whose report
writes none reads every run cold). Then timed as users run them, each command in a fresh
interpreter (its start included):

==================  ===========================================================
compare_s, _mb      ``pytest-agentgym compare --allow-mismatch A B``, two runs of
                    10,000 episodes (--quick: 2,000): wall seconds and the
                    process's peak RSS (VmHWM; ru_maxrss would carry this
                    process's size across exec)
trend5_s ... 20_s   ``pytest-agentgym trend --allow-mismatch`` over 5, 10 and 20
                    runs of 1,000 episodes (--quick: 200), checkpoints step-1 to
                    step-20; trend20_over_10: 2 when linear in runs
compare_cold_s, _mb the same runs without their light index (a run that died
                    before its end; a run written by a version that kept none)
merge10k_s, 30k_s   ``pytest-agentgym merge SHARDS --out DIR --no-report`` of 4
                    shards holding 10,000 and 30,000 episodes (--quick: 2,000 and
                    6,000); merge30k_cold_s: the larger without the shards' index
orjson10k_s, 30k_s  orjson.loads of every line of the same shards, lines already
                    in memory (the parser's own time); merge_over_orjson: the
                    larger run's merge over it; merge_cold_over_orjson: its cold one
==================  ===========================================================

With ``--before TREE`` every command also runs from that checkout (its ``pytest_agentgym``
first on PYTHONPATH), interleaved (before, after, before, after, ...); each figure is the
median of ``--repeats`` with its spread (min-max), and after/before is the ratio of the
medians. One line per sample, in run_all's form: ``[i/n] data label seconds k=v ...``.
run_all.py runs the same measurement as its ``data`` benchmark (:func:`measure`). The
machine may be shared: absolute figures drift, ratios within one run are what count.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

REPO = Path(__file__).resolve().parents[2]
LIMIT_S = 600
#: The light index a finished run's report leaves beside episodes.jsonl (results/light_index.py).
INDEX = "episodes.light.json"

#: The sizes: (compare episodes per run, trend episodes per run, merge episodes)
FULL = (10_000, 1_000, (10_000, 30_000))
QUICK = (2_000, 200, (2_000, 6_000))
TREND_RUNS = (5, 10, 20)
SHARDS = 4

#: Writes every synthetic run in one process (the maker tree's fixtures and RunDir); prints them as JSON.
_MAKE = r'''
import dataclasses, json, sys
from pathlib import Path
try:
    from helpers.report_fixtures import synthetic_run
except ImportError:
    from report_fixtures import synthetic_run
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run import shards
from pytest_agentgym.run.plans import EnvPlan, plan_record

work, sizes = Path(sys.argv[1]), json.loads(sys.argv[2])
made = {"compare": [], "trend": [], "merge": {}}
for n in (1, 2):
    made["compare"].append(str(synthetic_run(work / f"compare-{n}", sizes["compare"], seed=n).path))
for step in range(1, sizes["trend_runs"] + 1):
    run = synthetic_run(work / f"trend-{step}", sizes["trend"], seed=100 + step)
    run.write_info(dataclasses.replace(run.read_info(), checkpoint=f"ckpt/step-{step}"))
    made["trend"].append(str(run.path))
for episodes in sizes["merge"]:
    whole = synthetic_run(work / f"whole-{episodes}", episodes, seed=7)
    info = whole.read_info()
    lines = whole.episodes_file.read_bytes().splitlines(keepends=True)
    keys = [(d["env"], d["task_index"], d["repeat"]) for d in map(json.loads, lines)]
    costs = {key: 1.0 for key in keys}
    owner = shards.assign(costs, sizes["shards"])
    plans = {env: plan_record(EnvPlan()) for env in info.environments}
    paths = []
    for index in range(1, sizes["shards"] + 1):
        shard = RunDir.create(work / f"merge-{episodes}" / info.run_id, shards.Shard(index, sizes["shards"], "bench").dirname)
        shard.episodes_file.write_bytes(b"".join(line for line, key in zip(lines, keys) if owner[key] == index))
        shard.write_info(dataclasses.replace(info, status="finished",
                                             shard=shards.shard_record(shards.Shard(index, sizes["shards"], "bench"),
                                                                       costs, plans)))
        paths.append(str(shard.path))
    made["merge"][str(episodes)] = paths
print(json.dumps(made))
'''

#: Runs one pytest-agentgym command in this interpreter and says its peak RSS (VmHWM, kB) on stderr.
_CLI = ("import re, sys\n"
        "from pytest_agentgym.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "print(f'BENCH-PEAK-KB {hwm}', file=sys.stderr)\n"
        "sys.exit(code)\n")

#: orjson.loads of every line of the files given, the lines read first; prints the seconds.
_ORJSON = ("import sys, time, orjson\n"
           "lines = [line for path in sys.argv[1:] for line in open(path, 'rb')]\n"
           "began = time.perf_counter()\n"
           "for line in lines:\n"
           "    orjson.loads(line)\n"
           "print(time.perf_counter() - began)\n")


def make_runs(tree: Path, work: Path, quick: bool, *, finish: Sequence[Path] = ()) -> dict[str, Any]:
    """Every synthetic run the measurement needs, written by ``tree``'s fixtures under ``work``;
    then each run is left as each tree of ``finish`` leaves a run at its end (``pytest-agentgym
    report`` renders its report, whose reading writes the light index): that tree's index is
    set aside for :func:`measure` to put in place when it measures the tree."""
    compare, trend, merge = QUICK if quick else FULL
    sizes = {"compare": compare, "trend": trend, "trend_runs": max(TREND_RUNS), "merge": list(merge),
             "shards": SHARDS}
    work.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([sys.executable, "-c", _MAKE, str(work), json.dumps(sizes)], cwd=tree,
                          capture_output=True, text=True, timeout=LIMIT_S,
                          env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'tests'}"})
    if made.returncode != 0:
        raise RuntimeError(f"could not make the synthetic runs with {tree}: {made.stderr[-2000:]}")
    runs = {**json.loads(made.stdout.strip().splitlines()[-1]), "sizes": sizes}
    runs["finished"] = {}
    for number, tree in enumerate(finish):
        for path in _every_run(runs):
            _command(tree, ["report", path], accept=(0,))
            index = Path(path) / INDEX
            if index.is_file():
                index.rename(index.with_name(f"{INDEX}.{number}"))
        runs["finished"][str(tree)] = number
    return runs


def _command(tree: Path, args: list[str], accept: tuple[int, ...] = (0, 1)) -> tuple[float, float]:
    """(wall seconds, peak MB) of ``pytest-agentgym ARGS`` run from ``tree`` in a fresh process."""
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _CLI, *args], cwd=tree, capture_output=True, text=True,
                          timeout=LIMIT_S, env={**os.environ, "PYTHONPATH": str(tree)})
    wall = time.monotonic() - began
    peak = re.search(r"BENCH-PEAK-KB (\d+)", done.stderr)
    if done.returncode not in accept or peak is None:
        raise RuntimeError(f"pytest-agentgym {args[0]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, int(peak.group(1)) / 1024


def _orjson_s(paths: list[str]) -> float:
    done = subprocess.run([sys.executable, "-c", _ORJSON, *(str(Path(p) / "episodes.jsonl") for p in paths)],
                          capture_output=True, text=True, timeout=LIMIT_S, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _every_run(runs: dict[str, Any]) -> list[str]:
    return [*runs["compare"], *runs["trend"], *(p for paths in runs["merge"].values() for p in paths)]


@contextlib.contextmanager
def _finished_by(tree: Path, runs: dict[str, Any]) -> Iterator[None]:
    """The runs with the light index that ``tree``'s report left (:func:`make_runs`) in place."""
    number = runs.get("finished", {}).get(str(tree))
    placed = []
    try:
        for path in ([] if number is None else _every_run(runs)):
            kept = Path(path) / f"{INDEX}.{number}"
            if kept.is_file():
                kept.rename(Path(path) / INDEX)
                placed.append(kept)
        yield
    finally:
        for kept in placed:
            kept.with_name(INDEX).rename(kept)


@contextlib.contextmanager
def _cold(paths: list[str]) -> Iterator[None]:
    """The runs in ``paths`` without their light index for a while (as a run left that died
    before its end, or one written by a version that kept none)."""
    moved = []
    try:
        for path in paths:
            index = Path(path) / INDEX
            if index.is_file():
                index.rename(index.with_name(INDEX + ".aside"))
                moved.append(index)
        yield
    finally:
        for index in moved:
            index.with_name(INDEX + ".aside").rename(index)


def measure(tree: Path, work: Path, runs: dict[str, Any]) -> dict[str, float]:
    """One sample of every figure (see the module docstring), the commands run from ``tree``."""
    with _finished_by(tree, runs):
        return _measure(tree, work, runs)


def _measure(tree: Path, work: Path, runs: dict[str, Any]) -> dict[str, float]:
    figures: dict[str, float] = {}
    figures["compare_s"], figures["compare_mb"] = _command(tree, ["compare", "--allow-mismatch", *runs["compare"]])
    with _cold(runs["compare"]):
        figures["compare_cold_s"], figures["compare_cold_mb"] = _command(
            tree, ["compare", "--allow-mismatch", *runs["compare"]])
    for count in TREND_RUNS:
        figures[f"trend{count}_s"], _ = _command(tree, ["trend", "--allow-mismatch", *runs["trend"][:count]])
    figures["trend20_over_10"] = figures["trend20_s"] / figures["trend10_s"]
    for episodes, paths in runs["merge"].items():
        name = f"{int(episodes) // 1000}k"
        out = work / f"merged-{time.monotonic_ns()}"
        try:
            figures[f"merge{name}_s"], _ = _command(tree, ["merge", *paths, "--out", str(out), "--no-report"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
        figures[f"orjson{name}_s"] = _orjson_s(paths)
    largest = max(runs["merge"], key=int)
    name = f"{int(largest) // 1000}k"
    out = work / f"merged-{time.monotonic_ns()}"
    try:
        with _cold(runs["merge"][largest]):
            figures[f"merge{name}_cold_s"], _ = _command(tree, ["merge", *runs["merge"][largest], "--out", str(out),
                                                                "--no-report"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    figures["merge_over_orjson"] = figures[f"merge{name}_s"] / figures[f"orjson{name}_s"]
    figures["merge_cold_over_orjson"] = figures[f"merge{name}_cold_s"] / figures[f"orjson{name}_s"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None,
                        help="also run the commands from this checkout, interleaved (arms: before, after)")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout measured as 'after' (default: this one)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller runs (see the module docstring)")
    parser.add_argument("--json-out", type=Path, default=None, help="write every sample to this file")
    args = parser.parse_args()
    trees = {"after": args.tree.resolve()}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    work = Path(tempfile.mkdtemp(prefix="bench-data-"))
    load = os.getloadavg()[0]
    try:
        runs = make_runs(trees.get("before", trees["after"]), work / "runs", args.quick, finish=list(trees.values()))
        samples: dict[str, dict[str, list[float]]] = {}
        for repeat in range(args.repeats):
            for label, tree in trees.items():
                began = time.monotonic()
                figures = measure(tree, work, runs)
                print(f"[{repeat + 1}/{args.repeats}] {'data':14s} {label:6s} {time.monotonic() - began:6.1f} s  "
                      + "  ".join(f"{k}={v:.4g}" for k, v in figures.items()), flush=True)
                for key, value in figures.items():
                    samples.setdefault(key, {}).setdefault(label, []).append(value)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPUs, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
          f"sizes {runs['sizes']}")
    print(f"{'figure':22s} " + " ".join(f"{label + ' median [min-max]':>28s}" for label in trees) + "  after/before")
    for name, by_tree in samples.items():
        cells = [f"{statistics.median(v):>10.4g} [{min(v):.4g}-{max(v):.4g}]".rjust(28)
                 for v in (by_tree[label] for label in trees)]
        ratio = (f"{statistics.median(by_tree['after']) / statistics.median(by_tree['before']):.3g}"
                 if "before" in by_tree and statistics.median(by_tree["before"]) else "")
        print(f"{name:22s} " + " ".join(cells) + f"  {ratio}")
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "sizes": runs["sizes"],
                                             "samples": samples}, indent=1) + "\n")


if __name__ == "__main__":
    main()
