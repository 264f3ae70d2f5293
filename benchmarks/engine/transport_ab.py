"""Our keep-alive transport (A) against aiohttp's client (B) on the hot path (issue 37).

    python benchmarks/engine/transport_ab.py [--repeats 3] [--first-repeats 3]
                                             [--only scaling,cpu_per_step,first_episode] [--quick]

It needs aiohttp in the interpreter (``pip install aiohttp``); the package does not depend
on it. Both arms are the same checkout: the run that B measures loads ``aiohttp_swap``
(``PYTEST_PLUGINS``) with ``AGENTGYM_BENCH_TRANSPORT=aiohttp``, which puts
``aiohttp_transport``'s classes in place of ``KeepAliveTransport`` and ``Route`` for the
environment and model clients; A loads the same plugin with ``ours`` (nothing swapped).
The figures are ``run_all.py``'s own (its benchmark functions are called here):

* ``scaling``: 200 ms model, Maze, 5 rounds; share of ideal and episodes/s at 8, 32,
  128 (-n 4 x 32), 256 and 512 in flight (one process; 2 replicas; -n 2 x 256 with 2
  replicas), and the failed attempts; plus, here, the pytest process's whole CPU over the
  steps it played (``cpu_ms_per_step_c<N>``: start, imports and servers' start included;
  one-process settings only, the controller of ``-n`` plays nothing);
* ``cpu_per_step``: instant model, c8: the marginal CPU per step (``ms_per_step``) and the
  whole process's CPU over its steps (``whole_ms_per_step``, 20 rounds);
* ``first_episode``: a cold ``pytest suites/lightweight -x --agentgym-envs=Maze
  --agentgym-tasks=0`` (the reference agent launched): seconds from process start to the
  first finished episode, and the command's wall seconds (``--first-repeats`` per repeat);
* ``exchange`` (here only): the transport alone, in this process: 6,000 chat requests of a
  Maze episode's size over one route to ``fake_model.py`` (instant), 32 and 512 at once;
  this process's CPU per request (``c<N>_client_us``) and requests per second.

The arms alternate within each repeat (A B, then B A), so drift and other engineers'
load fall on both; each line says which ran, and at the end a table gives medians
[min-max] per arm, B over A, and the median [min-max] of the per-repeat ratios B/A.
Each B run must have made aiohttp sessions and each A run none (the swap plugin
reports them); a run where that does not hold fails the script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: the checkout (benchmarks/engine/ is two levels down)
REPO = HERE.parents[1]
#: run_all.py, wherever the benchmarks' layout puts it
for _where in (HERE, HERE.parent, *sorted(HERE.parent.glob("*/"))):
    if (_where / "run_all.py").is_file():
        sys.path.insert(0, str(_where))
        break
import run_all  # noqa: E402

ARMS = {"ours": "ours", "aiohttp": "aiohttp"}
#: requests per setting of ``exchange`` (after 200 that open the connections)
EXCHANGES = 6000
PLUGIN = ".".join(HERE.relative_to(REPO).parts + ("aiohttp_swap",))

#: every pytest run of the current benchmark call: (its args, its probe's figures)
_RUNS: list[tuple[list[str], dict[str, Any]]] = []
_pytest_run = run_all.pytest_run


def _recorded_run(tree: Path, args: list[str], **kwargs: Any) -> dict[str, Any]:
    run = _pytest_run(tree, args, **kwargs)
    _RUNS.append((args, run))
    return run


run_all.pytest_run = _recorded_run


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


def _whole_cpu(run: dict[str, Any]) -> float:
    """The process's CPU (from its start to its last episode) over the steps it played, in ms."""
    return 1000 * run["cpu_at_last"] / max(1, run_all.steps_of(run["records"]))


def exchange(arm: str, quick: bool) -> dict[str, float]:
    """The route alone: this process's CPU per request and requests per second, 32 and 512 at once."""
    import asyncio

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(HERE))
    from aiohttp_transport import AiohttpRoute, AiohttpTransport

    try:
        from pytest_agentgym.transport.keepalive import KeepAliveTransport
        from pytest_agentgym.transport.route import Route, encode_json
    except ImportError:  # a tree from before transport.py became a package
        from pytest_agentgym.transport import KeepAliveTransport, Route, encode_json  # type: ignore[no-redef]

    body = encode_json({"model": "fake", "max_tokens": 128, "temperature": 0.0,
                        "messages": [{"role": "user", "content": "You are in a maze. " * 40}] * 6})
    total = EXCHANGES // (3 if quick else 1)

    async def play(concurrency: int) -> tuple[float, float]:
        transport = KeepAliveTransport() if arm == "ours" else AiohttpTransport()
        route = (Route if arm == "ours" else AiohttpRoute)(transport, model.url, {"Authorization": "Bearer x"})
        left = total

        async def one() -> None:
            answer = await route.request("POST", "/chat/completions", body, 30.0)
            if answer.status_code != 200:
                raise RuntimeError(f"the fake model answered {answer.status_code}")

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await one()

        await asyncio.gather(*(one() for _ in range(200)))
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await transport.aclose()
        return 1e6 * cpu / total, total / wall

    figures = {}
    with run_all.FakeModel(0) as model:
        for concurrency in (32, 512):
            cpu_us, per_s = asyncio.run(play(concurrency))
            figures[f"c{concurrency}_client_us"] = cpu_us
            figures[f"c{concurrency}_requests_per_s"] = per_s
    return figures


