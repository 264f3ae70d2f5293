"""AgentGym's own evaluation loop on one of our servers, for the comparison in run_all.py.

    <python with agentenv> benchmarks/engine/agentgym_loop.py --env-url http://127.0.0.1:PORT/maze \
        --model-url http://127.0.0.1:PORT/v1 --tasks 0-24 [--max-rounds 5]

Runs ``Evaluator.generate_experience`` with its ``APIAgent`` (AgentGym's client
package ``agentenv``, which must be importable: it is not on PyPI under that
name, so install it from the AgentGym repository into a separate environment).
What worked here (AgentGym 3ef9235, agentenv 0.2.0, Python 3.11; about 1.2 GB):

    git -C <AgentGym checkout> archive HEAD agentenv | tar -x -C /work/agentgym-src
    python3 -m venv /work/venv-agentenv
    /work/venv-agentenv/bin/pip install torch==2.13.0      # a CPU build
    /work/venv-agentenv/bin/pip install --no-deps -e /work/agentgym-src/agentenv
    /work/venv-agentenv/bin/pip install transformers openai requests numpy

(``--no-deps``: its declared trl, deepspeed, wandb... are not needed by the
evaluation loop; the last line is what ``agentenv.controller`` and
``agentenv.envs`` import.) ``run_all.py`` looks for /work/venv-agentenv/bin/python
(``--agentgym-python``).
One episode at a time, as AgentGym does. Prints one JSON line: episodes,
wall seconds of the loop, this process's CPU seconds in it, and each task's
reward. The client's own prints go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time


def tasks(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        out.extend(range(int(first), int(last or first) + 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-url", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--model", default="fake")
    parser.add_argument("--tasks", default="0-24")
    parser.add_argument("--max-rounds", type=int, default=5)
    args = parser.parse_args()
    with contextlib.redirect_stdout(sys.stderr):
        from agentenv.controller import APIAgent, Evaluator
        from agentenv.envs import MazeTask

        indices = tasks(args.tasks)
        task = MazeTask(client_args={"env_server_base": args.env_url, "data_len": max(indices) + 1,
                                     "timeout": 300}, n_clients=1)
        agent = APIAgent(api_key="EMPTY", base_url=args.model_url, model=args.model, max_tokens=256,
                         temperature=0.0)
        evaluator = Evaluator(agent, [task])
        cpu, wall = time.process_time(), time.monotonic()
        experiences = evaluator.generate_experience(idxs=indices, max_rounds=args.max_rounds)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    print(json.dumps({"episodes": len(experiences), "wall_s": wall, "cpu_s": cpu,
                      "rewards": {str(i): float(e.reward) for i, e in zip(indices, experiences)}}))


if __name__ == "__main__":
    main()
