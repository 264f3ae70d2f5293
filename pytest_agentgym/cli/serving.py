"""The commands that play episodes for others, with this machine's node profile:
``pytest-agentgym worker`` (a work queue's items, docs/scale-out.md) and
``pytest-agentgym rollout-server`` (POST /rollouts for GRPO trainers, docs/training.md):
their options (both take ``--replicas``) and the checks made before either starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

REPLICAS_HELP = ("server processes per spawned environment server; creates go to the least loaded "
                 "(auto: one per 64 episodes in flight, at most one per core; default: the node's "
                 "envs.replicas, else 1)")


def _replicas_arg(text: str) -> int | str:
    from pytest_agentgym.config.options import parse_replicas

    try:
        return parse_replicas(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_worker_parser(sub: argparse._SubParsersAction) -> None:
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


def add_rollout_server_parser(sub: argparse._SubParsersAction) -> None:
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
    rollouts.add_argument("--checkpoint", default=None, metavar="PATH",
                          help="launch vLLM on this checkpoint as the node's vllm endpoint and vllm: section say "
                               "(as pytest's --agentgym-checkpoint), for batches that give no base_url; stopped "
                               "with the service (default: none)")
    rollouts.add_argument("--allow-base-url", action="append", default=[], metavar="URL",
                          help="also play (and send the API key to) base URLs under this one (same scheme, host "
                               "and port, path below it; /v1 added as for a batch's base_url); repeatable. Without "
                               "it the service calls only --base-url and the node's model endpoints, and a batch "
                               "naming another base_url is refused (403), with an API key or without")
    rollouts.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                          help="also answer requests whose Host header is NAME (a name this machine is reached by; "
                               "* for any); repeatable. Without it the service answers only localhost, 127.0.0.1, "
                               "[::1] and --host (with --host 0.0.0.0 or ::, also this machine's own names and "
                               "any IP address); other Host names get 403 (DNS rebinding)")
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


def rollout_server_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.ledger import LedgerError
    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.model.vllm import LaunchError
    from pytest_agentgym.rollouts.access import KeyAllowList, binds_loopback_only, read_token
    from pytest_agentgym.rollouts.app import DEFAULT_MAX_REQUEST_BYTES, serve
    from pytest_agentgym.rollouts.node import NodeError, RolloutNode
    from pytest_agentgym.rollouts.request import BadRollouts
    from pytest_agentgym.rollouts.service import DEFAULT_MAX_QUEUED, RolloutService
    from pytest_agentgym.transport.host_guard import HostGuard

    max_queued = DEFAULT_MAX_QUEUED if args.max_queued is None else args.max_queued
    max_bytes = DEFAULT_MAX_REQUEST_BYTES if args.max_request_bytes is None else args.max_request_bytes
    try:
        if args.concurrency is not None and args.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {args.concurrency}")
        if args.checkpoint is not None and args.base_url is not None:
            raise ValueError("--checkpoint and --base-url both name the endpoint of batches without base_url; "
                             "give one (the launched vLLM's URL is printed at start-up)")
        if max_queued < 1:
            raise ValueError(f"--max-queued must be at least 1 (rollouts queued or playing at once), got {max_queued}")
        if max_bytes < 1024:
            raise ValueError(f"--max-request-bytes must be at least 1024 (a batch's body), got {max_bytes}")
        KeyAllowList.build(allowed=args.allow_base_url, base_url=None, node_urls=())  # each a URL, or say so now
        hosts = HostGuard(args.host, args.allow_host, option="--allow-host NAME")  # each a name, or say so now
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
                                 checkpoint=args.checkpoint, command="pytest-agentgym " + " ".join(sys.argv[1:]))
    except (NodeError, LedgerError, BadRollouts, ValueError) as exc:
        print(f"pytest-agentgym rollout-server: {exc}", file=sys.stderr)
        return 2
    if token is None and not binds_loopback_only(args.host):
        print(f"pytest-agentgym rollout-server: warning: serving {args.host} without authentication "
              f"(--allow-unauthenticated)", file=sys.stderr, flush=True)
    try:
        started = service.start()
    except LaunchError as exc:  # the checkpoint's checks, or vLLM did not come up: run.json says so
        print(f"pytest-agentgym rollout-server: {exc}", file=sys.stderr)
        if getattr(exc, "detail", ""):
            print(exc.detail, file=sys.stderr)
        service.close()
        return 2
    except BaseException:
        service.close()
        raise
    for line in started:
        print(line, flush=True)
    default_base_url = args.base_url or (service.launched.base_url if service.launched else None)
    print(f"Host: the service {hosts.said()}", flush=True)
    if service.launched is not None:  # its URL is known now; batches (and the key) may go there as to --base-url
        service.key_allow_list = KeyAllowList.build(allowed=args.allow_base_url, base_url=default_base_url,
                                                    node_urls=node.model_urls)
    if args.api_key_env:
        print(f"API key ({args.api_key_env}): the service {service.key_allow_list.said()} (--allow-base-url adds "
              f"more)", flush=True)
    print(f"base URLs: the service {service.key_allow_list.said(calls=True)} (--allow-base-url adds more)",
          flush=True)
    host = f"[{args.host}]" if ":" in args.host else args.host

    def ready(port: int) -> None:  # the port accepts connections from here on
        print(f"rollout service on http://{host}:{port} (node {node.name}, concurrency "
              f"{node.concurrency} per endpoint, at most {max_queued} rollouts queued; environments: "
              f"{', '.join(node.served())})", flush=True)

    try:
        serve(service, host=args.host, port=args.port, default_base_url=default_base_url, auth_token=token,
              max_request_bytes=max_bytes, log_level=args.log_level, on_ready=ready, host_guard=hosts)
    except KeyboardInterrupt:  # SIGINT, raised again by uvicorn once it has shut down
        return 130
    finally:
        service.close()  # when uvicorn could not start (port taken); else done already at its shutdown
    return 0


def worker_command(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
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
