"""Throughput of the JetStream work queue with 1, 2 and 4 workers (issue 12's figure).

The model answers every turn after a fixed 200 ms: each worker's own reference
agent (`pytest-agentgym reference-agent --latency-ms 200`, a real HTTP server
that sleeps before it answers; the benchmark's model, not an LLM). Each worker
plays at concurrency 4 with its own embedded Maze server. The coordinator is a
real `pytest suites --agentgym-queue=...` process.

For each worker count (interleaved, ``--repeats`` rounds): start the workers, warm
them up (one episode per slot, so server start-up is not measured), then run
the measured selection (Maze 0-15, ``--repeat`` times each). Figures:

* episodes/s: episodes / (last episode end - first episode start), from the
  workers' logs (millisecond timestamps), so pytest's own start-up is left out;
* fraction of ideal: episodes/s / (workers x 4 / t1), where t1 is the median
  duration of one episode played alone (1 worker at concurrency 1, measured first);
* slot use: the time slots were busy / (slots x window);
* coordinator CPU per episode: user+system CPU of the whole pytest process
  (start-up, collection, the report included) / episodes, from its rusage; and the
  marginal CPU: (the measured run's CPU - the warm-up run's) / (the episodes more it played).

Prints the median and range of each over the repeats. Run from the repository root:

    python benchmarks/engine/scale_out.py --repeats 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from helpers.nats_server import NatsServer  # noqa: E402
from helpers.queue_fleet import Fleet, env_with_repo, suites, worker_profile  # noqa: E402
from helpers.run_dirs import read_episodes as records  # noqa: E402

SLOTS = 4
LATENCY_MS = 200


def coordinator(project: Path, url: str, run_id: str, repeat: int) -> float:
    """Run the pytest coordinator; returns its CPU seconds (user + system)."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suites",
                             f"--agentgym-queue={url}", f"--agentgym-run-id={run_id}",
                             f"--agentgym-repeat={repeat}", "--agentgym-no-nats"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env_with_repo())
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"coordinator run {run_id} failed:\n{output.decode(errors='replace')[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def window(fleet: Fleet, names: list[str], run_id: str) -> tuple[float, float]:
    """(seconds from the first episode start to the last end, busy slot-seconds) of ``run_id``."""
    starts, ends = {}, {}
    for name in names:
        for line in fleet.log(name).splitlines():
            for word, into in ((" playing ", starts), (" played ", ends)):
                if word in line and f" {run_id}:" in line:
                    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    into[(name, line.split(word, 1)[1].strip())] = stamp
    busy = sum(ends[k] - starts[k] for k in ends if k in starts)
    return max(ends.values()) - min(starts.values()), busy


