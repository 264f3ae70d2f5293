"""The embedded SQLGym server: start-up time, episodes per second, resident memory;
optionally side by side with AgentGym's original agentenv-sqlgym server.

Each round starts the server (``python -m pytest_agentgym serve sqlgym``) on a free
loopback port and times spawn -> first answer to ``GET /``, then plays N episodes
(create, reset, step with the question's gold SQL; item ids cycling over the
shipped data's 30 dev and 10 train questions) one after another through HTTP,
and reads the server's RSS (psutil). With ``--original DIR`` (a checkout's
``agentenv-sqlgym`` directory, outside this repository) the original server is
run in the same rounds on the same data, interleaved with ours (ours first in
odd rounds, the original first in even ones). Prints per round, then medians
and ranges.

    python benchmarks/servers/sqlgym_server.py [--rounds 5] [--episodes 200] [--original DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx
import psutil

from pytest_agentgym.servers.embedded.sqlgym_bird import BIRD_PATH_ENV, shipped_bird_dir
from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer

DEV = 9428


def items(bird: Path) -> list[tuple[int, str]]:
    """(item id, gold SQL) for every shipped question."""
    out = []
    for split, first in (("train", 0), ("dev", DEV)):
        questions = json.loads((bird / split / f"{split}.json").read_text())
        out += [(first + n, q["SQL"]) for n, q in enumerate(questions)]
    return out


def server(kind: str, bird: Path, original: Path | None) -> ManagedServer:
    env = {BIRD_PATH_ENV: str(bird)}
    if kind == "ours":
        return ManagedServer("SQLGym", command=embedded_command("sqlgym"), env=env, startup_timeout=60)
    code = "import uvicorn; uvicorn.run('agentenv_sqlgym:app', host='{host}', port={port}, log_level='warning')"
    return ManagedServer("SQLGym-original", command=[sys.executable, "-c", code], env=env, cwd=original,
                         startup_timeout=60)


def one_round(kind: str, bird: Path, original: Path | None, work: list[tuple[int, str]],
              episodes: int) -> dict[str, float]:
    managed = server(kind, bird, original)
    started = time.perf_counter()
    managed.start()
    startup = time.perf_counter() - started
    try:
        rewards = 0.0
        with httpx.Client(base_url=managed.url, timeout=30) as http:
            began = time.perf_counter()
            for n in range(episodes):
                item, sql = work[n % len(work)]
                env = http.post("/create").json()
                http.post("/reset", json={"env_idx": env, "item_id": item}).raise_for_status()
                rewards += http.post("/step", json={"env_idx": env, "action": sql}).json()["reward"]
            elapsed = time.perf_counter() - began
        rss = psutil.Process(managed.proc.pid).memory_info().rss / 2**20
    finally:
        managed.stop()
    if rewards != episodes:
        raise SystemExit(f"{kind}: gold SQL scored {rewards} of {episodes}")
    return {"startup_s": startup, "episodes_per_s": episodes / elapsed, "rss_mib": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="server starts per kind (default: 5)")
    parser.add_argument("--episodes", type=int, default=200, help="episodes per round (default: 200)")
    parser.add_argument("--original", type=Path, default=None,
                        help="agentenv-sqlgym directory of an AgentGym checkout, to compare with")
    args = parser.parse_args()
    bird = shipped_bird_dir()
    work = items(bird)
    kinds = ["ours"] + (["original"] if args.original else [])
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            figures = one_round(kind, bird, args.original, work, args.episodes)
            results[kind].append(figures)
            print(f"round {r + 1} {kind:8s} start-up {figures['startup_s']:.2f} s, "
                  f"{figures['episodes_per_s']:.0f} episodes/s, RSS {figures['rss_mib']:.1f} MiB", flush=True)
    print(f"\n{args.episodes} episodes per round (create, reset, step with gold SQL), {args.rounds} rounds;"
          " median [min-max]:")
    for kind in kinds:
        line = []
        for key, unit in (("startup_s", "s start-up"), ("episodes_per_s", "episodes/s"), ("rss_mib", "MiB RSS")):
            values = [f[key] for f in results[kind]]
            line.append(f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}] {unit}")
        print(f"{kind:8s} " + ", ".join(line))


if __name__ == "__main__":
    main()