def measure(name: str, arm: str, work: Path, quick: bool, swap_log: Path) -> dict[str, float]:
    if name == "exchange":
        return exchange(arm, quick)
    os.environ["AGENTGYM_BENCH_TRANSPORT"] = arm
    os.environ["PYTEST_PLUGINS"] = PLUGIN
    os.environ["AGENTGYM_BENCH_SWAP_LOG"] = str(swap_log)
    _RUNS.clear()
    swap_log.write_text("")
    figures = getattr(run_all, f"bench_{name}")(REPO, work, quick)
    if name == "scaling":
        for args, run in _RUNS:
            if _option(args, "-n") is None:
                replicas = _option(args, "--agentgym-replicas")
                key = f"c{_option(args, '--agentgym-concurrency')}" + (f"_r{replicas}" if replicas else "")
                figures[f"cpu_ms_per_step_{key}"] = _whole_cpu(run)
    elif name == "cpu_per_step":
        figures["whole_ms_per_step"] = _whole_cpu(_RUNS[-1][1])
    _check_swap(swap_log, arm, len(_RUNS))
    return figures


def _check_swap(swap_log: Path, arm: str, runs: int) -> None:
    reports = [json.loads(line) for line in swap_log.read_text().splitlines() if line.strip()]
    if len(reports) < runs:
        raise RuntimeError(f"{len(reports)} swap reports for {runs} pytest runs: was the plugin loaded?")
    # an xdist controller plays nothing: it makes no session in either arm
    wrong = [r for r in reports if r["choice"] != arm
             or (r["aiohttp_sessions"] > 0) != (arm == "aiohttp" and r["plays"])]
    if wrong:
        raise RuntimeError(f"arm {arm}: runs that used the other transport: {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--first-repeats", type=int, default=3, help="first_episode runs per arm per repeat")
    parser.add_argument("--only", default="scaling,cpu_per_step,first_episode,exchange")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="a JSON file for every sample (default: none)")
    args = parser.parse_args()
    chosen = args.only.split(",")
    work = Path(tempfile.mkdtemp(prefix="agentgym-transport-ab-"))
    swap_log = work / "swap.jsonl"
    print(f"# {' '.join(sys.argv)}; {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
          f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"{os.cpu_count()} cpus", flush=True)
    samples: dict[str, dict[str, list[float]]] = {}
    paired: dict[str, list[float]] = {}
    for repeat in range(args.repeats):
        order = list(ARMS) if repeat % 2 == 0 else list(reversed(ARMS))
        for name in chosen:
            times = args.first_repeats if name == "first_episode" else 1
            for _ in range(times):
                got: dict[str, dict[str, float]] = {}
                for arm in order:
                    started = time.monotonic()
                    try:
                        figures = measure(name, arm, work, args.quick, swap_log)
                    except Exception as exc:  # one run, not the rest
                        print(f"[{repeat + 1}/{args.repeats}] {name:14s} {arm:8s} {time.monotonic() - started:6.1f} s"
                              f"  FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                        continue
                    got[arm] = figures
                    print(f"[{repeat + 1}/{args.repeats}] {name:14s} {arm:8s} {time.monotonic() - started:6.1f} s  "
                          + "  ".join(f"{k}={v:.4g}" for k, v in figures.items()), flush=True)
                    for key, value in figures.items():
                        samples.setdefault(f"{name}.{key}", {}).setdefault(arm, []).append(float(value))
                if len(got) == 2:
                    for key, value in got["aiohttp"].items():
                        base = got["ours"].get(key)
                        if base:
                            paired.setdefault(f"{name}.{key}", []).append(value / base)
    load = os.getloadavg()
    print(f"\n# end {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"\n{'figure':40s} {'A ours median [min-max]':>28s} {'B aiohttp median [min-max]':>28s} "
          f"{'B/A':>6s} {'paired B/A median [min-max]':>30s}")
    for figure, by_arm in samples.items():
        cells = [_cell(by_arm.get(arm)) for arm in ARMS]
        a, b = (statistics.median(by_arm[arm]) if by_arm.get(arm) else None for arm in ARMS)
        ratio = f"{b / a:.3g}" if a and b is not None else ""
        pairs = paired.get(figure)
        pair_cell = (f"{statistics.median(pairs):.3g} [{min(pairs):.3g}-{max(pairs):.3g}]" if pairs else "")
        print(f"{figure:40s} {cells[0]:>28s} {cells[1]:>28s} {ratio:>6s} {pair_cell:>30s}")
    if args.out:
        Path(args.out).write_text(json.dumps({"samples": samples, "paired_b_over_a": paired}, indent=1) + "\n")


def _cell(values: list[float] | None) -> str:
    if not values:
        return ""
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


if __name__ == "__main__":
    main()