def fleet_cpu(fleet: Fleet, names: list[str], nats_pid: int | None = None) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each part of the fleet, summed over its
    processes: the workers themselves (the harness), their reference agents (the model),
    the workers' other descendants (their environment servers, replicas included), and
    the nats-server. Read while the processes live, so call it before stopping them."""
    import psutil

    def used(process: psutil.Process) -> float:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            return 0.0  # exited while we looked
        return times.user + times.system

    parts = {"worker": 0.0, "model": 0.0, "env": 0.0,
             "nats": used(psutil.Process(nats_pid)) if nats_pid else 0.0}
    for name in names:
        worker = psutil.Process(fleet.procs[name].pid)
        parts["worker"] += used(worker)
        for child in worker.children(recursive=True):
            try:
                model = "reference-agent" in child.cmdline()
            except psutil.NoSuchProcess:
                continue
            parts["model" if model else "env"] += used(child)
    return parts


def one_config(base: Path, nats_url: str, project: Path, workers: int, tag: str, repeat: int,
               concurrency: int = SLOTS, replicas: int | None = None, nats_pid: int | None = None) -> dict:
    """Start ``workers`` workers (each with ``--replicas`` when given), warm them up, play the
    selection of ``project`` through a coordinator, and return the run's figures, with the
    CPU per measured episode of each part of the fleet (``cpu_ms``: the measured run's
    CPU less the warm-up's, so server start-up is left out)."""
    queue = f"{nats_url}?name={tag}&ack_wait=30"
    fleet = Fleet(base / tag, queue)
    profile = worker_profile(base / f"{tag}.yaml", concurrency=concurrency, latency_ms=LATENCY_MS)
    names = [f"{tag}-w{i}" for i in range(workers)]
    extra = ("--replicas", str(replicas)) if replicas is not None else ()
    try:
        for name in names:
            fleet.start(name, profile=profile, heartbeat=5.0, extra=extra)
        fleet.wait_serving(*names, timeout=120)
        warm = base / f"{tag}-warm"
        # at least one episode per slot; Maze has 25 tasks, so more than 16 slots take repeats of 0-15
        warm_tasks, warm_repeat = min(16, workers * concurrency), math.ceil(workers * concurrency / 16)
        suites(warm, Maze=f"0-{warm_tasks - 1}")
        warm_cpu = coordinator(warm, queue, f"{tag}-warm", warm_repeat)
        before = fleet_cpu(fleet, names, nats_pid)
        cpu = coordinator(project, queue, tag, repeat)
        after = fleet_cpu(fleet, names, nats_pid)
        rows = records(project / "reports" / tag)
        assert all(r["error"] is None for r in rows), "an episode errored"
        wall, busy = window(fleet, names, tag)
    finally:
        fleet.stop_all()
    lines = (project / "reports" / tag / "episodes.jsonl").read_bytes().splitlines()
    return {"episodes": len(rows), "wall_s": wall, "eps": len(rows) / wall, "busy": busy,
            "slot_use": busy / (workers * concurrency * wall), "cpu_per_episode_ms": 1000 * cpu / len(rows),
            # the measured run's CPU less the warm-up run's, per extra episode: pytest's fixed cost left out
            "marginal_cpu_ms": 1000 * (cpu - warm_cpu) / (len(rows) - warm_tasks * warm_repeat),
            # (episodes, CPU seconds) of each coordinator process: the warm-up's and the measured one's
            "coordinator_runs": [(warm_tasks * warm_repeat, warm_cpu), (len(rows), cpu)],
            "cpu_ms": {part: 1000 * (after[part] - before[part]) / len(rows) for part in after},
            "rounds": statistics.mean(r["rounds"] for r in rows),
            "record_bytes": statistics.mean(len(line) for line in lines),
            "median_episode_s": statistics.median(r["duration_s"] for r in rows),
            "turn_model_s": statistics.median(t["model_latency_s"] for r in rows for t in r["turns"]),
            "turn_env_s": statistics.median(t["env_latency_s"] for r in rows for t in r["turns"])}


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over 1, 2, 4 workers (default: 3)")
    parser.add_argument("--repeat", type=int, default=4, help="plays of each Maze task 0-15 (default: 4: 64 episodes)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts (default: 1,2,4)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="environment server processes per worker (worker --replicas; default: its profile's)")
    parser.add_argument("--json", default=None, help="also write the raw figures here")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        base = Path(tmp)
        nats = NatsServer(base / "nats", jetstream=True)
        try:
            alone_project = base / "alone"
            suites(alone_project, Maze="0-15")
            alone = one_config(base, nats.url, alone_project, 1, "alone", 1, concurrency=1)
            t1 = alone["median_episode_s"]
            print(f"one episode alone (1 worker, concurrency 1, {LATENCY_MS} ms model): median {t1:.2f} s "
                  f"over {alone['episodes']} episodes", flush=True)
            results: dict[int, list[dict]] = {n: [] for n in counts}
            for rnd in range(args.repeats):
                for n in counts:  # interleaved: every round runs every count once
                    project = base / f"p{n}-{rnd}"
                    suites(project, Maze="0-15")
                    figures = one_config(base, nats.url, project, n, f"n{n}r{rnd}", args.repeat, replicas=args.replicas)
                    figures["fraction"] = figures["eps"] / (n * SLOTS / t1)
                    results[n].append(figures)
                    print(f"round {rnd + 1}, {n} worker(s): {figures['eps']:.2f} episodes/s, "
                          f"{figures['fraction']:.2f} of ideal, slot use {figures['slot_use']:.2f}, "
                          f"coordinator CPU {figures['cpu_per_episode_ms']:.0f} ms/episode "
                          f"({figures['marginal_cpu_ms']:.0f} ms marginal)", flush=True)
        finally:
            nats.stop()
    print(f"\n{LATENCY_MS} ms model, concurrency {SLOTS} per worker, {args.repeat * 16} Maze episodes per run, "
          f"median [min-max] of {args.repeats} run(s); ideal = workers x {SLOTS} / {t1:.2f} s")
    print(f"{'workers':>7}  {'episodes/s':>18}  {'fraction of ideal':>18}  {'slot use':>18}  "
          f"{'coord. CPU ms/episode':>22}  {'marginal CPU ms':>16}  {'episode s (median)':>18}")
    for n in counts:
        rows = results[n]
        print(f"{n:>7}  {spread([r['eps'] for r in rows], '.2f'):>18}  "
              f"{spread([r['fraction'] for r in rows], '.2f'):>18}  {spread([r['slot_use'] for r in rows], '.2f'):>18}  "
              f"{spread([r['cpu_per_episode_ms'] for r in rows], '.0f'):>22}  "
              f"{spread([r['marginal_cpu_ms'] for r in rows], '.0f'):>16}  "
              f"{spread([r['median_episode_s'] for r in rows], '.2f'):>18}")
    if args.json:
        Path(args.json).write_text(json.dumps({"t1": t1, "results": results}, indent=2))


if __name__ == "__main__":
    main()
