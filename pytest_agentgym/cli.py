"""`pytest-agentgym`: the plugin's tools outside a pytest run.

    pytest-agentgym serve babyai --port 36001        run an embedded environment server
    pytest-agentgym reference-agent --port 8100      run the scripted reference agent
    pytest-agentgym envs                             list environments, URLs and health
                   [--node NAME|PATH]                as that node profile sees them
    pytest-agentgym report reports/<run_id>          render report.html again from results
                   [--output PATH] [--compress | --no-compress]
    pytest-agentgym publish-outbox reports/<run_id>  deliver NATS events kept in the outbox
                   [--nats URL] [--create-stream]
    pytest-agentgym compare BASE_RUN CAND_RUN        judge a candidate run against a baseline run
                   [--metric success|reward] [--margin X] [--alpha A] [--json] [--strict]
                   [--allow-mismatch] [--reports DIR] [--html FILE]
    pytest-agentgym trend RUN_DIR...                 runs across checkpoints, per environment
                   [--metric success|reward] [--margin X] [--alpha A] [--html FILE]

Each subcommand is a thin shell over a module that the plugin uses too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-agentgym", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run an embedded AgentGym-compatible server")
    serve.add_argument("name", help="babyai, textcraft, lmrlgym (Maze and Wordle) or sciworld "
                                     "(the real ScienceWorld simulator: the sciworld extra and Java)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")

    agent = sub.add_parser("reference-agent", help="run the scripted reference agent (not an LLM)")
    agent.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    agent.add_argument("--port", type=int, default=8100, help="port (default: 8100)")
    agent.add_argument("--policy", choices=("reference", "random"), default="reference",
                       help="reference: plays to win; random: random legal-looking actions (default: reference)")
    agent.add_argument("--latency-ms", type=float, default=0.0,
                       help="delay added to every reply, for benchmarks (default: 0)")
    agent.add_argument("--seed", type=int, default=0, help="seed of the random choices (default: 0)")

    envs = sub.add_parser("envs", help="list configured environments with URL and health")
    source = envs.add_mutually_exclusive_group()
    source.add_argument("--config", default=None, help="an envs.yaml (default: the shipped one)")
    source.add_argument("--node", default=None, metavar="NAME|PATH",
                        help="as this node profile sees them (its overrides, skip list and servers "
                             "mode), found like --agentgym-node from the current directory")
    envs.add_argument("--host", default="127.0.0.1", help="host the servers run on (default: 127.0.0.1)")
    envs.add_argument("--timeout", type=float, default=1.0, help="health probe timeout in s (default: 1)")

    report = sub.add_parser("report", help="render report.html from a run directory's results")
    report.add_argument("run_dir", help="e.g. reports/latest")
    report.add_argument("--output", default=None, help="where to write (default: RUN_DIR/report.html)")
    report.add_argument("--compress", action=argparse.BooleanOptionalAction, default=None,
                        help="gzip the embedded episode data, or not with --no-compress "
                             "(default: compressed only for large runs)")

    outbox = sub.add_parser("publish-outbox", help="deliver the NATS events a run kept in its outbox")
    outbox.add_argument("run_dir", help="e.g. reports/latest")
    outbox.add_argument("--nats", default="nats://127.0.0.1:4222", help="NATS URL (default: nats://127.0.0.1:4222)")
    outbox.add_argument("--create-stream", action="store_true",
                        help="create the JetStream stream AGENTGYM on agentgym.> when it is missing")

    compare = sub.add_parser(
        "compare", help="judge a candidate run against a baseline run, per environment (paired)",
        description="Pairs the two runs' episodes by (task, repeat) and judges each environment ok, "
                    "regressed, inconclusive or error (docs/compare.md). Exit 0 ok (and inconclusive "
                    "unless --strict), 1 regressed or error, 2 bad input.")
    compare.add_argument("base", metavar="BASE_RUN", help="baseline: a run directory, a run id under "
                                                           "--reports, or latest")
    compare.add_argument("candidate", metavar="CAND_RUN", help="candidate: the same forms as BASE_RUN")
    _judging_options(compare)
    compare.add_argument("--json", action="store_true", help="print only the comparison as JSON")
    compare.add_argument("--strict", action="store_true", help="an inconclusive verdict fails (exit 1)")
    compare.add_argument("--html", default=None, metavar="FILE",
                         help="also write the compare view: verdicts, flip grid, changed episodes side by side")

    trend = sub.add_parser(
        "trend", help="runs across checkpoints: per environment, each against the previous and the best so far",
        description="Orders the runs by their checkpoint's step (when every checkpoint path ends in a number), "
                    "else by start time, and prints per environment each run's success rate and mean reward "
                    "with their intervals and its verdict against the previous run and the best run so far "
                    "(docs/compare.md). Exit 0, 1 when the last run regressed against either, 2 bad input.")
    trend.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories, run ids under --reports, or latest")
    _judging_options(trend)
    trend.add_argument("--html", default=None, metavar="FILE",
                       help="also write a page with line charts (interval bands) and the same tables")
    return parser


def _judging_options(command: argparse.ArgumentParser) -> None:
    """The options of a paired comparison, shared by compare and trend."""
    command.add_argument("--metric", choices=("success", "reward"), default="success",
                         help="success rate or mean reward (default: success)")
    command.add_argument("--margin", type=float, default=0.05,
                         help="the largest drop that is not a regression, in [0, 1] (default: 0.05)")
    command.add_argument("--alpha", type=float, default=0.05,
                         help="significance level, Holm-adjusted across environments (default: 0.05)")
    command.add_argument("--max-error-rate", type=float, default=None, metavar="X",
                         help="share of episodes that may error in either run (default: 0.05)")
    command.add_argument("--allow-mismatch", action="store_true",
                         help="compare runs whose settings differ (the differences are listed)")
    command.add_argument("--reports", default="reports", help="where run ids and latest are looked up "
                                                               "(default: reports)")


def _compare(args: argparse.Namespace) -> int:
    import json

    from pytest_agentgym.compare import CompareError, compare_runs
    from pytest_agentgym.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.ledger import LedgerError, resolve_run_dir

    reports = Path(args.reports)
    try:
        base = resolve_run_dir(args.base, reports)
        candidate = resolve_run_dir(args.candidate, reports)
        comparison = compare_runs(
            base, candidate, metric=args.metric, margin=args.margin, alpha=args.alpha,
            allow_mismatch=args.allow_mismatch,
            max_error_rate=DEFAULT_MAX_ERROR_RATE if args.max_error_rate is None else args.max_error_rate)
    except (LedgerError, CompareError) as exc:
        print(f"pytest-agentgym compare: {exc}", file=sys.stderr)
        return 2
    if args.html is not None:
        from pytest_agentgym.report.compare_view import write_compare_html

        written = _write_html("compare", args.html, lambda target: write_compare_html(comparison, target))
        if written is None:
            return 2
        print(f"compare view: {written}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(comparison.to_json(), indent=2, ensure_ascii=False))
    else:
        for mismatch in comparison.mismatches:
            print(f"settings differ (allowed): {mismatch}")
        print("\n".join(comparison.lines()))
        print(f"compare: {comparison.verdict.upper()} ({comparison.candidate_run_id} against "
              f"{comparison.base_run_id})")
    return comparison.exit_code(strict=args.strict)


def _write_html(command: str, path: str, write: Callable[[Path], Path]) -> Path | None:
    """``write(path)`` a page for --html; None after saying on stderr why it could not be written."""
    target = Path(path)
    if target.is_dir():
        print(f"pytest-agentgym {command}: --html {path} is a directory; give the path of the "
              f"page to write (e.g. {target / (command + '.html')})", file=sys.stderr)
        return None
    try:
        return write(target)
    except OSError as exc:
        print(f"pytest-agentgym {command}: cannot write --html {path} ({exc.strerror or exc}); "
              f"give a path in a writable directory", file=sys.stderr)
        return None


def _trend(args: argparse.Namespace) -> int:
    from pytest_agentgym.compare import CompareError
    from pytest_agentgym.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.ledger import LedgerError, resolve_run_dir
    from pytest_agentgym.report.trend import build_trend, write_trend_html

    reports = Path(args.reports)
    try:
        runs = [resolve_run_dir(run, reports) for run in args.runs]
        trend = build_trend(
            runs, metric=args.metric, margin=args.margin, alpha=args.alpha, allow_mismatch=args.allow_mismatch,
            max_error_rate=DEFAULT_MAX_ERROR_RATE if args.max_error_rate is None else args.max_error_rate)
    except (LedgerError, CompareError) as exc:
        print(f"pytest-agentgym trend: {exc}", file=sys.stderr)
        return 2
    print("\n".join(trend.lines()))
    if args.html is not None:
        written = _write_html("trend", args.html, lambda target: write_trend_html(trend, target))
        if written is None:
            return 2
        print(f"trend page: {written}")
    return trend.exit_code()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        from pytest_agentgym.servers.embedded import serve

        serve(args.name, host=args.host, port=args.port, log_level=args.log_level)
        return 0
    if args.command == "reference-agent":
        from pytest_agentgym.model.reference.server import run

        run(host=args.host, port=args.port, policy=args.policy,
            latency_ms=args.latency_ms, seed=args.seed)
        return 0
    if args.command == "envs":
        from pytest_agentgym.servers.status import main as envs_main

        return envs_main(config=args.config, host=args.host, timeout=args.timeout, node=args.node)
    if args.command == "report":
        from pytest_agentgym.ledger import settle_crashed
        from pytest_agentgym.report.render import render_run_dir
        from pytest_agentgym.store import RunDir

        info = settle_crashed(RunDir(args.run_dir))  # a run left "running" by a dead process
        if info is not None and info.status == "crashed":
            print(f"run {info.run_id} crashed (its process is gone); resume it with "
                  f"pytest ... --agentgym-resume={args.run_dir}", file=sys.stderr)
        path = render_run_dir(args.run_dir, output=args.output, compress=args.compress)
        print(path)
        return 0
    if args.command == "publish-outbox":
        from pytest_agentgym.publish.outbox import publish_outbox_cli

        return publish_outbox_cli(args.run_dir, url=args.nats, create_stream=args.create_stream)
    if args.command == "compare":
        return _compare(args)
    if args.command == "trend":
        return _trend(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
