"""A capacity model of scale-out, and a queue benchmark that checks its shape.

The model (docs/scale-out.md, "Capacity model") says how many episodes per second a
fleet can play: the least of what each part allows.

* latency:     episodes in flight / (rounds x (model latency + step time) + setup time)
* environment: env server processes / env CPU per episode (one process uses one core at most)
* harness:     worker processes / worker CPU per episode
* coordinator: coordinator processes / coordinator CPU per episode
* model:       model replicas x turns per second each / rounds
* host:        cores / the CPU per episode of every part that shares the host

:func:`bounds` and :func:`throughput` are that arithmetic; :func:`campaign` is the docs'
worked example (``--campaign`` prints it; tests/queue/test_capacity_model.py pins it).

The benchmark runs the JetStream work queue on loopback with 1, 2, 4 and 8 workers
(``--workers``), each at concurrency 48 (``--concurrency``) with its own reference agent
(every answer held 200 ms: the benchmark's model, not an LLM) and 2 Maze server processes
(``--replicas``, given to each worker as ``worker --replicas``), through
benchmarks/engine/scale_out.py's ``one_config`` (warm-up, then the measured run). For each worker
count it prints the measured episodes/s and the model's prediction for this machine, with
the constants measured in the same run:

* the latency term from one episode played alone (1 worker, concurrency 1): its rounds,
  its model and step time per turn and the rest (create, reset, close);
* the CPU terms: CPU per measured episode of the workers, their environment servers,
  their reference agents and the nats-server (their processes' user + system time, the
  median over the worker counts: the model takes them as fixed per episode), and the
  coordinator's slope (CPU over episodes of every coordinator process of the run);
* the host term with the machine's cores (``--cores``, default: all of them).

It also reads the bytes per message of the queue's two streams (work items while they
wait, results after the run) from JetStream's stream state, and the bytes per line of
episodes.jsonl: the record sizes the worked example's stream limits start from.

    python benchmarks/engine/capacity.py                 # 1,2,4,8 workers, 1 round (~3 min)
    python benchmarks/engine/capacity.py --campaign      # only the worked example, no run

The machine may be shared: what other work takes of its cores is missing from the
measured figures and not from the prediction, so read the curve's shape (where it
flattens, which bound binds), not its absolute height.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.engine.scale_out import LATENCY_MS, one_config, spread  # noqa: E402
from helpers.nats_server import NatsServer  # noqa: E402
from helpers.queue_fleet import suites  # noqa: E402


# -- the model --------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """What one episode asks of each part, in seconds (wall for the latency terms, CPU
    for the rest)."""

    rounds: float
    model_latency_s: float       # one turn's model answer, as the harness waits for it
    step_s: float                # one environment step, as the harness waits for it
    setup_s: float = 0.0         # create, reset and close of the episode's environment (wall)
    env_cpu_s: float = 0.0       # environment server CPU: every step, create and reset
    harness_cpu_s: float = 0.0   # the worker (or pytest) process that plays it
    coordinator_cpu_s: float = 0.0
    model_cpu_s: float = 0.0     # a model process's CPU (counts only where it shares the host)
    other_cpu_s: float = 0.0     # anything else on the host (the nats-server)

    @property
    def wall_s(self) -> float:
        return self.rounds * (self.model_latency_s + self.step_s) + self.setup_s


@dataclass(frozen=True)
class Fleet:
    """What the fleet has. A bound whose resource is not given (None) is left out."""

    in_flight: int                          # episodes played at once, every worker together
    workers: int | None = None              # worker (or pytest) processes
    env_processes: int | None = None        # environment server processes (replicas), every env
    coordinators: int | None = None         # coordinator processes
    model_turns_per_s: float | None = None  # model replicas x the turns per second each serves
    model_processes: int | None = None      # CPU-bound model processes (the benchmark's agents)
    host_cores: float | None = None         # when every part shares one host: its cores


def bounds(episode: Episode, fleet: Fleet) -> dict[str, float]:
    """Episodes per second each part allows; the fleet plays at the least of them."""
    found = {"latency": fleet.in_flight / episode.wall_s}
    per_process = (("environment", fleet.env_processes, episode.env_cpu_s),
                   ("harness", fleet.workers, episode.harness_cpu_s),
                   ("coordinator", fleet.coordinators, episode.coordinator_cpu_s))
    for name, processes, cpu in per_process:
        if processes and cpu > 0:
            found[name] = processes / cpu
    if fleet.model_turns_per_s:
        found["model"] = fleet.model_turns_per_s / episode.rounds
    elif fleet.model_processes and episode.model_cpu_s > 0:
        found["model"] = fleet.model_processes / episode.model_cpu_s
    if fleet.host_cores:
        shared = (episode.env_cpu_s + episode.harness_cpu_s + episode.coordinator_cpu_s
                  + episode.model_cpu_s + episode.other_cpu_s)
        if shared > 0:
            found["host"] = fleet.host_cores / shared
    return found


def throughput(episode: Episode, fleet: Fleet) -> tuple[float, str]:
    """(episodes per second, the bound that sets it)."""
    found = bounds(episode, fleet)
    name = min(found, key=found.__getitem__)
    return found[name], name


# -- the worked example -----------------------------------------------------------------


@dataclass(frozen=True)
class EnvShare:
    """One environment of the campaign's mix: its share of the episodes, its rounds with
    the model, and its server's CPU per step and per episode (create + reset)."""

    name: str
    share: float
    rounds: float
    env_cpu_step_s: float
    env_cpu_setup_s: float


