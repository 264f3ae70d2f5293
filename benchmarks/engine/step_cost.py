"""The harness's CPU for one environment step, by round: is a step late in a conversation dearer?

    python benchmarks/engine/step_cost.py --env-url http://127.0.0.1:PORT --model-url http://127.0.0.1:PORT/v1 \
        [--episodes 100] [--rounds 20]

Plays ``--episodes`` Maze episodes of ``--rounds`` rounds one after another through
the plugin's own episode loop (``episode.run_episode`` with its environment client,
model client and Maze adapter, as a pytest item runs them), in this process, against
a Maze server and benchmarks/common/fake_model.py (which answers at once with an action the
server accepts, so every episode plays all its rounds). Each model call notes this
thread's CPU time (``time.thread_time()``; the loop, both clients and the parsing all
run on it, waiting costs nothing); the CPU between the calls of round r and r+1 is the
harness's cost of step r: sending the conversation, reading the reply, parsing the
action, the environment request and its answer, the turn kept. The median of each round
over the episodes is printed, and rounds 14-18 against rounds 1-5 (round 0 holds the
episode's first requests on fresh connections; the last round ends the episode).

This is what run_all.py's ``step_cost`` runs; the conversation grows by about 160
characters a round. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

EARLY = range(1, 6)
LATE = range(14, 19)


async def play(env_url: str, model_url: str, episodes: int, rounds: int) -> list[list[float]]:
    from pytest_agentgym.envs import adapter_class
    from pytest_agentgym.envs.protocol import EnvClient
    from pytest_agentgym.envs.spec import EnvSpec, SuccessRule
    from pytest_agentgym.model.client import EndpointClient
    try:
        from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest, run_episode
        from pytest_agentgym.engine.model import ModelAdapter
        from pytest_agentgym.model.call_settings import Sampling
    except ImportError:  # a tree from before the package layout (run_all.py --before an older commit)
        from pytest_agentgym.episode import EpisodeLimits, EpisodeRequest, run_episode  # type: ignore
        from pytest_agentgym.model.client import Sampling  # type: ignore
        from pytest_agentgym.resources import ModelAdapter  # type: ignore

    class Timed(ModelAdapter):
        marks: list[float] = []

        async def complete(self, messages, **options):  # type: ignore[no-untyped-def]
            self.marks.append(time.thread_time())
            return await super().complete(messages, **options)

    spec = EnvSpec(name="Maze", category="lightweight", port=1, dialect="id", max_rounds=rounds,
                   success=SuccessRule("reward > 0"), request_timeout=30.0)
    model = Timed(EndpointClient(model_url, "fake", request_timeout=60), Sampling())
    per_episode = []
    try:
        async with EnvClient(env_url + "/maze", env="Maze", dialect="id", timeout=30.0) as client:
            for number in range(episodes):
                model.marks = []
                request = EpisodeRequest(run_id="step-cost", spec=spec, task_index=number % 25, repeat=0,
                                         limits=EpisodeLimits(max_rounds=rounds, timeout_s=300, retries=0))
                record = await run_episode(request, adapter_class("Maze")(), client, model)
                if record.error is not None or record.rounds != rounds:
                    raise RuntimeError(f"episode {number} did not play {rounds} rounds: {record.error}")
                per_episode.append([(b - a) * 1000 for a, b in zip(model.marks, model.marks[1:])])
    finally:
        await model.aclose()
    return per_episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-url", required=True, help="the embedded lmrlgym server (its /maze is used)")
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    steps = asyncio.run(play(args.env_url, args.model_url, args.episodes, args.rounds))
    by_round = [statistics.median(episode[r] for episode in steps) for r in range(args.rounds - 1)]
    early = statistics.median(episode[r] for episode in steps for r in EARLY)
    late = statistics.median(episode[r] for episode in steps for r in LATE)
    print(json.dumps({"episodes": len(steps), "by_round_ms": [round(v, 4) for v in by_round],
                      "early_ms": early, "late_ms": late, "late_over_early": late / early}))


if __name__ == "__main__":
    main()
