"""How big and how fast is the compare view of two large runs?

    python benchmarks/data/compare_view.py [--episodes 4000] [--loads 3]

Writes two synthetic finished runs of --episodes episodes each
(tests/helpers/report_fixtures.synthetic_run with different seeds: four lightweight
environments, 10-20 turns per episode, 55% passed, 40% failed, 5% errors, drawn
independently, so about half of the keys change between the runs), judges them
with compare_runs, writes the compare page (write_compare_html, gzip-packed by
size as the report is), and opens it in headless Chromium from disk.

Figures printed: the wall time of compare_runs and of write_compare_html (which
reads both runs again), the page's size, how many episodes changed, Chromium's
domContentLoaded and load event (median over --loads fresh tabs), DOM elements
after load, and the ms from setting #pair=<id> to both trajectories being drawn
(data-pair set on <body>) for the last changed pair.
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

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from helpers.report_fixtures import HeadlessChromium, find_chromium, synthetic_run  # noqa: E402

from pytest_agentgym.compare import compare_runs  # noqa: E402
from pytest_agentgym.report.compare_view import write_compare_html  # noqa: E402

_LOAD = """(() => { const nav = performance.getEntriesByType('navigation')[0];
  return {dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
          nodes: document.getElementsByTagName('*').length}; })()"""
_OPEN = """new Promise(resolve => { const id = %s; const start = performance.now();
  new MutationObserver((_, observer) => { if (document.body.dataset.pair === id) {
      observer.disconnect(); resolve(performance.now() - start); } })
    .observe(document.body, {attributes: true});
  location.hash = '#pair=' + encodeURIComponent(id); })"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    chromium = find_chromium()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = synthetic_run(root / "base", args.episodes, seed=1)
        cand = synthetic_run(root / "cand", args.episodes, seed=2)
        started = time.perf_counter()
        comparison = compare_runs(base.path, cand.path, allow_mismatch=True, max_error_rate=1.0)
        judged_s = time.perf_counter() - started
        started = time.perf_counter()
        page = write_compare_html(comparison, root / "compare.html")
        written_s = time.perf_counter() - started
        changed = [f"{env}:{f.task_index}:r{f.repeat}" for env, e in comparison.environments.items()
                   for f in e.flips if f.base != f.cand]
        print(f"{os.cpu_count()} CPUs; {args.episodes} episodes per run, {len(changed)} changed")
        print(f"compare_runs {judged_s:.2f} s; write_compare_html {written_s:.2f} s; "
              f"page {page.stat().st_size / 1e6:.1f} MB")
        if chromium is None:
            print("no Chromium: page load not measured")
            return 0
        with HeadlessChromium(chromium, root / "profile") as browser:
            loads = []
            for _ in range(args.loads):
                session = browser.open(page.as_uri())
                loads.append(browser.evaluate(session, _LOAD))
            opened = browser.evaluate(session, _OPEN % json.dumps(changed[-1]))
        print(f"domContentLoaded {statistics.median(x['dcl'] for x in loads):.0f} ms; load "
              f"{statistics.median(x['load'] for x in loads):.0f} ms; {loads[-1]['nodes']} DOM elements; "
              f"opening the last changed pair {opened:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
