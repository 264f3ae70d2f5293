"""What does playing an episode through verifiers cost, next to the engine alone?

    .venv-verifiers/bin/python benchmarks/training/verifiers_bridge.py [--tasks 0-9] [--rounds 3] [--latency-ms 0]

Needs the ``verifiers`` extra (docs/training.md). Starts the reference agent and,
through the verifiers env's own ``serving()``, TextCraft's embedded server. Then,
interleaved task by task (A then B, B then A on alternate rounds), plays each
task (A) straight through the engine (``run_episode`` with the endpoint client,
as a pytest run does) and (B) as a verifiers rollout (``env.run_slot``: the
interaction, the interception server, ChatTurnHarness). Prints the median and
spread of the per-episode wall time of each and of B/A, and checks that every
pair got the same reward. Numbers depend on the machine; the CPU count is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest, run_episode  # noqa: E402
from pytest_agentgym.integrations.verifiers import load_environment  # noqa: E402
from pytest_agentgym.model.call_settings import Sampling  # noqa: E402
from pytest_agentgym.model.client import EndpointClient  # noqa: E402
from pytest_agentgym.engine.model import ModelAdapter  # noqa: E402
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port  # noqa: E402
from pytest_agentgym.process.managed import ManagedServer  # noqa: E402


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.1f} (min {ordered[0]:.1f}, max {ordered[-1]:.1f})"


async def measure(args: argparse.Namespace, agent_url: str) -> None:
    import verifiers.v1 as vf
    from verifiers.v1.env import RunSlot

    env = load_environment(env="TextCraft", tasks=args.tasks, node="local",
                           root=str(REPO))
    ctx = vf.ModelContext(client=vf.EvalClientConfig(base_url=agent_url + "/v1", api_key_var="AGENTGYM_NO_KEY"),
                          model="reference", sampling=vf.SamplingConfig())
    direct_ms: list[float] = []
    bridged_ms: list[float] = []
    mismatches = 0
    async with env.serving():
        tasks = list(env.taskset)
        node = env.node
        model = ModelAdapter(EndpointClient(agent_url + "/v1", "reference", request_timeout=30), Sampling())

        async def direct(task) -> float:
            request = EpisodeRequest(run_id="bench", spec=node.spec, task_index=task.data.task_index, repeat=0,
                                     limits=EpisodeLimits(node.max_rounds, node.episode_timeout, retries=0))
            async with env.adapter.make_client(node.spec, env.server_url) as client:
                record = await run_episode(request, env.adapter, client, model)
            return record.reward

        async def bridged(task) -> float:
            episode = await env.run_slot(RunSlot(task), ctx)
            return episode.traces[0].rewards["agentgym_reward"].value

        for round_ in range(args.rounds):
            for task in tasks:
                order = [("A", direct), ("B", bridged)]
                if round_ % 2:
                    order.reverse()
                rewards = {}
                for label, play in order:
                    started = time.perf_counter()
                    rewards[label] = await play(task)
                    (direct_ms if label == "A" else bridged_ms).append((time.perf_counter() - started) * 1000)
                mismatches += rewards["A"] != rewards["B"]
        await model.aclose()
    ratios = [b / a for a, b in zip(direct_ms, bridged_ms)]
    print(f"cpus {os.cpu_count()}, tasks {args.tasks} x {args.rounds} rounds, agent latency {args.latency_ms} ms")
    print(f"A engine alone      ms/episode: {spread(direct_ms)}")
    print(f"B verifiers rollout ms/episode: {spread(bridged_ms)}")
    print(f"B/A per pair: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
    print(f"reward mismatches between A and B: {mismatches} of {len(ratios)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="0-9")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=0)
    args = parser.parse_args()
    port = free_port()
    agent = ManagedServer("reference agent", command=[sys.executable, "-m", "pytest_agentgym", "reference-agent",
                                                      "--port", "{port}", "--latency-ms", str(args.latency_ms)],
                          port=port, health=HEALTH_ENDPOINT, startup_timeout=60, label="reference agent",
                          log_path=Path(tempfile.mkdtemp()) / "agent.log", advice=Advice())
    agent.start()
    try:
        asyncio.run(measure(args, agent.url))
    finally:
        agent.stop()


if __name__ == "__main__":
    main()
