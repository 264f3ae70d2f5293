"""Wall time of `pytest-agentgym compare BASE CAND`, before and after issue 23.

Writes one baseline and one candidate run directory shaped like the lightweight
battery (BabyAI 90, TextCraft 100, Maze 25, Wordle 25 tasks; one repeat) and
times the whole command in a fresh interpreter, interleaving two source trees:
the one at HEAD before the change (a git worktree, default /work/before23) and
this one. Each tree is put first on PYTHONPATH and the command checks that it
imported its package from that tree. Prints each run, then medians and spread.

    python benchmarks/gates/compare_startup.py                 # 5 runs of each, interleaved
    python benchmarks/gates/compare_startup.py --runs 7 --old /work/before23
    python benchmarks/gates/compare_startup.py --command trend # the same for `trend BASE CAND`

Target: the new tree's median at most 1.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.gates.simulated_runs import BATTERY, write_run  # noqa: E402

LAUNCH = ("import sys, pytest_agentgym; from pathlib import Path; "
          "assert Path(pytest_agentgym.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), "
          "pytest_agentgym.__file__; from pytest_agentgym.cli import main; sys.exit(main(sys.argv[2:]))")


def time_once(tree: Path, args: list[str]) -> tuple[float, int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCH, str(tree), *args], env=env, capture_output=True,
                          text=True, cwd=tree)
    seconds = time.perf_counter() - started
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return seconds, done.returncode, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="/work/before23", help="the tree before the change")
    parser.add_argument("--runs", type=int, default=5, help="runs of each tree (at least 3; default 5)")
    parser.add_argument("--command", choices=("compare", "trend"), default="compare")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error(f"--runs {args.runs}: give at least 3 so that a median means something")
    trees = {"before": Path(args.old), "after": REPO}
    if not (trees["before"] / "pytest_agentgym").is_dir():
        parser.error(f"--old {args.old} holds no pytest_agentgym/; create it with "
                     f"`git worktree add {args.old} <commit before the change>`")
    rng = np.random.default_rng(23)
    times: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="compare-startup-") as tmp:
        p = {env: rng.beta(2, 2, size=n) for env, n in BATTERY.items()}
        base = write_run(Path(tmp), "base", {e: rng.random((n, 1)) < p[e][:, None] for e, n in BATTERY.items()})
        cand = write_run(Path(tmp), "cand", {e: rng.random((n, 1)) < p[e][:, None] for e, n in BATTERY.items()})
        command = [args.command, str(base), str(cand)]
        for name in trees:  # warm the file cache and the bytecode of both trees; not counted
            time_once(trees[name], command)
        for i in range(args.runs):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                seconds, code, last = time_once(trees[name], command)
                times[name].append(seconds)
                print(f"run {i + 1} {name:<6} {seconds:6.2f} s  exit {code}" + (f"  ({last})" if code == 2 else ""),
                      flush=True)
    print(f"\n`pytest-agentgym {args.command} BASE CAND` on the battery (90/100/25/25 tasks), "
          f"{args.runs} interleaved runs each:")
    for name, values in times.items():
        print(f"  {name:<6} median {statistics.median(values):6.2f} s   min {min(values):6.2f}   "
              f"max {max(values):6.2f}   ({trees[name]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
