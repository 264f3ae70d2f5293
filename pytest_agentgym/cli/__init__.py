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

Each subcommand is a thin shell over a module that the plugin uses too.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

from pytest_agentgym.cli import fleet, view


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
                    "sent token ids, its token view. Episodes that ended in an infrastructure error are left out. "
                    "--format csv writes one row per episode of its facts instead (outcome, reward, rounds, time, "
                    "error, model, tokens), errored episodes included.")
    export.add_argument("run_dir", help="e.g. reports/latest")
    export.add_argument("--format", default="chat-jsonl", choices=("chat-jsonl", "turns-jsonl", "hf-dataset", "csv"),
                        help="chat-jsonl: one conversation per line; turns-jsonl: one line per policy turn "
                             "(the conversation so far and that reply); hf-dataset: a Hugging Face dataset "
                             "directory; csv: one row per episode, for a spreadsheet (default: chat-jsonl)")
    export.add_argument("--only", default=None, choices=("all", "scored", "success"),
                        help="all (csv only): every episode, errors as rows with outcome error; scored: every "
                             "episode without an infrastructure error; success: the successful ones "
                             "(default: all for csv, else scored)")
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
    _worker_parser(sub)
    fleet.add_parser(sub)
    view.add_parsers(sub)
    _rollout_server_parser(sub)
    return parser


def _worker_parser(sub: argparse._SubParsersAction) -> None:
    worker = sub.add_parser(
        "worker", help="play the episodes of a work queue with this machine's model and servers",
        description="Pulls work items from a NATS JetStream work queue (a pytest run with --agentgym-queue "
                    "publishes them), plays each with this node profile's model endpoint and environment "
                    "servers, and publishes the records back (docs/scale-out.md, Work queue).")
    worker.add_argument("--nats", required=True, metavar="URL",
                        help="the queue: nats://HOST:PORT[?name=NAME], as given to --agentgym-queue")
    worker.add_argument("--node", default="local", metavar="PROFILE",
                        help="node profile: a name under configs/nodes/ or a YAML file (default: local)")
    worker.add_argument("--concurrency", type=int, default=None, metavar="N",
                        help="episodes played at once (default: the profile's limits.concurrency)")
    worker.add_argument("--replicas", type=_replicas_arg, default=None, metavar="N|auto",
                        help=REPLICAS_HELP)
    worker.add_argument("--name", default=None, help="this worker's name in heartbeats and records "
                                                     "(default: HOST-PID)")
    worker.add_argument("--log-dir", default=None, help="server and worker logs (default: reports/workers/NAME)")
    worker.add_argument("--reconnect", type=float, default=60.0, metavar="S",
                        help="seconds to keep reconnecting after NATS went away, then exit 1 (default: 60)")
    worker.add_argument("--heartbeat", type=float, default=10.0, metavar="S",
                        help="seconds between heartbeats (default: 10)")
    worker.add_argument("--nak-delay", type=float, default=5.0, metavar="S",
                        help="redelivery delay of an item this worker cannot serve, times a random "
                             "factor between 0.5 and 1.5 (default: 5)")


REPLICAS_HELP = ("server processes per spawned environment server; creates go to the least loaded "
                 "(auto: one per 64 episodes in flight, at most one per core; default: the node's "
                 "envs.replicas, else 1)")