#: The mix of the worked example: shares and rounds with an 8B model are assumptions (the
#: reference agent takes 10.3 / 8.0 / 2.2 rounds); the servers' CPU is measured on the
#: project's 2-core machine (docs/scale-out.md, "Capacity model", says which figure each is).
MIX = (EnvShare("BabyAI", 0.4, 12, 0.0010, 0.0115),
       EnvShare("Maze", 0.3, 10, 0.00042, 0.0),
       EnvShare("TextCraft", 0.3, 6, 0.0014, 0.0),)


@dataclass(frozen=True)
class Campaign:
    """The assumptions and measured constants the worked example starts from."""

    gpu_hours: float = 1000.0
    gpus_per_node: int = 8
    tokens_per_s_per_gpu: float = 3000.0   # assumed: 8B on vLLM, one H100, many sequences at once
    tokens_per_turn: float = 150.0         # assumed: output tokens of one turn
    turn_latency_s: float = 4.0            # assumed: one turn's answer at that load (prefill + decode)
    step_s: float = 0.002                  # measured: an env step's median at low load
    harness_cpu_round_s: float = 0.00063   # measured: a queue worker's CPU per round (capacity.py)
    coordinator_cpu_s: float = 0.0031      # measured: the coordinator's CPU per episode, slope (capacity.py)
    nats_cpu_s: float = 0.0015             # measured: nats-server CPU per episode (capacity.py)
    episodes_per_replica: int = 64         # replicas: auto
    record_bytes_round: float = 874.0      # measured: episodes.jsonl bytes per round (Maze, reference agent)
    words_bytes_turn: float = 600.0        # assumed: an LLM's 150 tokens of text more per turn
    result_overhead_bytes: float = 1840.0  # measured: a result on the stream less its episodes.jsonl line
    work_item_bytes: float = 670.0         # measured: a work item on the stream
    ack_wait_s: float = 60.0               # the queue URL's default
    coordinator_load: float = 0.5          # assumed: keep each coordinator process at most half busy
    episodes_per_run: int = 50_000         # assumed: a run's size (one pytest process holds its items)
    mix: tuple[EnvShare, ...] = field(default=MIX)


