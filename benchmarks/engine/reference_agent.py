"""How fast the reference agent's HTTP server answers, through the endpoint client.

Starts ``python -m pytest_agentgym reference-agent`` on a free loopback port
(the way the local node profile does), then sends REQUESTS chat completions, at
most CONCURRENCY in flight, each a Maze conversation (distinct start cells, so
the replies differ) through :class:`EndpointClient`. Prints requests per
second and the client-side latency percentiles, once with no added latency
and once with ``--latency-ms`` (to show that delayed replies overlap).

    python benchmarks/engine/reference_agent.py [--requests 400] [--concurrency 8] [--latency-ms 50]

Needs the Maze reference policy (pytest_agentgym/model/reference/maze.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pytest_agentgym.model.client import EndpointClient
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port
from pytest_agentgym.process.managed import ManagedServer


def maze_conversation(i: int) -> list[dict[str, str]]:
    row, col = 1 + i % 7, 1 + (i // 7) % 9
    observation = (f"The goal is at position 8, 6. Your current position is at position {row}, {col}. "
                   f"There is a wall above you.")
    return [{"role": "user", "content": "Reach the goal of the maze."},
            {"role": "assistant", "content": "OK."},
            {"role": "user", "content": observation}]


async def hammer(base_url: str, requests: int, concurrency: int) -> tuple[float, list[float]]:
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    async with EndpointClient(base_url, "reference", request_timeout=30) as client:
        async def one(i: int) -> None:
            async with gate:
                reply = await client.chat(maze_conversation(i))
                latencies.append(reply.latency_s)

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return time.perf_counter() - started, latencies


def measure(latency_ms: float, requests: int, concurrency: int, log_dir: Path) -> None:
    port = free_port()
    server = ManagedServer(
        "reference agent",
        command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}",
                 "--latency-ms", str(latency_ms)],
        port=port, health=HEALTH_ENDPOINT, log_path=log_dir / f"agent-{port}.log",
        label="reference agent", advice=Advice())
    try:
        server.spawn()
        startup = server.wait_ready(60, poll_interval=0.02)
        asyncio.run(hammer(server.url + "/v1", 20, concurrency))  # warm-up
        wall, latencies = asyncio.run(hammer(server.url + "/v1", requests, concurrency))
    finally:
        server.stop()
    q = statistics.quantiles(latencies, n=100)
    print(f"latency-ms {latency_ms:>5g}: start {startup:5.2f} s, {requests} requests x{concurrency} "
          f"in {wall:6.2f} s = {requests / wall:7.1f} req/s; "
          f"client latency p50 {q[49] * 1000:6.1f} ms, p95 {q[94] * 1000:6.1f} ms, max {max(latencies) * 1000:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentgym-bench-") as tmp:
        for latency in (0.0, args.latency_ms):
            measure(latency, args.requests, args.concurrency, Path(tmp))


if __name__ == "__main__":
    main()
