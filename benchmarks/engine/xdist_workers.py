"""When does pytest-xdist's ``-n`` pay for a run of the lightweight battery?

``pytest suites/lightweight`` (BabyAI, TextCraft, Maze and Wordle on the local node: the
embedded servers and the reference agent, 240 episodes) with each worker count given,
interleaved (one run of every count, then the next round) so that load on the machine
falls on each alike. Each run is a fresh process with its own reports directory; the
figures are the wall time and the CPU time of the run and its children, median
[min-max] over the rounds.

    python benchmarks/engine/xdist_workers.py --workers 0 2 4 --repeats 3

What a worker costs: its own interpreter, pytest, collection and the plugin's client side
(the controller owns the servers and hands their addresses to the workers). What it buys:
a second event loop for the episodes. On a machine whose cores the servers and the
reference agent already keep busy, the first outweighs the second.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def one_run(workers: int, reports: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (this run's processes) of one battery run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "suites/lightweight", "-q", "-p", "no:cacheprovider",
                           "-n", str(workers), f"--agentgym-reports={reports}"],
                          cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"-n {workers} exited {done.returncode}:\n{done.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def show(values: list[float]) -> str:
    return f"{statistics.median(values):6.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="worker counts (0: no xdist)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    walls: dict[int, list[float]] = {n: [] for n in args.workers}
    cpus: dict[int, list[float]] = {n: [] for n in args.workers}
    print(f"cores: {os.cpu_count()}; load at start: {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        one_run(args.workers[0], Path(scratch) / "warm-up")  # bytecode and caches, not measured
        for round_ in range(args.repeats):
            order = args.workers if round_ % 2 == 0 else list(reversed(args.workers))
            for n in order:
                wall, cpu = one_run(n, Path(scratch) / f"r{round_}-n{n}")
                walls[n].append(wall)
                cpus[n].append(cpu)
                print(f"round {round_}: -n {n}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    print(f"load at end: {os.getloadavg()[0]:.2f}")
    print(f"{'workers':>8} | {'wall s, median [min-max]':>26} | {'CPU s, median [min-max]':>26} | wall / -n {args.workers[0]}")
    base = statistics.median(walls[args.workers[0]])
    for n in args.workers:
        print(f"{n:>8} | {show(walls[n]):>26} | {show(cpus[n]):>26} | {statistics.median(walls[n]) / base:.2f}")


if __name__ == "__main__":
    main()
