"""How big and how fast is the HTML report of a 10,000-episode run?

    python benchmarks/data/report_10k.py [--episodes 10000] [--loads 3] [--keep DIR]

Builds a synthetic finished run (tests/helpers/report_fixtures.synthetic_run: four
lightweight environments, 10-20 turns per episode, observations of a few
hundred characters in each environment's style, 5% errors, 3% retried),
writes it through store.RunDir, renders report.html, and opens it in headless
Chromium from disk (file://), once gzip-packed (what large runs get) and once
with plain JSON trajectories, for comparison.

Figures printed:
  read        wall time and peak memory (max RSS) of a fresh Python process that
              only reads the results (store.RunDir.read_episodes), for reference
and per variant:
  render      wall time and peak memory of a fresh Python process running
              render_run_dir() (this includes reading the results)
  size        size of report.html
  load        Chromium's own navigation timing of the page: responseEnd (file
              read), domContentLoaded and loadEventEnd, all in ms from
              navigation start, plus first-paint / first-contentful-paint from
              the Paint Timing API; median over --loads fresh tabs
  wall        time in this process from Page.navigate to the loadEventFired
              event over the DevTools pipe (includes protocol overhead)
  open        ms from setting #episode=<id> to the trajectory being drawn
              (data-trajectory set on <body>), for the last episode of the run
  nodes, heap DOM element count and JS heap in use after load

Chromium is driven with --remote-debugging-pipe (tests/helpers/report_fixtures.HeadlessChromium).
Numbers depend on the machine; the run shows its CPU count next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from helpers.report_fixtures import HeadlessChromium, find_chromium, synthetic_run  # noqa: E402

_TIMING = """(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(p => [p.name, p.startTime]));
  return {response_end: nav.responseEnd, dom_content_loaded: nav.domContentLoadedEventEnd,
          load_end: nav.loadEventEnd, first_paint: paint['first-paint'] ?? null,
          first_contentful_paint: paint['first-contentful-paint'] ?? null,
          nodes: document.getElementsByTagName('*').length};
})()"""

_OPEN = """new Promise(resolve => {
  const id = %s;
  const start = performance.now();
  const done = () => resolve({ms: performance.now() - start, shown: document.body.dataset.trajectory === id,
                              turns: document.querySelectorAll('.turn').length});
  new MutationObserver((_, observer) => {
    if (document.body.dataset.trajectory !== undefined) { observer.disconnect(); done(); }
  }).observe(document.body, {attributes: true, attributeFilter: ['data-trajectory']});
  location.hash = '#episode=' + encodeURIComponent(id);
})"""


_READ = "from pytest_agentgym.results.store import RunDir; import sys; RunDir(sys.argv[1]).read_episodes()"
_RENDER = ("from pytest_agentgym.report.render import render_run_dir; import sys; "
           "render_run_dir(sys.argv[1], output=sys.argv[2], compress={'auto': None, 'gzip': True, "
           "'plain': False}[sys.argv[3]])")


# The peak is the child's own VmHWM: getrusage's ru_maxrss is carried across exec from the
# forking process, so it would report this process (which has built the run) for every child.
_PEAK = "; import re; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"


def in_child(code: str, *args: str) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter; its wall time in s and peak RSS (VmHWM) in MB."""
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", code + _PEAK, *args], stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    if child.returncode:
        raise SystemExit(f"{code!r} failed with exit code {child.returncode}")
    return wall, int(child.stdout.split()[-1]) / 1024  # VmHWM is in kB


def measure_load(chromium: str, path: Path, loads: int, profile: Path, episode_id: str) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    with HeadlessChromium(chromium, profile, timeout=300) as browser:
        for _ in range(loads):
            started = time.perf_counter()
            session = browser.open(path.as_uri())
            wall_ms = (time.perf_counter() - started) * 1000
            timing = browser.evaluate(session, _TIMING)
            opened = browser.evaluate(session, _OPEN % json.dumps(episode_id))
            if not opened["shown"] or not opened["turns"]:
                said = browser.evaluate(session, "document.getElementById('trajectory-body').textContent")
                raise SystemExit(f"the last episode's trajectory was not drawn: {opened}; the page says {said!r}")
            heap = browser.call("Runtime.getHeapUsage", session=session)["usedSize"] / 1e6
            measured = {**timing, "wall": wall_ms, "open": opened["ms"], "turns": opened["turns"], "heap_mb": heap}
            for key, value in measured.items():
                if value is not None:
                    samples.setdefault(key, []).append(value)
            browser.call("Target.closeTarget", {"targetId": browser.call(
                "Target.getTargetInfo", session=session)["targetInfo"]["targetId"]})
        if browser.exceptions:
            raise SystemExit(f"the page threw: {browser.exceptions}")
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=3, help="page loads per variant (median shown)")
    parser.add_argument("--keep", type=Path, default=None, help="write the run and reports here")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return measure(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="report-10k-") as work:  # about 200 MB, removed after
        return measure(args, Path(work))


def measure(args: argparse.Namespace, work: Path) -> int:
    chromium = find_chromium()

    started = time.perf_counter()
    run = synthetic_run(work / "runs", args.episodes, seed=10)
    print(f"machine: {os.cpu_count()} CPU(s); chromium: {chromium or 'not found'}")
    print(f"episodes: {args.episodes}  (episodes.jsonl {run.episodes_file.stat().st_size / 1e6:.1f} MB, "
          f"built in {time.perf_counter() - started:.1f} s)")

    last_id = run.read_episodes()[-1].episode_id
    read_s, read_mb = in_child(_READ, str(run.path))
    print(f"read:     {read_s:.2f} s, peak {read_mb:.0f} MB (a process that only reads the results)")
    variants = (("gzip (what a run this size gets)", "auto"), ("plain JSON (compress=False)", "plain"))
    for name, mode in variants:
        output = work / f"report-{mode}.html"
        render_s, render_mb = in_child(_RENDER, str(run.path), str(output), mode)
        print(f"\n[{name}]")
        print(f"  render:  {render_s:.2f} s, peak {render_mb:.0f} MB (fresh process, reading included)")
        print(f"  size:    {output.stat().st_size / 1e6:.1f} MB")
        if chromium is None:
            print("  load:    skipped (no chromium; apt-get install chromium)")
            continue
        figures = measure_load(chromium, output, args.loads, work / f"chromium-profile-{mode}", last_id)
        print(f"  load:    responseEnd {figures['response_end']:.0f} ms, DOMContentLoaded "
              f"{figures['dom_content_loaded']:.0f} ms, load event {figures['load_end']:.0f} ms, "
              f"first paint {figures.get('first_paint', float('nan')):.0f} ms, first contentful paint "
              f"{figures.get('first_contentful_paint', float('nan')):.0f} ms (median of {args.loads})")
        print(f"  wall:    {figures['wall']:.0f} ms from Page.navigate to loadEventFired")
        print(f"  open:    {figures['open']:.0f} ms to draw the last episode's trajectory "
              f"({figures['turns']:.0f} turns)")
        print(f"  nodes:   {figures['nodes']:.0f} elements; JS heap in use {figures['heap_mb']:.0f} MB "
              "(Runtime.getHeapUsage)")
    print(f"\nfiles kept in {work}" if args.keep else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