def campaign(c: Campaign, hours: float = 1.0) -> dict[str, float]:
    """What the campaign needs to spend ``c.gpu_hours`` in ``hours`` of wall time: one
    worker per GPU, its in flight by Little's law, replicas as ``auto`` gives them, enough
    coordinators (separate runs) to keep each under ``coordinator_load``, and what the
    queue's streams carry and keep."""
    gpus = c.gpu_hours / hours
    turns_per_gpu = c.tokens_per_s_per_gpu / c.tokens_per_turn
    rounds = sum(e.share * e.rounds for e in c.mix)
    env_cpu = sum(e.share * (e.rounds * e.env_cpu_step_s + e.env_cpu_setup_s) for e in c.mix)
    episode = Episode(rounds=rounds, model_latency_s=c.turn_latency_s, step_s=c.step_s, env_cpu_s=env_cpu,
                      harness_cpu_s=c.harness_cpu_round_s * rounds, coordinator_cpu_s=c.coordinator_cpu_s)
    eps = gpus * turns_per_gpu / rounds                    # the model bound: the GPUs are the point
    in_flight_per_gpu = math.ceil(turns_per_gpu * (c.turn_latency_s + c.step_s))  # Little's law
    replicas = math.ceil(in_flight_per_gpu / c.episodes_per_replica)  # per env, per worker (auto)
    coordinators = math.ceil(eps * c.coordinator_cpu_s / c.coordinator_load)
    fleet = Fleet(in_flight=int(in_flight_per_gpu * gpus), workers=int(gpus),
                  env_processes=int(gpus * replicas * len(c.mix)), coordinators=coordinators,
                  model_turns_per_s=gpus * turns_per_gpu)
    found = bounds(episode, fleet)
    episodes = eps * hours * 3600
    record_bytes = (c.record_bytes_round + c.words_bytes_turn) * rounds + c.result_overhead_bytes
    # per episode: the item's publish, delivery and ack; an in-progress ack every third
    # of AckWait while it plays; the result's publish, delivery to the coordinator and ack
    messages = 6 + math.floor(episode.wall_s / (c.ack_wait_s / 3))
    queued = coordinators * min(c.episodes_per_run, episodes / coordinators)
    return {
        "gpus": gpus, "nodes": gpus / c.gpus_per_node, "turns_per_s_per_gpu": turns_per_gpu, "rounds": rounds,
        "episodes_per_s": eps, "episodes": episodes, "episode_wall_s": episode.wall_s,
        "in_flight_per_gpu": in_flight_per_gpu, "workers": gpus, "replicas_per_env": replicas,
        "env_processes": fleet.env_processes, "env_cpu_ms": 1000 * env_cpu,
        "harness_cpu_ms": 1000 * episode.harness_cpu_s, "env_cores_busy": eps * env_cpu,
        "harness_cores_busy": eps * episode.harness_cpu_s, "coordinators": coordinators,
        "coordinator_cores_busy": eps * c.coordinator_cpu_s, "nats_cores_busy": eps * c.nats_cpu_s,
        "latency_bound": found["latency"], "environment_bound": found["environment"],
        "harness_bound": found["harness"], "coordinator_bound": found["coordinator"], "model_bound": found["model"],
        "messages_per_episode": messages, "nats_msgs_per_s": eps * messages, "record_bytes": record_bytes,
        "results_bytes_per_s": eps * record_bytes, "results_bytes": episodes * record_bytes,
        # each coordinator publishes its run's items at its start; they leave as workers ack them
        "runs": math.ceil(episodes / c.episodes_per_run), "work_items_queued": queued,
        "work_bytes_queued": queued * c.work_item_bytes,
    }


def print_campaign(c: Campaign) -> None:
    for hours in (1.0, 8.0):
        got = campaign(c, hours)
        print(f"\n{c.gpu_hours:g} GPU-hours in {hours:g} h: {got['gpus']:.0f} GPUs ({got['nodes']:.1f} nodes of "
              f"{c.gpus_per_node})")
        for key, value in got.items():
            print(f"  {key:>24}: {value:,.3f}" if value < 100 else f"  {key:>24}: {value:,.0f}")


# -- the benchmark ------------------------------------------------------------------------


