"""`pytest-agentgym`: the plugin's tools outside a pytest run.

    pytest-agentgym init [DIR] [--force]             write suites/ (the packaged suites) and CI job files
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
    pytest-agentgym merge RUN_DIR... --out DIR       join the shards of a run, judge its gates
                   [--baseline RUN_DIR] [--no-report] [--notify URL,...]
    pytest-agentgym worker --nats URL                play episodes of a work queue (docs/scale-out.md)
                   [--node PROFILE] [--concurrency N] [--name NAME]
    pytest-agentgym fleet --nats URL                 the queue's workers, live, from their heartbeats
                   [--queue NAME] [--once] [--json] [--wait S] [--stale S]
    pytest-agentgym runs [REPORTS_DIR] [--json]      list the runs: status, model, checkpoint, figures, gates
    pytest-agentgym view [REPORTS_DIR]               browse the runs, reports, compare and trend in a browser
                   [--host 127.0.0.1] [--port 8765] [--open]
    pytest-agentgym rollout-server --port 8081       serve POST /rollouts for GRPO trainers
                   [--node PROFILE] [--concurrency N] [--reports DIR] [--run-id ID]
                   [--api-key-env NAME] [--allow-base-url URL]... [--auth-token-env NAME]
                   [--max-queued N] [--max-request-bytes N]

Each subcommand is a thin shell over a module that the plugin uses too. This module holds
the parser and the dispatch; the commands that read finished runs are in
:mod:`~pytest_agentgym.cli.reading`, ``worker`` and ``rollout-server`` in
:mod:`~pytest_agentgym.cli.serving`, ``fleet`` and ``runs``/``view`` in their own modules.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from pytest_agentgym.cli import fleet, init, view
from pytest_agentgym.cli.reading import (
    compare_command,
    export_command,
    internal_error,
    judging_options,
    report_command,
    trend_command,
)
from pytest_agentgym.cli.serving import (
    add_rollout_server_parser,
    add_worker_parser,
    rollout_server_command,
    worker_command,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-agentgym", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run an embedded AgentGym-compatible server")
    serve.add_argument("name", help="babyai, textcraft, lmrlgym (Maze and Wordle), sqlgym (the sqlgym extra), "
                                     "sciworld (the real ScienceWorld simulator: the sciworld extra and Java), "
                                     "alfworld (alfworld's TextWorld engine: the alfworld extra; ALFWORLD_DATA) or "
                                     "webshop (a shop built once, Lucene's BM25: the webshop extra; "
                                     "AGENTENV_WEBSHOP_DATA)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")
    serve.add_argument("--no-fast-path", dest="fast_path", action="store_false",
                       help="answer every request through the FastAPI app, without the fast path in front "
                            "of it (the answers are byte-identical; for comparisons: docs/servers.md)")
    serve.add_argument("--allow-host", action="append", default=None, metavar="NAME",
                       help="also answer requests whose Host header is NAME (a name this machine is reached by; "
                            "* for any); repeatable, and used instead of AGENTGYM_ALLOW_HOSTS. The server always "
                            "answers localhost, 127.0.0.1, [::1] and --host; other Host names get 403 (DNS "
                            "rebinding; default: the comma-separated names in AGENTGYM_ALLOW_HOSTS)")

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

    export = sub.add_parser(
        "export", help="write a run's episodes as training data (chat JSONL, per-turn JSONL, a Hugging Face dataset) "
                       "or as a CSV table",
        description="Rebuilds each episode's conversation exactly as the model saw it (the run keeps the opening "
                    "messages in prompts.jsonl) and writes it with the episode's reward and, when the endpoint "
                    "sent token ids, its token view. Each row marks what the model sampled, so that a trainer "
                    "learns from that alone, never from the environment's instructions, its messages or a "
                    "scripted acknowledgement: a weight per message (1 on the model's replies), prompt and "
                    "completion (TRL's prompt-completion form) and, with token ids, input_ids with "
                    "assistant_masks (TRL's SFTTrainer trains on the sampled tokens only, as it is). Episodes "
                    "that ended in an infrastructure error are left out. --format csv writes one row per "
                    "episode of its facts instead (outcome, reward, rounds, time, error, model, tokens), "
                    "errored episodes included.")
    export.add_argument("run_dir", help="e.g. reports/latest")
    export.add_argument("--format", default="chat-jsonl", choices=("chat-jsonl", "turns-jsonl", "hf-dataset", "csv"),
                        help="chat-jsonl: one episode per line (its last conversation and reply); turns-jsonl: "
                             "one line per policy turn (the conversation sent for it and that reply); hf-dataset: "
                             "the chat-jsonl rows as a directory that datasets.load_dataset(DIR, split='train') "
                             "and datasets.load_from_disk(DIR)['train'] load; csv: one row per episode, for a "
                             "spreadsheet (default: chat-jsonl)")
    export.add_argument("--only", default=None, choices=("all", "scored", "rewarded", "success"),
                        help="which episodes: all (csv only) keeps every one, errors as rows with outcome error; "
                             "scored keeps every episode without an infrastructure error, reward 0 included (what "
                             "RL wants); rewarded keeps those with a reward above 0; success keeps the successful "
                             "ones (what SFT on good episodes wants). Default: all for csv, scored for the "
                             "training formats")
    export.add_argument("--output", "-o", default=None,
                        help="file (directory for hf-dataset) to write, - for standard output (default: "
                             "RUN_DIR/export/<format>.jsonl, RUN_DIR/export/episodes.csv for csv)")

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
    judging_options(compare)
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
    judging_options(trend)
    trend.add_argument("--html", default=None, metavar="FILE",
                       help="also write a page with line charts (interval bands) and the same tables")

    merge = sub.add_parser(
        "merge", help="join the shards of one run (--agentgym-shard) into one run directory and judge its gates",
        description="Checks that the shards share run id, settings and selection and hold every episode exactly "
                    "once (naming missing and overlapping shards, and an episode that a shard's episodes.jsonl "
                    "records twice in one generation: lines that differ are refused, a line repeated byte for byte "
                    "is kept once and named), writes one run directory (episodes.jsonl, "
                    "run.json, report.html) and judges the suites' gates and the baseline comparison on it "
                    "(docs/scale-out.md). Exit 0 gates passed, 1 a gate failed, 2 the shards cannot be merged.")
    merge.add_argument("shards", nargs="+", metavar="RUN_DIR",
                       help="the shards' run directories, or reports/<run_id> that holds shard-I-of-N directories")
    merge.add_argument("--out", required=True, metavar="DIR",
                       help="where the merged run is written, e.g. reports/<run_id> (an earlier merge there is replaced)")
    merge.add_argument("--baseline", default=None, metavar="RUN_DIR",
                       help="compare with this run (default: the shards' --agentgym-baseline)")
    merge.add_argument("--no-report", action="store_true", help="do not write report.html")
    merge.add_argument("--notify", default=None, metavar="URL,...",
                       help="POST the merged run's summary to these http(s) URLs (docs/notifications.md)")
    add_worker_parser(sub)
    init.add_parser(sub)
    fleet.add_parser(sub)
    view.add_parsers(sub)
    add_rollout_server_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        from pytest_agentgym.servers.embedded import serve
        from pytest_agentgym.transport.host_guard import HostGuard

        if args.allow_host is not None:
            try:  # each a host name, or say so naming the option (serve() would name AGENTGYM_ALLOW_HOSTS)
                HostGuard(args.host, args.allow_host, option="--allow-host NAME")
            except ValueError as exc:
                print(f"pytest-agentgym serve {args.name}: {exc}", file=sys.stderr)
                return 2
        serve(args.name, host=args.host, port=args.port, log_level=args.log_level, fast_path=args.fast_path,
              allow_hosts=args.allow_host)
        return 0
    if args.command == "reference-agent":
        from pytest_agentgym.model.reference.server import run

        run(host=args.host, port=args.port, policy=args.policy,
            latency_ms=args.latency_ms, seed=args.seed)
        return 0
    if args.command == "envs":
        from pytest_agentgym.cli.envs import main as envs_main

        return envs_main(config=args.config, host=args.host, timeout=args.timeout, node=args.node)
    if args.command == "report":
        return internal_error("report", lambda: report_command(args))
    if args.command == "export":
        return internal_error("export", lambda: export_command(args))
    if args.command == "publish-outbox":
        from pytest_agentgym.publish.outbox import publish_outbox_cli

        return publish_outbox_cli(args.run_dir, url=args.nats, create_stream=args.create_stream)
    if args.command == "compare":
        return compare_command(args)
    if args.command == "trend":
        return internal_error("trend", lambda: trend_command(args))
    if args.command == "merge":
        from pytest_agentgym.run.merge import merge_command

        return internal_error("merge", lambda: merge_command(args.shards, args.out, baseline=args.baseline,
                                                                report=not args.no_report, notify=args.notify))
    if args.command == "init":
        return init.init_command(args)
    if args.command == "fleet":
        return fleet.main(args)
    if args.command == "runs":
        return internal_error("runs", lambda: view.runs_command(args))
    if args.command == "view":
        return internal_error("view", lambda: view.view_command(args))
    if args.command == "worker":
        return worker_command(args, argv)
    if args.command == "rollout-server":
        return rollout_server_command(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
