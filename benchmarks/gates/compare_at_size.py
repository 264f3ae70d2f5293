"""Wall time of `pytest-agentgym compare BASE CAND` on large binary runs (issue 40).

Writes a baseline and a candidate run of N episodes each (one repeat; the tasks split
evenly over the battery's four environments, as the replica in issue 40 did), every
task's success probability drawn from Beta(2,2) or Beta(0.3,0.3) and the candidate
playing the same tasks with the same probabilities (an unchanged model: about 40% and
19% of the keys discordant, the realistic discordance that the synthetic runs of the
other studies lack). Each run then gets its light index as the report leaves it at the
end of every run (results/light_index.py). Times the command in a fresh interpreter
(reading the runs included), with the index (what a user meets) and without it (the
index deleted before each timing: every line parsed). Prints each timing, then medians
and spread, and one in-process breakdown (reading both runs, comparing) per size.

    python benchmarks/gates/compare_at_size.py                      # 10,000 and 100,000, 5 each
    python benchmarks/gates/compare_at_size.py --episodes 100000 --runs 3 --shape "Beta(0.3,0.3)"
    python benchmarks/gates/compare_at_size.py --code before=/tmp/wt-start --code after=.  # interleaved

``--code LABEL=DIR`` (repeatable) times the command of each checkout (PYTHONPATH=DIR), each on its
own copy of the runs with the light index its own code makes, the checkouts taking turns
within every repeat, so that a busy machine slows them alike.

Target: 100,000 episodes in at most 5 s (issue 40; before it, 10,000 took 275 s and
100,000 did not finish in 1,068 s: exact McNemar summed math.comb for every attainable
p-value).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.gates.simulated_runs import BATTERY, DISTRIBUTIONS, LOGS, RESULTS, write_run  # noqa: E402


def write_pair(root: Path, episodes: int, shape: tuple[float, float], seed: int) -> tuple[Path, Path]:
    """The baseline and the candidate (without light indexes: each checkout timed makes its own)."""

    rng = np.random.default_rng(seed)
    envs, per_env = list(BATTERY), episodes // len(BATTERY)
    p = {env: rng.beta(*shape, size=per_env) for env in envs}
    runs = []
    for name in ("base", "cand"):
        outcomes = {env: rng.random((per_env, 1)) < p[env][:, None] for env in envs}
        path = write_run(root, name, outcomes)
        runs.append(path)
    return runs[0], runs[1]


def time_command(base: Path, cand: Path, *, index: bool, code: Path = REPO) -> tuple[float, int, str]:
    """One timing of the checkout ``code``; before it (not timed) the light indexes are
    deleted, or made again (by that checkout) where a timing without them deleted them."""
    if index:
        leave_indexes(base, cand, code)
    else:
        for run in (base, cand):
            (run / "episodes.light.json").unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "compare", str(base), str(cand)],
                          capture_output=True, text=True, cwd=code, env={**os.environ, "PYTHONPATH": str(code)})
    seconds = time.perf_counter() - started
    return seconds, done.returncode, (done.stdout + done.stderr).strip()


def breakdown(base: Path, cand: Path) -> dict[str, float]:
    """In this process: reading both runs as compare does, then the comparison."""
    from pytest_agentgym.compare import compare_runs
    from pytest_agentgym.results.reading import read_episodes_file, record_without_turns

    started = time.perf_counter()
    for run in (base, cand):
        read_episodes_file(run / "episodes.jsonl", record_without_turns)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    comparison = compare_runs(base, cand)
    return {"read_both_s": read_s, "compare_runs_s": time.perf_counter() - started,
            "discordant": {env: sum(1 for f in e.flips if f.base != f.cand) for env, e in comparison.environments.items()},
            "verdicts": {env: e.verdict for env, e in comparison.environments.items()}}


def show(values: list[float]) -> str:
    return f"median {statistics.median(values):6.2f} s  [{min(values):.2f}-{max(values):.2f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[10_000, 100_000],
                        help="episodes per run (default: 10000 100000)")
    parser.add_argument("--shape", choices=tuple(DISTRIBUTIONS), nargs="+", default=list(DISTRIBUTIONS))
    parser.add_argument("--runs", type=int, default=5, help="timings of each cell (at least 3; default 5)")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--out", default=str(RESULTS / "compare_at_size.json"))
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=DIR",
                        help="a checkout to time (repeatable; default: this one), interleaved with the others")
    args = parser.parse_args(argv)
    codes = {}
    for given in args.code or [f"this={REPO}"]:
        label, _, where = given.partition("=")
        if not label or not (Path(where) / "pytest_agentgym").is_dir():
            parser.error(f"--code {given}: give LABEL=DIR with DIR a checkout holding pytest_agentgym/")
        codes[label] = Path(where).resolve()
    if args.runs < 3:
        parser.error(f"--runs {args.runs}: give at least 3 so that a median means something")
    if any(n < len(BATTERY) for n in args.episodes):
        parser.error(f"--episodes: at least {len(BATTERY)} (one task per environment)")
    cells = []
    with tempfile.TemporaryDirectory(prefix="compare-at-size-") as tmp:
        for episodes in args.episodes:
            for shape in args.shape:
                base, cand = write_pair(Path(tmp) / f"{episodes}-{shape}", episodes, DISTRIBUTIONS[shape], args.seed)
                pairs = {}
                for label, code in codes.items():  # each checkout its own copy (and its own index)
                    where = Path(tmp) / f"{episodes}-{shape}-{label}"
                    pairs[label] = (shutil.copytree(base, where / "base"), shutil.copytree(cand, where / "cand"))
                    time_command(*pairs[label], index=True, code=code)  # warm the caches; not counted
                timings = {label: {"indexed": [], "no index": []} for label in codes}
                exits = set()
                for i in range(args.runs):
                    for kind in ("indexed", "no index"):
                        for label, code in codes.items():
                            seconds, status, output = time_command(*pairs[label], index=kind == "indexed", code=code)
                            if status == 2:
                                print(output, file=sys.stderr)
                                raise SystemExit(f"compare exited 2 at {episodes} episodes, {shape} ({label})")
                            timings[label][kind].append(seconds)
                            exits.add(status)
                            print(f"{episodes:>7} {shape:<13} {label:<7} {kind:<8} run {i + 1}: {seconds:6.2f} s  "
                                  f"exit {status}", flush=True)
                for label, code in codes.items():
                    leave_indexes(*pairs[label], code)
                    parts = breakdown(*pairs[label]) if code == REPO else {}
                    cells.append({"episodes": episodes, "shape": shape, "code": label, "exits": sorted(exits),
                                  **parts, **timings[label]})
    print(f"\n`pytest-agentgym compare BASE CAND`, two binary runs, one repeat, candidate = baseline, "
          f"{args.runs} timings each (this machine, {os.cpu_count()} cores):")
    for cell in cells:
        inside = (f"   in process: read both {cell['read_both_s']:.2f} s, compare_runs {cell['compare_runs_s']:.2f} s; "
                  f"discordant keys {cell['discordant']}; verdicts {cell['verdicts']}" if "read_both_s" in cell else "")
        print(f"  {cell['episodes']:>7} episodes {cell['shape']:<13} {cell['code']:<7} indexed {show(cell['indexed'])}   "
              f"no index {show(cell['no index'])}{inside}")
    Path(args.out).write_text(json.dumps(cells, indent=1) + "\n", encoding="utf-8")
    print(f"results: {args.out}; logs go to {LOGS}/issue40-*.log")
    return 0


def leave_indexes(base: Path, cand: Path, code: Path = REPO) -> None:
    """The light indexes, as the report of the checkout ``code`` leaves them, where they are
    missing (made in a child process: each checkout writes its own index format)."""
    missing = [str(run / "episodes.jsonl") for run in (base, cand) if not (run / "episodes.light.json").exists()]
    if missing:
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from pytest_agentgym.results.reading import read_episodes_file; "
                        "[read_episodes_file(Path(p), keep_index=True) for p in sys.argv[1:]]", *missing],
                       check=True, cwd=code, env={**os.environ, "PYTHONPATH": str(code)})


if __name__ == "__main__":
    sys.exit(main())