class StreamWatch(threading.Thread):
    """Reads the queue streams' state every half second: the largest bytes per message
    seen in work streams (items wait there only until a worker acks them) and results
    streams. A thread of its own, so the benchmark's blocking calls do not stop it."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.per_message = {"work": 0.0, "results": 0.0}
        self.done = threading.Event()

    def run(self) -> None:
        asyncio.run(self._watch())

    async def _watch(self) -> None:
        import nats

        connection = await nats.connect(self.url, connect_timeout=5)
        js = connection.jetstream()
        try:
            while not self.done.is_set():
                try:
                    infos = await js.streams_info()
                except Exception:  # noqa: BLE001 - the server is being stopped
                    break
                for info in infos:
                    kind = "work" if info.config.name.endswith("_WORK") else "results"
                    if info.state.messages:
                        self.per_message[kind] = max(self.per_message[kind], info.state.bytes / info.state.messages)
                await asyncio.sleep(0.5)
        finally:
            await connection.close()


def measured_episode(alone: dict, runs: list[dict]) -> Episode:
    """The model's constants from this run: the latency terms from the episode played
    alone; each CPU term the median over ``runs`` of that part's CPU per measured episode
    (the model takes them as fixed per episode, whatever the fleet's size), except the
    coordinator's, which is the slope of its CPU over the episodes of every coordinator
    process of the run (warm-ups included): a pytest process's start-up, collection and
    report are a fixed cost the slope leaves out."""
    def median(part: str) -> float:
        return statistics.median(r["cpu_ms"][part] for r in runs) / 1000

    episodes, cpu = zip(*(pair for r in runs for pair in r["coordinator_runs"]))
    wall = alone["rounds"] * (alone["turn_model_s"] + alone["turn_env_s"])
    return Episode(rounds=alone["rounds"], model_latency_s=alone["turn_model_s"], step_s=alone["turn_env_s"],
                   setup_s=max(0.0, alone["median_episode_s"] - wall), env_cpu_s=median("env"),
                   harness_cpu_s=median("worker"), model_cpu_s=median("model"), other_cpu_s=median("nats"),
                   coordinator_cpu_s=statistics.linear_regression(episodes, cpu).slope)


def this_machine(workers: int, replicas: int, cores: float, concurrency: int) -> Fleet:
    """The benchmark's fleet: every part on this host, one reference agent per worker."""
    return Fleet(in_flight=workers * concurrency, workers=workers, env_processes=workers * replicas,
                 coordinators=1, model_processes=workers, host_cores=cores)


def describe(episode: Episode, cores: float) -> str:
    ms = {name: 1000 * getattr(episode, f"{name}_cpu_s") for name in ("harness", "env", "model", "other",
                                                                       "coordinator")}
    return (f"constants: one episode {episode.wall_s:.2f} s = {episode.rounds:.1f} rounds x "
            f"({1000 * episode.model_latency_s:.0f} ms model + {1000 * episode.step_s:.1f} ms step) + "
            f"{episode.setup_s:.2f} s setup; CPU ms per episode: worker {ms['harness']:.1f}, env servers "
            f"{ms['env']:.1f}, model {ms['model']:.1f}, nats-server {ms['other']:.1f}, coordinator "
            f"{ms['coordinator']:.1f} (slope); host {cores:g} cores")


def table(results: dict[int, list[dict]], episode: Episode, args: argparse.Namespace) -> list[str]:
    lines = [f"{'workers':>7}  {'in flight':>9}  {'measured eps':>20}  {'predicted':>9}  {'bound':>8}  "
             f"{'measured/predicted':>18}  {'latency':>7}  {'host':>5}  {'CPU ms/episode':>18}  {'cores used':>17}"]
    for n, rows in results.items():
        fleet = this_machine(n, args.replicas, args.cores, args.concurrency)
        found = bounds(episode, fleet)
        value, name = throughput(episode, fleet)
        total = [sum(r["cpu_ms"].values()) + 1000 * episode.coordinator_cpu_s for r in rows]
        used = [r["eps"] * t / 1000 for r, t in zip(rows, total)]
        lines.append(f"{n:>7}  {n * args.concurrency:>9}  {spread([r['eps'] for r in rows], '.1f'):>20}  "
                     f"{value:>9.1f}  {name:>8}  {spread([r['eps'] / value for r in rows], '.2f'):>18}  "
                     f"{found['latency']:>7.1f}  {found['host']:>5.0f}  {spread(total, '.1f'):>18}  "
                     f"{spread(used, '.2f'):>17}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts (default: 1,2,4,8)")
    parser.add_argument("--concurrency", type=int, default=48, help="episodes in flight per worker (default: 48)")
    parser.add_argument("--replicas", type=int, default=2, help="Maze server processes per worker (default: 2)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds over the worker counts (default: 1)")
    parser.add_argument("--waves", type=int, default=3,
                        help="episodes per slot in a measured run (at least 64 episodes; default: 3)")
    parser.add_argument("--cores", type=float, default=os.cpu_count(), help="the host's cores for the model")
    parser.add_argument("--campaign", action="store_true", help="print the worked example and exit")
    parser.add_argument("--json", default=None, help="also write the raw figures here")
    args = parser.parse_args()
    if args.campaign:
        print_campaign(Campaign())
        return
    counts = [int(n) for n in args.workers.split(",")]
    results: dict[int, list[dict]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(prefix="capacity-") as tmp:
        base = Path(tmp)
        nats = NatsServer(base / "nats", jetstream=True)
        watch = StreamWatch(nats.url)
        watch.start()
        try:
            suites(base / "alone", Maze="0-15")
            alone = one_config(base, nats.url, base / "alone", 1, "alone", 1, concurrency=1, nats_pid=nats.proc.pid)
            print(f"one episode alone (1 worker, concurrency 1, {LATENCY_MS} ms model): median "
                  f"{alone['median_episode_s']:.2f} s, {alone['rounds']:.1f} rounds, per turn model "
                  f"{1000 * alone['turn_model_s']:.0f} ms + step {1000 * alone['turn_env_s']:.1f} ms", flush=True)
            for rnd in range(args.repeats):
                for n in counts:  # interleaved: every round runs every count once
                    project = base / f"p{n}-{rnd}"
                    suites(project, Maze="0-15")
                    got = one_config(base, nats.url, project, n, f"n{n}r{rnd}",
                                     max(4, math.ceil(args.waves * n * args.concurrency / 16)),
                                     concurrency=args.concurrency, replicas=args.replicas, nats_pid=nats.proc.pid)
                    results[n].append(got)
                    cpu = got["cpu_ms"]
                    print(f"round {rnd + 1}, {n} worker(s) x {args.replicas} replica(s): {got['episodes']} "
                          f"episodes, {got['eps']:.2f} episodes/s; CPU ms per episode: worker {cpu['worker']:.1f}, "
                          f"env {cpu['env']:.1f}, model {cpu['model']:.1f}, nats {cpu['nats']:.1f}", flush=True)
        finally:
            watch.done.set()
            watch.join(5)
            nats.stop()
    runs = [r for rows in results.values() for r in rows]
    episode = measured_episode(alone, runs)
    print("\n" + describe(episode, args.cores))
    print(f"bytes: episodes.jsonl line {statistics.mean(r['record_bytes'] for r in runs):,.0f} "
          f"({statistics.mean(r['record_bytes'] / r['rounds'] for r in runs):,.0f} per round); per message on "
          f"the streams: work item {watch.per_message['work']:,.0f}, result {watch.per_message['results']:,.0f}\n")
    print("\n".join(table(results, episode, args)))
    if args.json:
        Path(args.json).write_text(json.dumps({"alone": alone, "results": results, "episode": episode.__dict__,
                                               "bytes_per_message": watch.per_message}, indent=2))


if __name__ == "__main__":
    main()
