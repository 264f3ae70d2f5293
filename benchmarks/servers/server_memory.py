"""Does an embedded server's memory stay flat over many episodes?

Starts ``python -m pytest_agentgym serve NAME`` (default ``babyai``) on a free
loopback port, runs a warm-up, then N (default 1000) create/reset/step/close
cycles over varied task indices, and prints the server process's resident set
size (psutil) before and after the cycles, plus the figure at the halfway mark.
Where the server has no ``/close`` (lmrlgym) the cycle ends without it, as the
original clients do, and the figure includes the envs it keeps.

    python benchmarks/servers/server_memory.py [NAME] [--cycles 1000] [--steps 3] [--warmup 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx
import psutil

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.spec import load_default_specs

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.servers.reference_play import embedded_server  # noqa: E402

#: Per server: an action every task accepts, and how many task indices to cycle over.
WORKLOADS = {
    "babyai": ("turn left", 400),
    "textcraft": ("inventory", 544),
    "lmrlgym": ("move up", 25),
}


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def cycles(http: httpx.Client, base: str, env: str, count: int, offset: int, steps: int,
           action: str, tasks: int, has_close: bool) -> None:
    adapter = adapter_class(env)()
    for n in range(count):
        index = (offset + n * 7) % tasks  # varied levels and seeds
        env_id = http.post(base + "/create").json()["id"]
        body = http.post(base + "/reset", json={"id": env_id, **adapter.reset_payload(index)}).json()
        if isinstance(body, dict) and "error" in body:
            raise SystemExit(f"/reset of task {index} failed: {body['error']}")
        for _ in range(steps):
            http.post(base + "/step", json={"id": env_id, "action": action})
        if has_close:
            assert http.post(base + "/close", json={"id": env_id}).json() is True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", default="babyai", help="embedded server (default: babyai)")
    parser.add_argument("--cycles", type=int, default=1000, help="measured cycles (default: 1000)")
    parser.add_argument("--steps", type=int, default=3, help="steps per cycle (default: 3)")
    parser.add_argument("--warmup", type=int, default=50, help="cycles before the first figure (default: 50)")
    args = parser.parse_args()
    if args.name not in WORKLOADS:
        raise SystemExit(f"unknown server {args.name!r}; choose one of {', '.join(WORKLOADS)}")
    action, tasks = WORKLOADS[args.name]
    spec = next(s for s in load_default_specs().values() if s.embedded == args.name)
    with embedded_server(args.name) as server, httpx.Client(timeout=60) as http:
        base = spec.base_url(server.url)
        run = lambda count, offset: cycles(  # noqa: E731
            http, base, spec.name, count, offset, args.steps, action, tasks, spec.has_close)
        run(args.warmup, 0)
        before = rss_mb(server.pid)
        started = time.perf_counter()
        run(args.cycles // 2, args.warmup)
        middle = rss_mb(server.pid)
        run(args.cycles - args.cycles // 2, args.warmup + args.cycles // 2)
        after = rss_mb(server.pid)
        elapsed = time.perf_counter() - started
    print(f"{args.name} ({spec.name}): {args.cycles} cycles of create/reset/{args.steps} steps"
          f"{'/close' if spec.has_close else ''} after {args.warmup} warm-up cycles, {elapsed:.1f} s")
    print(f"  RSS before {before:.1f} MiB, halfway {middle:.1f} MiB, after {after:.1f} MiB "
          f"(change {after - before:+.1f} MiB)")


if __name__ == "__main__":
    main()
