"""Wall-time cost of NATS on a whole 20-episode run (issue 5's figure).

Runs `pytest` on a 20-episode suite (Maze 0-9, Wordle 0-9, reference agent, local node)
three ways, `--repeats` times each, interleaved: NATS off (--agentgym-no-nats), a dead
NATS URL (a free loopback port nobody listens on), and a live nats-server started here.
Prints the median and range of the wall time of each. Run from the repository root:

    python benchmarks/engine/nats_run_cost.py --repeats 5
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from helpers.nats_server import NatsServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_once(project: Path, extra: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suites",
                           "--agentgym-no-report", *extra], cwd=project, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "suites").mkdir()
        (project / "suites" / "maze.yaml").write_text("environment: Maze\ntasks: 0-9\n")
        (project / "suites" / "wordle.yaml").write_text("environment: Wordle\ntasks: 0-9\n")
        live = NatsServer(project / "nats")
        dead = f"nats://127.0.0.1:{free_port()}"
        setups = {
            "no NATS": ["--agentgym-no-nats"],
            "dead URL": [f"--agentgym-nats={dead}"],
            "live server": [f"--agentgym-nats={live.url}"],
        }
        times: dict[str, list[float]] = {name: [] for name in setups}
        try:
            for _ in range(args.repeats):
                for name, extra in setups.items():
                    times[name].append(run_once(project, extra))
        finally:
            live.stop()
    print(f"20-episode run (Maze 0-9 + Wordle 0-9), {args.repeats} repeats, wall seconds:")
    for name, values in times.items():
        print(f"  {name:<12} median {statistics.median(values):6.2f}   range {min(values):.2f}-{max(values):.2f}")
    cost = statistics.median(times["dead URL"]) - statistics.median(times["no NATS"])
    print(f"  dead URL minus no NATS (medians): {cost:+.2f} s")


if __name__ == "__main__":
    main()