def _replicas_arg(text: str) -> int | str:
    from pytest_agentgym.config.options import parse_replicas

    try:
        return parse_replicas(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _rollout_server_parser(sub: argparse._SubParsersAction) -> None:
    rollouts = sub.add_parser(
        "rollout-server", help="serve POST /rollouts: scored AgentGym conversations for GRPO trainers",
        description="Plays the episodes a trainer asks for (env, ids, n samples per id, its model endpoint) "
                    "with the same engine as a pytest run, and answers one scored conversation per rollout; "
                    "every rollout is also kept in a run directory (docs/training.md).")
    rollouts.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    rollouts.add_argument("--port", type=int, default=8081, help="port (default: 8081)")
    rollouts.add_argument("--node", default="local", metavar="PROFILE",
                          help="node profile: environments, servers, limits, sampling, NATS (default: local)")
    rollouts.add_argument("--concurrency", type=int, default=None, metavar="N",
                          help="episodes in flight per model endpoint (default: the node's limits.concurrency)")
    rollouts.add_argument("--replicas", type=_replicas_arg, default=None, metavar="N|auto",
                          help=REPLICAS_HELP)
    rollouts.add_argument("--reports", default="reports", help="where the run directory goes (default: reports)")
    rollouts.add_argument("--run-id", default=None, help="the run directory's name (default: rollouts-<time>)")
    rollouts.add_argument("--nats", default=None, metavar="URL", help="publish episode events there "
                          "(default: the node's nats.url)")
    rollouts.add_argument("--api-key-env", default=None, metavar="NAME",
                          help="environment variable holding the model endpoints' API key; it is sent only to "
                               "the endpoints on the key allow-list (default: none)")
    rollouts.add_argument("--base-url", default=None, metavar="URL",
                          help="model endpoint for batches that give no base_url (default: none, required)")
    rollouts.add_argument("--allow-base-url", action="append", default=[], metavar="URL",
                          help="also send the API key to base URLs under this one (same scheme, host and port, "
                               "path below it; /v1 added as for a batch's base_url); repeatable. Without it the "
                               "key goes only to --base-url and the node's model endpoints, and a batch naming "
                               "another base_url is refused (403) while the service holds a key")
    rollouts.add_argument("--auth-token-env", default=None, metavar="NAME",
                          help="environment variable holding the token callers must send as 'Authorization: "
                               "Bearer <token>' (every route but GET /health; default: none)")
    rollouts.add_argument("--allow-unauthenticated", action="store_true",
                          help="serve a --host other than loopback without --auth-token-env (refused otherwise)")
    rollouts.add_argument("--max-queued", type=int, default=None, metavar="N",
                          help="rollouts queued or playing at once across all batches; a batch that would pass "
                               "it gets HTTP 429 with Retry-After (default: 20000, two batches of the largest size)")
    rollouts.add_argument("--max-request-bytes", type=int, default=None, metavar="N",
                          help="the longest request body read; a longer one gets HTTP 413 (default: 1048576)")
    rollouts.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")


def _rollout_server(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.ledger import LedgerError
    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.rollouts.access import KeyAllowList, binds_loopback_only, read_token
    from pytest_agentgym.rollouts.app import DEFAULT_MAX_REQUEST_BYTES, serve
    from pytest_agentgym.rollouts.node import NodeError, RolloutNode
    from pytest_agentgym.rollouts.request import BadRollouts
    from pytest_agentgym.rollouts.service import DEFAULT_MAX_QUEUED, RolloutService

    max_queued = DEFAULT_MAX_QUEUED if args.max_queued is None else args.max_queued
    max_bytes = DEFAULT_MAX_REQUEST_BYTES if args.max_request_bytes is None else args.max_request_bytes
    try:
        if args.concurrency is not None and args.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {args.concurrency}")
        if max_queued < 1:
            raise ValueError(f"--max-queued must be at least 1 (rollouts queued or playing at once), got {max_queued}")
        if max_bytes < 1024:
            raise ValueError(f"--max-request-bytes must be at least 1024 (a batch's body), got {max_bytes}")
        KeyAllowList.build(allowed=args.allow_base_url, base_url=None, node_urls=())  # each a URL, or say so now
        token = read_token(args.auth_token_env) if args.auth_token_env else None
        if token is None and not binds_loopback_only(args.host) and not args.allow_unauthenticated:
            raise ValueError(
                f"--host {args.host} can be reached from other machines, and the service has no authentication: "
                f"anyone who reaches the port could play batches on this machine's environments and model "
                f"endpoints. Give --auth-token-env NAME (callers then send 'Authorization: Bearer <token>'), "
                f"or --allow-unauthenticated if only trusted machines can reach {args.host}:{args.port}")
        node = RolloutNode.load(args.node, Path.cwd(), concurrency=args.concurrency, nats=args.nats,
                                replicas=args.replicas)
        if args.api_key_env:
            read_api_key(args.api_key_env)  # set, or say so now rather than at the first batch
        if args.base_url:
            from pytest_agentgym.rollouts.request import openai_base

            args.base_url = openai_base(args.base_url)
        allowed = KeyAllowList.build(allowed=args.allow_base_url, base_url=args.base_url, node_urls=node.model_urls)
        service = RolloutService(node, reports=Path(args.reports), run_id=args.run_id,
                                 api_key_env=args.api_key_env, key_allow_list=allowed, max_queued=max_queued,
                                 command="pytest-agentgym " + " ".join(sys.argv[1:]))
    except (NodeError, LedgerError, BadRollouts, ValueError) as exc:
        print(f"pytest-agentgym rollout-server: {exc}", file=sys.stderr)
        return 2
    if token is None and not binds_loopback_only(args.host):
        print(f"pytest-agentgym rollout-server: warning: serving {args.host} without authentication "
              f"(--allow-unauthenticated)", file=sys.stderr, flush=True)
    for line in service.start():
        print(line, flush=True)
    if args.api_key_env:
        print(f"API key ({args.api_key_env}): the service {allowed.said()} (--allow-base-url adds more)", flush=True)
    host = f"[{args.host}]" if ":" in args.host else args.host

    def ready(port: int) -> None:  # the port accepts connections from here on
        print(f"rollout service on http://{host}:{port} (node {node.name}, concurrency "
              f"{node.concurrency} per endpoint, at most {max_queued} rollouts queued; environments: "
              f"{', '.join(node.served())})", flush=True)

    try:
        serve(service, host=args.host, port=args.port, default_base_url=args.base_url, auth_token=token,
              max_request_bytes=max_bytes, log_level=args.log_level, on_ready=ready)
    except KeyboardInterrupt:  # SIGINT, raised again by uvicorn once it has shut down
        return 130
    finally:
        service.close()  # when uvicorn could not start (port taken); else done already at its shutdown
    return 0


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


@contextlib.contextmanager
def _reader_warnings(command: str) -> Iterator[None]:
    """The readers' warnings (a line of episodes.jsonl skipped, a duplicate left out) as one
    line each on stderr, ``pytest-agentgym compare: warning: <what>``, each once however
    often the run is read."""
    import warnings

    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        text = str(message)
        if text not in shown:
            shown.add(text)
            print(f"pytest-agentgym {command}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def _internal_error(command: str, run: Callable[[], int]) -> int:
    """``run()``, with any exception it lets out turned into one line on stderr and exit 2:
    exit 1 means "regressed" (or a gate failed) to CI, so a crash must never read as it."""
    try:
        return run()
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the last line of defence of a gating command
        from pytest_agentgym.compare.error import describe_internal_error

        print(f"pytest-agentgym {command}: internal error: {describe_internal_error(exc)}; "
              f"this is a bug in pytest-agentgym, not a verdict (exit 2): please report it with the "
              f"command line", file=sys.stderr)
        return 2


def _report(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.ledger import settle_crashed
    from pytest_agentgym.report.render import render_run_dir
    from pytest_agentgym.results.store import RunDir

    if _refused("report", args.run_dir):
        return 2
    info = settle_crashed(RunDir(args.run_dir))  # a run left "running" by a dead process
    if info is not None and info.status == "crashed":
        print(f"run {info.run_id} crashed (its process is gone); resume it with "
              f"pytest ... --agentgym-resume={args.run_dir}", file=sys.stderr)
    with _reader_warnings("report"):
        path = render_run_dir(args.run_dir, output=args.output, compress=args.compress)
    print(path)
    return 0


def _export(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.export import ExportError, export_run
    from pytest_agentgym.results.jsonl import ResultsWriteError

    if _refused("export", args.run_dir):
        return 2
    try:
        with _reader_warnings("export"):
            result = export_run(args.run_dir, format=args.format, only=args.only, output=args.output)
    except (ResultsWriteError, ExportError) as exc:
        print(f"pytest-agentgym export: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # -o - into a reader that stopped reading (| head): it has what it wanted
        with contextlib.suppress(OSError, ValueError):
            import os
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 0
    for line in result.skipped_lines:
        print(f"pytest-agentgym export: skipped {line}", file=sys.stderr)
    print(result.summary(), file=sys.stderr if args.output == "-" else sys.stdout)  # stdout holds the rows
    if result.rows == 0:
        print("pytest-agentgym export: nothing to export (exit 1)", file=sys.stderr)
        return 1
    return 0


def _refused(command: str, run_dir: str) -> bool:
    """Whether ``run_dir`` is refused as no run directory (then said in one line on stderr)."""
    refusal = not_a_run_dir(Path(run_dir))
    if refusal is not None:
        print(f"pytest-agentgym {command}: {refusal}", file=sys.stderr)
    return refusal is not None


def not_a_run_dir(path: Path) -> str | None:
    """Why ``path`` is not a run directory to render, or None. A verifiers output
    directory (``vf-eval -o``: traces.jsonl, at its top or one level down) is named as
    such, with the way to get a run directory of the same episodes."""
    if not path.exists():
        return f"{path} does not exist; give a run directory (e.g. reports/latest)"
    if not path.is_dir():
        return f"{path} is a file, not a run directory; give a run directory (e.g. reports/latest)"
    if (path / "run.json").is_file():
        return None
    if (path / "traces.jsonl").is_file() or any(path.glob("*/traces.jsonl")):
        return (f"{path} is a verifiers output directory (vf-eval -o: traces.jsonl), not a pytest-agentgym run "
                f"directory; for a report of these episodes run the suite through pytest (a suite naming the "
                f"verifiers environment, docs/training.md) and render its reports/<run_id>")
    return (f"{path} has no run.json: it is not a pytest-agentgym run directory; give one that holds run.json "
            f"and episodes.jsonl (e.g. reports/latest)")


def _compare(args: argparse.Namespace) -> int:
    def run() -> int:
        with _reader_warnings("compare"):
            return _compare_runs(args)

    return _internal_error("compare", run)


def _compare_runs(args: argparse.Namespace) -> int:
    import json

    from pytest_agentgym.compare import CompareError, compare_runs
    from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir

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
    from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir
    from pytest_agentgym.report.trend import build_trend
    from pytest_agentgym.report.trend_page import write_trend_html

    reports = Path(args.reports)
    try:
        runs = [resolve_run_dir(run, reports) for run in args.runs]
        with _reader_warnings("trend"):  # each run's skipped lines once, as compare says them
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

        serve(args.name, host=args.host, port=args.port, log_level=args.log_level, fast_path=args.fast_path)
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
        return _internal_error("report", lambda: _report(args))
    if args.command == "export":
        return _internal_error("export", lambda: _export(args))
    if args.command == "publish-outbox":
        from pytest_agentgym.publish.outbox import publish_outbox_cli

        return publish_outbox_cli(args.run_dir, url=args.nats, create_stream=args.create_stream)
    if args.command == "compare":
        return _compare(args)
    if args.command == "trend":
        return _internal_error("trend", lambda: _trend(args))
    if args.command == "merge":
        from pytest_agentgym.run.merge import merge_command

        return _internal_error("merge", lambda: merge_command(args.shards, args.out, baseline=args.baseline,
                                                                report=not args.no_report, notify=args.notify))
    if args.command == "fleet":
        return fleet.main(args)
    if args.command == "runs":
        return _internal_error("runs", lambda: view.runs_command(args))
    if args.command == "view":
        return _internal_error("view", lambda: view.view_command(args))
    if args.command == "worker":
        import shlex

        from pytest_agentgym.worker.serve import main as worker_main

        if args.concurrency is not None and args.concurrency < 1:
            print(f"pytest-agentgym worker: --concurrency {args.concurrency}: give a whole number >= 1",
                  file=sys.stderr)
            return 2
        return worker_main(nats=args.nats, node=args.node, concurrency=args.concurrency, name=args.name,
                           log_dir=args.log_dir, reconnect_s=args.reconnect, heartbeat_s=args.heartbeat,
                           nak_delay_s=args.nak_delay, replicas=args.replicas,
                           command=shlex.join(["pytest-agentgym", *(argv if argv is not None else sys.argv[1:])]))
    if args.command == "rollout-server":
        return _rollout_server(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
