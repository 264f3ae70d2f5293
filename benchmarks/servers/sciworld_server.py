"""The embedded SciWorld server's closing figures: start-up time (the JVM), episodes/s
and resident memory (the server process plus its JVMs).

    python benchmarks/servers/sciworld_server.py [--starts 3] [--episodes 8] [--concurrency 2] [--rounds 2]

1. Start-up: ``pytest-agentgym serve sciworld`` is started ``--starts`` times; the
   figure is the time from spawning it to the first answer of ``GET /`` (one JVM
   start plus reading the task list from it). Median and range.
2. Episodes: the simulator's own gold action sequences (computed once, in this
   process, for the tasks in ``INDICES``) are played over HTTP, ``create -> reset ->
   gold steps -> close``, ``--concurrency`` episodes at a time, no model in the loop:
   this is what the server can do. Two servers, interleaved ``--rounds`` times:
   A = default (idle JVMs reused, 2 spares), B = ``AGENTGYM_SCIWORLD_SPARE_JVMS=0``
   (a new JVM per ``/create``, as AgentGym's server does). Every episode must end
   with score 100, or the benchmark stops.
3. Memory: the resident set (psutil) of the server process and, separately, the sum
   of its JVM children, sampled every 0.2 s while the episodes run; the peak is printed.

Needs the ``sciworld`` extra and Java. The machine's load average is printed with the
figures: JVM start-up time depends on it heavily.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil

from pytest_agentgym.servers.embedded.sciworld_tasks import list_games, missing_requirements, start_simulator
from pytest_agentgym.process.health import free_port
from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer

#: lifespan (3 kinds), find a non-living thing, a circuit, a secondary paint colour
INDICES = [4240, 4366, 4491, 3236, 1397, 4169, 4241, 3237]


def gold_paths(indices: list[int]) -> dict[int, list[str]]:
    simulator = start_simulator()
    try:
        games = list_games(simulator)
        paths = {}
        for index in indices:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                simulator.load(games[index].task_name, games[index].variation, "", generateGoldPath=True)
            paths[index] = list(simulator.get_gold_action_sequence())
        return paths
    finally:
        simulator.close()


def start(env: dict[str, str] | None = None) -> tuple[ManagedServer, float]:
    began = time.perf_counter()
    server = ManagedServer("SciWorld", command=embedded_command("sciworld"), port=free_port(),
                           env=env, startup_timeout=300).start()
    return server, time.perf_counter() - began


def memory_mb(pid: int) -> tuple[float, float]:
    """(server process RSS, sum of its JVMs' RSS) in MiB."""
    process = psutil.Process(pid)
    jvms = 0
    for child in process.children(recursive=True):
        try:
            jvms += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return process.memory_info().rss / 2**20, jvms / 2**20


class PeakMemory:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.server = self.jvms = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            server, jvms = memory_mb(self.pid)
            self.server, self.jvms = max(self.server, server), max(self.jvms, jvms)
            self._stop.wait(0.2)

    def stop(self) -> "PeakMemory":
        self._stop.set()
        self._thread.join()
        return self


def episode(url: str, index: int, actions: list[str]) -> int:
    with httpx.Client(base_url=url, timeout=600) as http:
        env_id = http.post("/create").json()["id"]
        answer = http.post("/reset", json={"id": env_id, "data_idx": index}).json()
        for action in actions:
            answer = http.post("/step", json={"id": env_id, "action": action}).json()
            if answer.get("done"):
                break
        assert http.post("/close", json={"id": env_id}).json() is True
    if answer.get("score") != 100:
        raise SystemExit(f"task {index}: the gold path ended with {answer}; expected score 100")
    return len(actions)


def episodes_per_s(server: ManagedServer, gold: dict[int, list[str]], concurrency: int,
                   count: int) -> tuple[float, PeakMemory]:
    indices = [INDICES[n % len(INDICES)] for n in range(count)]
    peak = PeakMemory(server.proc.pid)
    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda index: episode(server.url, index, gold[index]), indices))
    return count / (time.perf_counter() - began), peak.stop()


def spread(values: list[float], unit: str, digits: int = 2) -> str:
    return (f"median {statistics.median(values):.{digits}f} {unit} "
            f"(min {min(values):.{digits}f}, max {max(values):.{digits}f}, n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="server starts timed (default: 3)")
    parser.add_argument("--episodes", type=int, default=8, help="episodes per round and server (default: 8)")
    parser.add_argument("--concurrency", type=int, default=2, help="episodes at a time (default: 2)")
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds, interleaved (default: 2)")
    args = parser.parse_args()
    why = missing_requirements()
    if why:
        raise SystemExit(why)
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    startups = []
    for _ in range(args.starts):
        server, seconds = start()
        startups.append(seconds)
        idle = memory_mb(server.proc.pid)
        server.stop()
    print(f"start-up (spawn -> GET / answers): {spread(startups, 's')}")
    print(f"idle server after start-up: server process {idle[0]:.0f} MiB, JVMs {idle[1]:.0f} MiB (1 JVM)")

    gold = gold_paths(sorted(set(INDICES)))
    steps = sum(len(gold[INDICES[n % len(INDICES)]]) for n in range(args.episodes))
    print(f"workload: {args.episodes} episodes ({steps} gold steps) per round, "
          f"{args.concurrency} at a time, tasks {INDICES}")
    modes = {"A reuse idle JVMs (default)": None, "B new JVM per /create (AGENTGYM_SCIWORLD_SPARE_JVMS=0)":
             {"AGENTGYM_SCIWORLD_SPARE_JVMS": "0"}}
    servers = {name: start(env)[0] for name, env in modes.items()}
    rates: dict[str, list[float]] = {name: [] for name in modes}
    peaks: dict[str, list[PeakMemory]] = {name: [] for name in modes}
    try:
        for _ in range(args.rounds):
            for name, server in servers.items():
                rate, peak = episodes_per_s(server, gold, args.concurrency, args.episodes)
                rates[name].append(rate)
                peaks[name].append(peak)
    finally:
        for server in servers.values():
            server.stop()
    for name in modes:
        print(f"{name}: {spread(rates[name], 'episodes/s', 3)}; peak RSS: server process "
              f"{max(p.server for p in peaks[name]):.0f} MiB, JVMs {max(p.jvms for p in peaks[name]):.0f} MiB")
    ratio = [a / b for a, b in zip(*rates.values())]
    print(f"A/B episodes/s per round: {', '.join(f'{r:.2f}' for r in ratio)}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
