"""Rollouts per second of the rollout service with a 200 ms model, n=8 x 16 ids.

Starts, each as its own process on loopback: a small fixed-delay model
(benchmarks/common/fake_model.py with the reference agent's policies, every answer held for
``--delay-ms``; with ``--tokens``, the one in this file, which also sends token ids and
logprobs), and ``pytest-agentgym rollout-server`` (node
local, embedded TextCraft server) once per concurrency. After a warm-up batch
(server start, client import) it posts ``{"env": "textcraft", "ids": [0..15],
"n": 8, "max_round": 10, "sampling": {"temperature": 1.0}}`` ``--repeats`` times and prints per concurrency the
median rollouts/s with its spread, and the share of ideal: the ideal wall time
of a batch is the larger of its longest rollout's model time (rounds x delay)
and all its model time over the concurrency, so 1.0 means the harness added
nothing. Concurrencies are measured interleaved (one batch each, in turn).

    python benchmarks/training/rollouts.py [--concurrency 8 32 128] [--repeats 3] [--delay-ms 200]

With ``--tokens`` each batch asks for token ids and logprobs (``return_token_ids``,
``logprobs``) and the model answers them in vLLM's shapes from the reference agent's
byte-level tokenizer (about four times the ids a BPE tokenizer gives the same text, so
the cost of carrying them is overstated), and each rollout's token view is checked to be
there. With ``--before TREE`` the service also runs from another checkout (its
``pytest_agentgym`` first on PYTHONPATH), interleaved batch for batch with this one:

    python benchmarks/training/rollouts.py --tokens --before /work/before --concurrency 32 128

With ``--replicas 1 2`` each concurrency is also measured with the environment served
by that many server processes (``rollout-server --replicas``; the before tree, which may
not have the flag, runs with one); ``--ids 64`` asks for ids 0-63 x n=8 (512 rollouts) per
batch. ``--json-out FILE`` writes every sample (run_all.py's ``rollouts`` reads it):

    python benchmarks/training/rollouts.py --concurrency 128 512 --replicas 1 2 --ids 64
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
#: the plain asyncio model of the other benchmarks
FAKE_MODEL = HERE.parents[1] / "common" / "fake_model.py"
N = 8


def serve_model(port: int, delay_ms: float) -> None:
    """The fixed-delay model: reference policy replies, each after ``delay_ms``."""
    import random

    import uvicorn
    from fastapi import FastAPI, Request

    from pytest_agentgym.model.reference.server import load_policies
    from pytest_agentgym.model.reference.tokens import token_fields

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
        beside, in_choice = token_fields(body, messages, reply)
        await asyncio.sleep(delay_ms / 1000.0)
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "fixed-delay", **beside,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop",
                             **in_choice}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(name: str, command: list[str], workdir: Path, tree: Path | None = None) -> ManagedServer:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))} if tree else None
    return ManagedServer(name, command=command, log_path=workdir / f"{name}.log", startup_timeout=60,
                         label=name, cwd=workdir, env=env).start()


def allow_listed(tree: Path | None, url: str) -> list[str]:
    """``--allow-base-url URL`` for a service run from ``tree`` (this checkout when None) that
    has the option: such a service calls only the base URLs on its allow-list (403 for any
    other); a tree older than the option has no allow-list and is given nothing."""
    package = (tree or HERE.parents[2]) / "pytest_agentgym"
    sources = [*(package / "cli").glob("*.py"), package / "cli.py"]
    return ["--allow-base-url", url] if any(p.is_file() and "--allow-base-url" in p.read_text()
                                            for p in sources) else []


#: what a batch asks the model for with --tokens
TOKENS = {"return_token_ids": True, "logprobs": True}


def batch(service: ManagedServer, model_url: str, ids: list[int], n: int,
          env: str = "textcraft", tokens: bool = False, views: bool = False) -> tuple[float, list[dict]]:
    body = {"env": env, "model": "fixed-delay" if tokens else "fake", "base_url": model_url, "ids": ids, "n": n, "max_round": 10,
            "sampling": {"temperature": 1.0, **(TOKENS if tokens else {})}}
    started = time.perf_counter()
    answer = httpx.post(f"{service.url}/rollouts", json=body, timeout=600)
    wall = time.perf_counter() - started
    answer.raise_for_status()
    rollouts = answer.json()["rollouts"]
    errors = [r["error"] for r in rollouts if r["error"]]
    if errors:
        raise SystemExit(f"{len(errors)} rollout(s) failed, e.g. {errors[0]}")
    if views and not all(r.get("tokens") and r["tokens"]["rerendered"] is None for r in rollouts):
        raise SystemExit("a rollout came back without a whole token view")
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
    parser.add_argument("--tokens", action="store_true", help="ask for token ids and logprobs (token views)")
    parser.add_argument("--before", type=Path, default=None,
                        help="also run the service from this checkout, interleaved (arms: before, after)")
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the 'after' service from this checkout (default: the one on PYTHONPATH)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1],
                        help="environment server processes, one service each (default: 1)")
    parser.add_argument("--ids", type=int, default=16, help="ids per batch, each n=8 times (default: 16)")
    parser.add_argument("--json-out", type=Path, default=None, help="write every sample to this file")
    parser.add_argument("--serve-model", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model is not None:
        serve_model(args.serve_model, args.delay_ms)
        return
    load = f"{os.getloadavg()[0]:.1f}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-rollouts-"))
    if args.tokens:  # token ids and logprobs in vLLM's shapes: this file's model
        model = start("model", [sys.executable, str(HERE), "--serve-model", "{port}", "--delay-ms",
                                str(args.delay_ms)], workdir)
    else:  # the plain asyncio model of the other benchmarks: its own CPU stays small at 512 in flight
        model = start("model", [sys.executable, str(FAKE_MODEL), "--port", "{port}",
                                "--delay-ms", str(args.delay_ms), "--policy", "reference",
                                "--max-seconds", "3600"], workdir)
    after_tree = args.tree.resolve() if args.tree else None
    arms = [("after", after_tree)] if args.before is None else [("before", args.before.resolve()),
                                                                 ("after", after_tree)]
    ids = list(range(args.ids))
    services = {}
    settings: dict[str, tuple[int, int]] = {}  # key -> (concurrency, replicas)
    try:
        for arm, tree in arms:
            for c in args.concurrency:
                for r in (args.replicas if arm == "after" else [1]):
                    key = (f"{arm}-" if args.before else "") + f"c{c}" + (f"-r{r}" if args.replicas != [1] else "")
                    more = ["--replicas", str(r)] if r != 1 else []
                    services[key] = start(f"service-{key}", [sys.executable, "-m", "pytest_agentgym", "rollout-server",
                                                             "--port", "{port}", "--concurrency", str(c), "--run-id",
                                                             key, *more, *allow_listed(tree, model.url)],
                                   workdir, tree)
                    settings[key] = (c, r)
                    batch(services[key], model.url, [0], 1, args.env, args.tokens)  # warm-up: the server, the client
        results: dict[str, list[tuple[float, float]]] = {key: [] for key in services}
        cpu: dict[str, list[dict[str, float]]] = {key: [] for key in services}
        for _ in range(args.repeats):
            for key, service in services.items():
                c = settings[key][0]
                before = cpu_seconds(model, service)
                wall, rollouts = batch(service, model.url, ids, N, args.env, args.tokens,
                                       views=args.tokens and not key.startswith("before"))
                after = cpu_seconds(model, service)
                results[key].append((len(rollouts) / wall, ideal(rollouts, args.delay_ms / 1000, c) / wall))
                cpu[key].append({k: 1000 * (after[k] - before[k]) / len(rollouts) for k in after})
        print(f"rollout service, {args.env} ids 0-{len(ids) - 1} x n={N} ({len(ids) * N} rollouts, max_round 10), "
              f"{args.delay_ms:g} ms model, {args.repeats} batches per service, interleaved"
              f"{', token ids and logprobs asked' if args.tokens else ''}; "
              f"{os.cpu_count()} cores, load average {load} at the start, {os.getloadavg()[0]:.1f} at the end:")
        for key, rows in results.items():
            rates = [r for r, _ in rows]
            shares = [s for _, s in rows]
            print(f"  {key:>12}: {statistics.median(rates):6.1f} rollouts/s "
                  f"(min {min(rates):.1f}, max {max(rates):.1f}); of ideal {statistics.median(shares):.2f} "
                  f"(min {min(shares):.2f}, max {max(shares):.2f})")
            print(f"    {phases(workdir / 'reports' / key)}")
            print("    CPU ms per rollout (medians): " + ", ".join(
                f"{k} {statistics.median(row[k] for row in cpu[key]):.1f}" for k in cpu[key][0]))
        print(json.dumps(results))
        if args.json_out is not None:
            args.json_out.write_text(json.dumps({"load_start": load, "samples": results, "cpu": cpu}))
    finally:
        for service in services.values():
            service.stop()
        model.stop()


if __name__ == "__main__":
    main()
