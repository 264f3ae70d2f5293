"""What one request costs an embedded environment server, route by route.

    python benchmarks/servers/server_cost.py [--servers maze,textcraft,babyai] [--clients 32]
                                             [--requests 1600] [--repeats 3] [--before TREE]
                                             [--before-args ARGS] [--after-args ARGS]
                                             [--before-path DIR] [--after-path DIR] [--json]

One embedded server process (``python -m pytest_agentgym serve NAME`` on a free
loopback port; Maze through ``lmrlgym``) and ``--clients`` concurrent clients in
this process, each on its own keep-alive connection, run the routes of a rollout
one after another: ``create``, ``reset``, ``step``, ``observation``. For each route
the server's CPU (utime + stime of /proc/<pid>/stat, all its threads) is read before
and after, so ``<route>_us`` is the server's CPU per request in microseconds and
``<route>_rps`` the requests answered per second. The clients write pre-built
requests and read answers by Content-Length, so they cost little; an answer with an
``"error"`` key stops the run (a route that fails measures nothing).

With ``--before TREE`` (another checkout, whose server runs with ``PYTHONPATH=TREE``)
each server is measured on both trees, interleaved (before, after, before, ...), and
the figures are medians of ``--repeats`` with their spread (min-max). ``--before-args``
and ``--after-args`` add arguments to ``serve`` (``--before-args=--no-fast-path``
alone compares this tree with and without its fast path); ``--before-path`` and
``--after-path`` put a folder first on the server's PYTHONPATH (e.g. one with
httptools or uvloop, which uvicorn then picks). Each client creates at most 24 envs
(fewer with many clients: the servers keep 1,024 open) and steps round them. Lines are printed as
``[i/n] name label seconds k=v ...`` (run_all.py reads that format). run_all.py's
``server_cost`` runs it with ``--json``, which adds one JSON line of the medians.

The machine may be shared: absolute figures drift, ratios within one run count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
ROUTES = ("create", "reset", "step", "observation")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Server:
    """How to play one server: its serve name, URL prefix and request bodies."""

    name: str
    serve: str
    prefix: str
    #: create body (None: no body)
    create: Any
    reset: Callable[[int, int], dict[str, Any]]
    action: str
    #: creates and resets per client (a BabyAI reset builds a level: dearer, so fewer)
    creates: int
    resets: int


# Maze ends an episode after 50 steps, so the steps go round the client's envs.
SERVERS = {
    "maze": Server("maze", "lmrlgym", "/maze", None, lambda env, n: {"id": env, "game": n % 25},
                   "move up", 24, 24),
    "textcraft": Server("textcraft", "textcraft", "", {}, lambda env, n: {"id": env, "data_idx": n % 544},
                        "inventory", 24, 24),
    "babyai": Server("babyai", "babyai", "", None, lambda env, n: {"id": env, "data_idx": n % 40},
                     "turn left", 24, 3),
}


def request_bytes(method: str, path: str, body: Any = None) -> bytes:
    """One HTTP/1.1 request as httpx would send it (compact JSON body)."""
    head = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", "accept: */*", "connection: keep-alive"]
    payload = b""
    if body is not None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        head += ["content-type: application/json", f"content-length: {len(payload)}"]
    elif method == "POST":
        head.append("content-length: 0")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head[9:12]
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    body = await reader.readexactly(length)
    if status != b"200" or body.startswith(b'{"error"'):
        raise RuntimeError(f"{request.split(b' ', 2)[:2]} answered {status.decode()} {body[:300]!r}")
    return body


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14, 15)


async def play(server: Server, port: int, pid: int, clients: int, requests: int) -> dict[str, float]:
    """The figures of one server process: per route, CPU per request and requests/s."""
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(clients)]
    per_client = max(1, requests // clients)
    # every server keeps at most 1,024 envs open (then closes the least recently used)
    creates = max(1, min(server.creates, 960 // clients))
    resets = min(server.resets, creates)
    p = server.prefix
    ids: list[list[int]] = [[] for _ in conns]

    async def run(route: str, work: Callable[[int], Any]) -> dict[str, float]:
        cpu, wall = cpu_seconds(pid), time.perf_counter()
        counts = await asyncio.gather(*(work(i) for i in range(clients)))
        cpu, wall = cpu_seconds(pid) - cpu, time.perf_counter() - wall
        done = sum(counts)
        return {f"{route}_us": 1e6 * cpu / done, f"{route}_rps": done / wall}

    async def create(i: int) -> int:
        request = request_bytes("POST", f"{p}/create", server.create)
        for _ in range(creates):
            ids[i].append(json.loads(await exchange(*conns[i], request))["id"])
        return creates

    async def reset(i: int) -> int:
        del ids[i][resets:]  # only reset envs are stepped
        for n, env in enumerate(ids[i]):
            await exchange(*conns[i], request_bytes("POST", f"{p}/reset", server.reset(env, i * resets + n)))
        return len(ids[i])

    async def step(i: int) -> int:
        requests = [request_bytes("POST", f"{p}/step", {"id": env, "action": server.action}) for env in ids[i]]
        for n in range(per_client):
            await exchange(*conns[i], requests[n % len(requests)])
        return per_client

    async def observation(i: int) -> int:
        requests = [request_bytes("GET", f"{p}/observation?id={env}") for env in ids[i]]
        for n in range(per_client):
            await exchange(*conns[i], requests[n % len(requests)])
        return per_client

    figures: dict[str, float] = {}
    try:
        for route, work in zip(ROUTES, (create, reset, step, observation)):
            figures.update(await run(route, work))
    finally:
        for _, writer in conns:
            writer.close()
    return figures


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(server: Server, tree: Path, args: list[str], path: str | None, log: Path) -> tuple[subprocess.Popen, int]:
    """The server process of ``tree`` on a free port, once it answers ``GET /``."""
    port = free_port()
    pythonpath = os.pathsep.join(p for p in (path, str(tree)) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentgym", "serve", server.serve, "--host", "127.0.0.1",
         "--port", str(port), *args],
        cwd=tree, stdout=log.open("ab"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": pythonpath})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {server.serve} server exited with {proc.returncode}; see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                if sock.recv(12).startswith(b"HTTP/1.1"):
                    return proc, port
        except OSError:
            time.sleep(0.05)  # polling the server's readiness until the deadline
    proc.kill()
    raise RuntimeError(f"the {server.serve} server did not answer within 60 s; see {log}")


def measure(server: Server, tree: Path, args: list[str], path: str | None, clients: int, requests: int,
            log: Path) -> dict[str, float]:
    proc, port = start(server, tree, args, path, log)
    try:
        return asyncio.run(play(server, port, proc.pid, clients, requests))
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="maze,textcraft,babyai", help=f"of {', '.join(SERVERS)}")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (connections)")
    parser.add_argument("--requests", type=int, default=1600, help="step and observation requests per route")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree", default=str(REPO), help="the checkout measured as 'after'")
    parser.add_argument("--before", help="another checkout, measured interleaved as 'before'")
    parser.add_argument("--before-args", default="", help="extra `serve` arguments for 'before'")
    parser.add_argument("--after-args", default="", help="extra `serve` arguments for 'after'")
    parser.add_argument("--before-path", help="a folder put first on 'before's PYTHONPATH")
    parser.add_argument("--after-path", help="a folder put first on 'after's PYTHONPATH")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the medians")
    args = parser.parse_args(argv)
    chosen = args.servers.split(",")
    unknown = set(chosen) - set(SERVERS)
    if unknown:
        parser.error(f"--servers: unknown {', '.join(sorted(unknown))}; known: {', '.join(SERVERS)}")
    variants = {"after": (Path(args.tree).resolve(), shlex.split(args.after_args), args.after_path)}
    if args.before:
        variants = {"before": (Path(args.before).resolve(), shlex.split(args.before_args), args.before_path),
                    **variants}
    elif args.before_args or args.before_path:
        variants = {"before": (variants["after"][0], shlex.split(args.before_args), args.before_path), **variants}
    log = Path(tempfile.mkdtemp(prefix="agentgym-server-cost-")) / "servers.log"
    samples: dict[str, dict[str, dict[str, list[float]]]] = {}
    for repeat in range(args.repeats):
        for name in chosen:
            for label, (tree, serve_args, path) in variants.items():
                started = time.monotonic()
                figures = measure(SERVERS[name], tree, serve_args, path, args.clients, args.requests, log)
                print(f"[{repeat + 1}/{args.repeats}] {name:10s} {label:6s} {time.monotonic() - started:6.1f} s  "
                      + "  ".join(f"{k}={v:.4g}" for k, v in figures.items()), flush=True)
                for key, value in figures.items():
                    samples.setdefault(name, {}).setdefault(key, {}).setdefault(label, []).append(value)
    medians = _table(samples, list(variants))
    if args.json:
        print(json.dumps(medians))
    return medians


def _table(samples: dict[str, dict[str, dict[str, list[float]]]], labels: list[str]) -> dict[str, Any]:
    print(f"\n{'figure':26s} " + " ".join(f"{label + ' median [min-max]':>30s}" for label in labels)
          + ("  after/before" if len(labels) == 2 else ""))
    medians: dict[str, Any] = {}
    for name, by_key in samples.items():
        for key, by_label in by_key.items():
            cells = []
            for label in labels:
                values = by_label[label]
                medians.setdefault(label, {})[f"{name}_{key}"] = statistics.median(values)
                cells.append(f"{statistics.median(values):>12.4g} [{min(values):.4g}-{max(values):.4g}]")
            ratio = ""
            if len(labels) == 2:
                ratio = f"  {statistics.median(by_label['after']) / statistics.median(by_label['before']):.3f}"
            print(f"{name + '.' + key:26s} " + " ".join(f"{cell:>30s}" for cell in cells) + ratio)
    return medians


if __name__ == "__main__":
    main()
