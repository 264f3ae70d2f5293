"""`pytest-agentgym`: the plugin's tools outside a pytest run.

    pytest-agentgym serve babyai --port 36001        run an embedded environment server
    pytest-agentgym reference-agent --port 8100      run the scripted reference agent
    pytest-agentgym envs                             list environments, URLs and health
                   [--node NAME|PATH]                as that node profile sees them
    pytest-agentgym report reports/<run_id>          render report.html again from results
                   [--output PATH] [--compress | --no-compress]
    pytest-agentgym publish-outbox reports/<run_id>  deliver NATS events kept in the outbox
                   [--nats URL] [--create-stream]

Each subcommand is a thin shell over a module that the plugin uses too.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-agentgym", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run an embedded AgentGym-compatible server")
    serve.add_argument("name", help="babyai, textcraft or lmrlgym (Maze and Wordle)")
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
    return parser


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
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
