"""Rollouts per second of the rollout service with a 200 ms model, n=8 x 16 ids.

Starts, each as its own process on loopback: a small fixed-delay model (in this
file: the reference agent's TextCraft policy behind the OpenAI chat API, every
answer held for ``--delay-ms``), and ``pytest-agentgym rollout-server`` (node
local, embedded TextCraft server) once per concurrency. After a warm-up batch
(server start, client import) it posts ``{"env": "textcraft", "ids": [0..15],
"n": 8, "max_round": 10, "sampling": {"temperature": 1.0}}`` ``--repeats`` times and prints per concurrency the
median rollouts/s with its spread, and the share of ideal: the ideal wall time
of a batch is the larger of its longest rollout's model time (rounds x delay)
and all its model time over the concurrency, so 1.0 means the harness added
nothing. Concurrencies are measured interleaved (one batch each, in turn).

    python benchmarks/rollouts.py [--concurrency 8 32 128] [--repeats 3] [--delay-ms 200]
"""

# no `from __future__ import annotations`: FastAPI reads the model's annotations at runtime

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from pytest_agentgym.process.managed import ManagedServer

HERE = Path(__file__).resolve()
IDS = list(range(16))
N = 8


def serve_model(port: int, delay_ms: float) -> None:
    """The fixed-delay model: reference policy replies, each after ``delay_ms``."""
    import random

    import uvicorn
    from fastapi import FastAPI, Request

    from pytest_agentgym.model.reference.server import load_policies

    policies = load_policies()
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "fixed-delay", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        body = await request.json()
        messages = body["messages"]
        policy = policies.find(messages)
        reply = policy.reply(messages, random.Random(0)) if policy else "Action: inventory"
        await asyncio.sleep(delay_ms / 1000.0)
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "fixed-delay",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(name: str, command: list[str], workdir: Path) -> ManagedServer:
    return ManagedServer(name, command=command, log_path=workdir / f"{name}.log", startup_timeout=60,
                         label=name, cwd=workdir).start()


def batch(service: ManagedServer, model_url: str, ids: list[int], n: int,
          env: str = "textcraft") -> tuple[float, list[dict]]:
    body = {"env": env, "model": "fixed-delay", "base_url": model_url, "ids": ids, "n": n, "max_round": 10,
            "sampling": {"temperature": 1.0}}
    started = time.perf_counter()
    answer = httpx.post(f"{service.url}/rollouts", json=body, timeout=600)
    wall = time.perf_counter() - started
    answer.raise_for_status()
    rollouts = answer.json()["rollouts"]
    errors = [r["error"] for r in rollouts if r["error"]]
    if errors:
        raise SystemExit(f"{len(errors)} rollout(s) failed, e.g. {errors[0]}")
    return wall, rollouts


def phases(run_dir: Path) -> str:
    """Where a rollout's time went (from the run's records): per turn the model's and the
    environment server's latency, and per episode the rest (create, reset, close, queueing)."""
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    turns = [t for r in records for t in r["turns"]]
    rest = [r["duration_s"] - sum(t["model_latency_s"] + t["env_latency_s"] for t in r["turns"]) for r in records]
    return (f"per turn: model {statistics.median(t['model_latency_s'] for t in turns):.3f} s, env step "
            f"{statistics.median(t['env_latency_s'] for t in turns):.3f} s (medians); per rollout outside "
            f"the turns {statistics.median(rest):.2f} s; mean rounds {statistics.mean(r['rounds'] for r in records):.2f}")


def cpu_seconds(model: ManagedServer, service: ManagedServer) -> dict[str, float]:
    """CPU time used so far by the service process, its environment servers (its children)
    and the model, in seconds (user + system)."""
    import psutil

    def used(process: psutil.Process) -> float:
        times = process.cpu_times()
        return times.user + times.system

    me = psutil.Process(service.pid)
    return {"service": used(me), "env servers": sum(used(c) for c in me.children(recursive=True)),
            "model": used(psutil.Process(model.pid))}


def ideal(rollouts: list[dict], delay_s: float, concurrency: int) -> float:
    rounds = [r["rounds"] for r in rollouts]
    return max(max(rounds) * delay_s, sum(rounds) * delay_s / concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128],
                        help="episodes in flight per endpoint, one service each (default: 8 32 128)")
    parser.add_argument("--repeats", type=int, default=3, help="batches per concurrency (default: 3)")
    parser.add_argument("--delay-ms", type=float, default=200.0, help="model answer delay (default: 200)")
    parser.add_argument("--env", default="textcraft", help="environment (default: textcraft)")
    parser.add_argument("--serve-model", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model is not None:
        serve_model(args.serve_model, args.delay_ms)
        return
    load = f"{os.getloadavg()[0]:.1f}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-rollouts-"))
    model = start("model", [sys.executable, str(HERE), "--serve-model", "{port}", "--delay-ms", str(args.delay_ms)],
                  workdir)
    services = {}
    try:
        for c in args.concurrency:
            services[c] = start(f"service-c{c}", [sys.executable, "-m", "pytest_agentgym", "rollout-server",
                                                  "--port", "{port}", "--concurrency", str(c), "--run-id", f"c{c}"],
                                workdir)
            batch(services[c], model.url, [0], 1, args.env)  # warm-up: the TextCraft server, the client
        results: dict[int, list[tuple[float, float]]] = {c: [] for c in args.concurrency}
        cpu: dict[int, list[dict[str, float]]] = {c: [] for c in args.concurrency}
        for _ in range(args.repeats):
            for c in args.concurrency:
                before = cpu_seconds(model, services[c])
                wall, rollouts = batch(services[c], model.url, IDS, N, args.env)
                after = cpu_seconds(model, services[c])
                results[c].append((len(rollouts) / wall, ideal(rollouts, args.delay_ms / 1000, c) / wall))
                cpu[c].append({k: 1000 * (after[k] - before[k]) / len(rollouts) for k in after})
        print(f"rollout service, {args.env} ids 0-15 x n={N} ({len(IDS) * N} rollouts, max_round 10), "
              f"{args.delay_ms:g} ms model, {args.repeats} batches per concurrency, interleaved; "
              f"{os.cpu_count()} cores, load average {load} at the start, {os.getloadavg()[0]:.1f} at the end:")
        for c, rows in results.items():
            rates = [r for r, _ in rows]
            shares = [s for _, s in rows]
            print(f"  concurrency {c:4d}: {statistics.median(rates):6.1f} rollouts/s "
                  f"(min {min(rates):.1f}, max {max(rates):.1f}); of ideal {statistics.median(shares):.2f} "
                  f"(min {min(shares):.2f}, max {max(shares):.2f})")
            print(f"    {phases(workdir / 'reports' / f'c{c}')}")
            print("    CPU ms per rollout (medians): " + ", ".join(
                f"{k} {statistics.median(row[k] for row in cpu[c]):.1f}" for k in cpu[c][0]))
        print(json.dumps({str(c): rows for c, rows in results.items()}))
    finally:
        for service in services.values():
            service.stop()
        model.stop()


if __name__ == "__main__":
    main()
