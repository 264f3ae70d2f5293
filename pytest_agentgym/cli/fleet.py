"""`pytest-agentgym fleet`: the workers of a work queue, live, from their heartbeats.

It listens on the heartbeat subject (``agentgym.field.status.v1``) and calls the roll
once at the start (the coordinator's ping, ``agentgymq.<queue>.ping``), which every
serving worker answers at once with a heartbeat, so the first table needs no wait of
a whole heartbeat interval. On a terminal it redraws the table in place every
second until Ctrl-C; on anything else (a pipe, a file, CI), or with ``--once`` or
``--json``, it prints the table once after ``--wait`` seconds and exits. The table
itself is :mod:`pytest_agentgym.queue.fleet_view` (rows, states and their rule).

It only reads: no stream or consumer is made, and JetStream is not needed. It signs
in with the auth and TLS keys of ``--nats`` as the workers do (``transport/nats_options``;
it needs a user that may subscribe to the heartbeats and publish the roll call). Its
connection gives up after :data:`RECONNECT_S` seconds of a lost server
(``queue/streams.connect``), instead of nats-py's two minutes.

Exit status: 0 shown (or stopped with Ctrl-C), 1 the NATS server went away while
watching, 2 bad input or NATS unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit

#: Seconds between redraws of the live table.
REDRAW_S = 1.0
#: Seconds the live view keeps reconnecting after the server went away, then exits 1.
RECONNECT_S = 10.0
#: Default of --wait: the roll call is answered at once; this leaves room for a slow network.
DEFAULT_WAIT_S = 2.0
#: Seconds to wait for the server's TCP answer before it is called unreachable.
CONNECT_TIMEOUT_S = 5.0
_HOME_AND_CLEAR = "\x1b[H\x1b[2J"


def add_parser(sub: argparse._SubParsersAction) -> None:
    from pytest_agentgym.queue.liveness import GONE_FACTOR, STALE_INTERVALS

    fleet = sub.add_parser(
        "fleet", help="the workers of a work queue, live: load, episodes played, last heartbeat, runs",
        description="Shows one row per worker of the queue from the heartbeats it publishes: its name, node "
                    "profile, model, slots in use / concurrency, episodes played, when it was last heard, its "
                    "state and the runs it serves (a worker older than these fields shows '-'). States: alive "
                    f"while heard within the stale limit ({STALE_INTERVALS:g} of the worker's heartbeat "
                    "intervals, 30 s for the default 10 s, or --stale S); stale when silent for longer; gone when "
                    f"its last heartbeat said it was stopping, or silent for {GONE_FACTOR:g} times the stale "
                    "limit. On a terminal the table is redrawn in place until Ctrl-C; elsewhere, or with --once "
                    "or --json, it is printed once. Exit 0 shown, 1 NATS lost while watching, 2 bad input or "
                    "NATS unreachable (docs/scale-out.md, Watching the fleet).")
    fleet.add_argument("--nats", required=True, metavar="URL",
                       help="the queue: nats://HOST:PORT[?name=NAME], as given to the workers, with a user that may "
                            "read heartbeats and call the roll (?user=NAME&password_env=VAR, ?creds=PATH, tls://, ...)")
    fleet.add_argument("--queue", default=None, metavar="NAME",
                       help="the queue's name, instead of ?name= in the URL (default: agentgym)")
    fleet.add_argument("--once", action="store_true",
                       help="print the table once after --wait seconds and exit (what a non-terminal gets)")
    fleet.add_argument("--json", action="store_true",
                       help="print the rows once as a JSON list (implies --once)")
    fleet.add_argument("--wait", type=float, default=DEFAULT_WAIT_S, metavar="S",
                       help="seconds to listen before the table is printed once; every serving worker answers "
                            f"the roll call at once (default: {DEFAULT_WAIT_S:g})")
    fleet.add_argument("--stale", type=float, default=None, metavar="S",
                       help="a worker silent for longer than this is stale (default: "
                            f"{STALE_INTERVALS:g} of its heartbeat intervals)")


def address_of(args: argparse.Namespace) -> Any:
    """The queue of ``--nats`` and ``--queue``; raises QueueAddressError naming the option."""
    from pytest_agentgym.queue.address import QueueAddress, QueueAddressError

    url = str(args.nats).strip()
    if args.queue is not None:
        named = dict(parse_qsl(urlsplit(url).query)).get("name")
        if named is not None and named != args.queue:
            raise QueueAddressError(f"--queue {args.queue} and --nats {url} (name={named}) name two queues; "
                                    f"give the name once")
        if named is None:
            url += ("&" if "?" in url else "?") + f"name={args.queue}"
    return QueueAddress.parse(url, where="--nats")


def main(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    import asyncio  # here, not at the top: every pytest-agentgym command imports this module

    from pytest_agentgym.queue.address import QueueAddressError

    out = out or sys.stdout
    for flag, value in (("--wait", args.wait), ("--stale", args.stale)):
        if value is not None and not value > 0:
            print(f"pytest-agentgym fleet: {flag} {value:g}: give a positive number of seconds", file=sys.stderr)
            return 2
    try:
        address = address_of(args)
    except QueueAddressError as exc:
        print(f"pytest-agentgym fleet: {exc}", file=sys.stderr)
        return 2
    live = not (args.once or args.json) and out.isatty()
    try:
        return asyncio.run(_watch(address, args, out=out, live=live))
    except KeyboardInterrupt:  # Ctrl-C before the live table took the signal over
        return 0


async def _watch(address: Any, args: argparse.Namespace, *, out: TextIO, live: bool) -> int:
    import asyncio  # here, not at the top: every pytest-agentgym command imports this module

    from pytest_agentgym.queue import streams
    from pytest_agentgym.queue.fleet_view import FleetView
    from pytest_agentgym.queue.wire import HEARTBEAT_SUBJECT, Heartbeat

    lost = asyncio.Event()
    stop = asyncio.Event()

    async def closed() -> None:
        lost.set()

    refused = await _unreachable(address.server)
    if refused is None:
        try:
            nc = await streams.connect(address, name="pytest-agentgym fleet", reconnect_s=RECONNECT_S,
                                       on_closed=closed, door="fleet")
        except streams.QueueUnavailable as exc:
            if " unreachable " not in str(exc):  # there, but it refused the sign-in or TLS: say that
                print(f"pytest-agentgym fleet: {exc}", file=sys.stderr)
                return 2
            refused = str(exc).partition(" unreachable ")[2].partition(";")[0] or "no answer"
    if refused is not None:
        print(f"pytest-agentgym fleet: cannot reach NATS at {address.server} {refused}; start nats-server "
              f"there, or give the queue's URL with --nats nats://HOST:PORT", file=sys.stderr)
        return 2
    view = FleetView(address.name, stale_s=args.stale)

    async def heard(msg: Any) -> None:
        try:
            beat = Heartbeat.from_payload(json.loads(msg.data))
        except (ValueError, AttributeError):  # not JSON, or not an object: someone else's message
            return
        if beat is not None:
            view.heard(beat, time.monotonic())

    try:
        await nc.subscribe(HEARTBEAT_SUBJECT, cb=heard)
        await nc.flush(timeout=streams.API_TIMEOUT_S)  # subscribed before the roll is called
        await nc.publish(address.ping_subject, b"")
        if not live:
            await streams.first(asyncio.sleep(args.wait), lost.wait())
            return _print_once(view, address, args, out, lost.is_set())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set() and not lost.is_set():
            rows = view.rows(time.monotonic())
            out.write(_HOME_AND_CLEAR + "\n".join(_screen(rows, address)) + "\n")
            out.flush()
            await streams.first(asyncio.sleep(REDRAW_S), stop.wait(), lost.wait())
        if lost.is_set() and not stop.is_set():
            print(f"pytest-agentgym fleet: lost NATS at {address.server} for more than {RECONNECT_S:g} s",
                  file=sys.stderr)
            return 1
        return 0
    finally:
        if not nc.is_closed:
            await streams.quietly(asyncio.wait_for(nc.close(), 2.0))


async def _unreachable(server: str) -> str | None:
    """Why nothing listens at ``server`` (a TCP connect, answered at once where nats-py would
    keep trying until its connect timeout), or None."""
    import asyncio  # here, not at the top: every pytest-agentgym command imports this module

    parts = urlsplit(server)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 4222),
                                           CONNECT_TIMEOUT_S)
    except asyncio.TimeoutError:
        return f"(no answer within {CONNECT_TIMEOUT_S:g} s)"
    except OSError as exc:
        return f"({os.strerror(exc.errno) if exc.errno else type(exc).__name__})"  # "Connection refused"
    writer.close()
    return None


def _screen(rows: list[Any], address: Any) -> list[str]:
    from pytest_agentgym.queue.fleet_view import summary, table

    return [summary(rows, queue=address.name, server=address.server) + f"  ({time.strftime('%H:%M:%S')}, "
            f"Ctrl-C quits)", "", *table(rows)]


def _print_once(view: Any, address: Any, args: argparse.Namespace, out: TextIO, lost: bool) -> int:
    from pytest_agentgym.queue.fleet_view import nobody_line, summary, table

    if lost:
        print(f"pytest-agentgym fleet: lost NATS at {address.server} while listening", file=sys.stderr)
        return 1
    rows = view.rows(time.monotonic())
    if args.json:
        out.write(json.dumps([row.to_json() for row in rows], indent=2) + "\n")
    else:
        out.write("\n".join([summary(rows, queue=address.name, server=address.server), *table(rows)]) + "\n")
    if not rows:
        print(f"pytest-agentgym fleet: {nobody_line(queue=address.name, server=address.server, waited_s=args.wait)}",
              file=sys.stderr)
    out.flush()
    return 0
