"""``pytest-agentgym view`` and ``pytest-agentgym runs``: the runs of a reports directory.

    pytest-agentgym runs [REPORTS_DIR] [--json]
    pytest-agentgym view [REPORTS_DIR] [--host 127.0.0.1] [--port 8765] [--open]

``runs`` prints the index (:mod:`pytest_agentgym.report.index`) as a table, so run
ids for ``compare`` and ``trend`` can be picked from a shell; ``view`` serves it as
a live page with each run's report, compare and trend
(:mod:`pytest_agentgym.report.view`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any, Sequence


def add_parsers(sub: argparse._SubParsersAction) -> None:
    runs = sub.add_parser(
        "runs", help="list the runs of a reports directory: status, model, checkpoint, figures, gates",
        description="One line per run directory under REPORTS_DIR (shards included), newest first, read from "
                    "each run.json (a running run's figures from its episodes.jsonl). The RUN column is what "
                    "compare and trend take (with --reports REPORTS_DIR). A directory that cannot be read is "
                    "listed with what is wrong. Exit 0, 2 when REPORTS_DIR is no directory.")
    runs.add_argument("reports", nargs="?", default="reports", metavar="REPORTS_DIR",
                      help="the runs' directory, as given to --agentgym-reports (default: reports)")
    runs.add_argument("--json", action="store_true", help="print the rows as a JSON list")

    view = sub.add_parser(
        "view", help="browse the runs of a reports directory in a browser (a local web server)",
        description="Serves the runs index (filters, sorting, running runs refreshed), each run's report "
                    "rendered from its directory on request (a running run's page updates by itself), and "
                    "the compare view and trend page of the runs picked in the index (docs/view.md). "
                    "Ctrl-C stops it.")
    view.add_argument("reports", nargs="?", default="reports", metavar="REPORTS_DIR",
                      help="the runs' directory, as given to --agentgym-reports (default: reports)")
    view.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    view.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one (default: 8765)")
    view.add_argument("--open", action="store_true", help="open the index in the default browser")
    view.add_argument("--allow-remote", action="store_true",
                      help="serve a --host that other machines can reach (refused otherwise: the pages have no "
                           "authentication and show every run's settings and trajectories)")
    view.add_argument("--allow-host", action="append", default=[], metavar="NAME", type=_host_name,
                      help="also answer requests whose Host header is NAME (a name this machine is reached by, "
                           "* for any); repeatable. Without it only localhost, 127.0.0.1, [::1] and --host are "
                           "answered; other Host names get 403 (DNS rebinding)")


def _host_name(text: str) -> str:
    from pytest_agentgym.transport.host_guard import HostGuard

    try:
        HostGuard("127.0.0.1", [text], option="--allow-host NAME")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _reports_dir(command: str, value: str) -> Path | None:
    path = Path(value)
    if path.is_dir():
        return path
    what = "does not exist" if not path.exists() else "is a file, not a directory"
    print(f"pytest-agentgym {command}: {value} {what}; give the directory the runs were written to "
          f"(--agentgym-reports, default: reports)", file=sys.stderr)
    return None


# --------------------------------------------------------------------------- runs


def runs_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.report.index import read_index

    reports = _reports_dir("runs", args.reports)
    if reports is None:
        return 2
    rows = read_index(reports)
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no run under {reports}", file=sys.stderr)
        return 0
    print("\n".join(table_lines(rows)))
    return 0


def _figures(row: Any) -> str:
    """``BabyAI 55% 0.550, Maze 40% 0.100``: each environment's success rate and mean reward."""
    from pytest_agentgym.results.shown import shown

    def one(env: str, f: Any) -> str:
        rate = "—" if f.success_rate is None else f"{f.success_rate:.0%}"
        reward = "—" if f.mean_reward is None else f"{f.mean_reward:.3f}"
        return f"{shown(env)} {rate} {reward}"

    return ", ".join(one(env, f) for env, f in row.envs.items()) or "—"


def table_lines(rows: Sequence[Any]) -> list[str]:
    """The rows as a terminal table: one line per run, then an indented line for each
    run whose directory has a problem or whose status has a note. Every string read from a
    run directory is :func:`~pytest_agentgym.results.shown.shown`: no escape sequence reaches
    the terminal."""
    from pytest_agentgym.results.shown import shown

    header = ("RUN", "STATUS", "STARTED", "MODEL", "CHECKPOINT", "NODE", "EPISODES", "GATES",
              "SUCCESS MEAN-REWARD PER ENV")
    table = []
    for row in rows:
        run = row.key + (" (latest)" if row.latest else "")
        episodes = f"{row.episodes}" + (f"/{row.planned}" if row.planned else "") + (
            f" ({row.errors} err)" if row.errors else "")
        cells = (run, row.status, row.date or "—", row.model or "—", row.checkpoint or "—", row.node or "—")
        table.append((*map(shown, cells), episodes, shown(row.gates_text()), _figures(row)))
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header) - 1)]
    lines = []
    for number, line in enumerate([header, *table]):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[-1])
        if number and rows[number - 1].problem:
            lines.append(f"    ! {shown(rows[number - 1].problem)}")
    return [line.rstrip() for line in lines]


# --------------------------------------------------------------------------- view


def view_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.rollouts.access import binds_loopback_only

    reports = _reports_dir("view", args.reports)
    if reports is None:
        return 2
    if not binds_loopback_only(args.host) and not args.allow_remote:
        print(f"pytest-agentgym view: --host {args.host} can be reached from other machines, and the pages have "
              f"no authentication: anyone who reaches the port reads every run's settings, commands and "
              f"trajectories. Keep the default 127.0.0.1 (from elsewhere: ssh -L {args.port}:127.0.0.1:"
              f"{args.port} this-host), or add --allow-remote if only trusted machines can reach it",
              file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"pytest-agentgym view: --port {args.port}: give a port from 1 to 65535, or 0 for a free one",
              file=sys.stderr)
        return 2
    from pytest_agentgym.report.view import ViewServer

    try:
        server = ViewServer(reports, host=args.host, port=args.port, allow_hosts=args.allow_host)
    except OSError as exc:
        print(f"pytest-agentgym view: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
              f"give another --port (0 picks a free one)", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _stop)  # SIGTERM stops it like Ctrl-C
    try:
        count = len(server.rows())
        print(f"pytest-agentgym view: {count} run(s) of {server.reports} at {server.url} (Ctrl-C stops it)",
              flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(server.url)
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("pytest-agentgym view: stopped", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
    return 0


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
