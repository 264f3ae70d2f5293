"""What the plugin costs a pytest session that does not use it, and what --collect-only costs.

Two measurements, each a fresh interpreter per run, interleaved so that load on the
machine falls on every variant alike:

- **unrelated**: a project of one trivial test, `pytest -q`, with the plugin disabled
  (`-p no:agentgym`) and enabled, for this tree and (with --before) another checkout.
  The plugin's overhead is enabled minus disabled (issue 25's target: at most 30 ms);
- **collect-only**: `pytest suites/lightweight --collect-only -q` (240 items), this tree
  and the --before tree.

Each tree is put first on PYTHONPATH; the script checks once that pytest loads the
plugin from it. Bytecode caching follows the environment (PYTHONDONTWRITEBYTECODE=1 on
the machines of this project: every run then compiles, and pytest rewrites the asserts
of every module of an installed plugin); --bytecode lets both be cached, as on most
laptops, after one warm-up run.

    python benchmarks/engine/plugin_overhead.py --before /work/before25 --runs 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _env(tree: Path, bytecode: bool) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _loads_from(tree: Path, bytecode: bool) -> None:
    found = subprocess.run([sys.executable, "-c", "import pytest_agentgym.plugin as p; print(p.__file__)"],
                           env=_env(tree, bytecode), capture_output=True, text=True, check=True,
                           cwd=tree).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"{tree}: pytest_agentgym loads from {found}, not from the tree")


def _time(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"pytest {' '.join(args)} in {cwd} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return seconds


def _show(title: str, times: dict[str, list[float]]) -> dict[str, float]:
    print(f"\n{title}")
    medians = {}
    for name, values in times.items():
        medians[name] = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        print(f"  {name:<22s} median {medians[name] * 1000:7.1f} ms  "
              f"(IQR {quartiles[0] * 1000:.1f}-{quartiles[2] * 1000:.1f}, n={len(values)})")
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=None, help="another checkout, measured interleaved with this one")
    parser.add_argument("--runs", type=int, default=15, help="runs of each variant (default 15; at least 5)")
    parser.add_argument("--bytecode", action="store_true", help="let Python and pytest cache compiled modules")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error(f"--runs {args.runs}: give at least 5")
    trees = {"after": REPO}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    for tree in trees.values():
        _loads_from(tree, args.bytecode)
    with tempfile.TemporaryDirectory(prefix="plugin-overhead-") as tmp:
        project = Path(tmp)
        (project / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        unrelated = {"disabled": (["-q", "-p", "no:agentgym"], REPO)}
        unrelated.update({f"enabled, {name}": (["-q"], tree) for name, tree in trees.items()})
        collect = {name: (["suites/lightweight", "--collect-only", "-q"], tree) for name, tree in trees.items()}
        for variants, cwd in ((unrelated, None), (collect, "tree")):  # warm-up, not counted
            for flags, tree in variants.values():
                _time(flags, tree if cwd else project, _env(tree, args.bytecode))
        times_u: dict[str, list[float]] = {name: [] for name in unrelated}
        times_c: dict[str, list[float]] = {name: [] for name in collect}
        for i in range(args.runs):
            for name in (list(unrelated) if i % 2 == 0 else list(reversed(unrelated))):
                flags, tree = unrelated[name]
                times_u[name].append(_time(flags, project, _env(tree, args.bytecode)))
            for name in (list(collect) if i % 2 == 0 else list(reversed(collect))):
                flags, tree = collect[name]
                times_c[name].append(_time(flags, tree, _env(tree, args.bytecode)))
    caching = "bytecode cached" if args.bytecode else \
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '') or 'unset'}"
    medians = _show(f"an unrelated project of one test, `pytest -q` ({caching}):", times_u)
    for name in trees:
        extra = medians[f"enabled, {name}"] - medians["disabled"]
        print(f"  overhead of the plugin, {name}: {extra * 1000:+.1f} ms (target for 'after': <= 30 ms)")
    medians = _show(f"`pytest suites/lightweight --collect-only -q`, 240 items ({caching}):", times_c)
    if "before" in medians:
        print(f"  after/before: {medians['after'] / medians['before']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
