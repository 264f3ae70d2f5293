"""How the scripted reference policy, and each game's own walkthrough, play ALFWorld's
real games on the embedded server.

Starts ``python -m pytest_agentgym serve alfworld`` on a free loopback port with
``ALFWORLD_DATA`` as given, then:

1. the walkthrough: each game's ``walkthrough`` (in its ``game.tw-pddl``) played over
   HTTP, ``create -> reset -> steps``; every game must end won (reward 1, done);
2. the reference policy: each game played the way AgentGym's evaluator runs it (the
   real adapter and protocol client, at most 30 rounds), the policy answering
   in-process.

Prints the counts won, per task type, the games the policy lost and the wall time.

    ALFWORLD_DATA=../shared/alfworld python benchmarks/servers/reference_alfworld.py \\
        [--items 2420-2619] [--skip-walkthrough] [--skip-policy]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

from pytest_agentgym.model.reference.alfworld import POLICY
from pytest_agentgym.servers.embedded.alfworld_tasks import DATA_ENV, game_dirs, game_file

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md
from benchmarks.servers.reference_play import embedded_server, play  # noqa: E402


def task_kind(index: int) -> str:
    """The game's task type: the first part of its directory name (``pick_cool_then_place_in_recep``)."""
    return game_dirs()[index].split("/")[1].split("-")[0]


def walkthroughs(url: str, root: Path, indices: list[int]) -> dict[int, bool]:
    won = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        env_id = client.post("/create").json()["id"]
        for index in indices:
            reset = client.post("/reset", json={"id": env_id, "game": index, "world_type": "Text"}).json()
            if "error" in reset:
                raise SystemExit(f"game {index}: {reset['error']}")
            answer: dict = {}
            for action in json.loads(game_file(root, index).read_text())["walkthrough"]:
                answer = client.post("/step", json={"id": env_id, "action": action}).json()
                if "error" in answer or answer["done"]:
                    break
            won[index] = answer.get("reward") == 1.0 and answer.get("done") is True
    return won


def report(name: str, won: dict[int, bool], elapsed: float) -> None:
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for index, ok in won.items():
        by_kind[task_kind(index)].append(ok)
    print(f"ALFWorld {name}: won {sum(won.values())}/{len(won)} in {elapsed:.0f} s "
          f"({elapsed / max(len(won), 1):.1f} s/game)")
    print("  per task type: " + ", ".join(f"{kind} {sum(v)}/{len(v)}" for kind, v in sorted(by_kind.items())))
    lost = [index for index, ok in won.items() if not ok]
    if lost:
        print(f"  not won: {', '.join(map(str, lost))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="2420-2619", help="first-last game index (default: 2420-2619)")
    parser.add_argument("--skip-walkthrough", action="store_true")
    parser.add_argument("--skip-policy", action="store_true")
    args = parser.parse_args()
    if not os.environ.get(DATA_ENV):
        raise SystemExit(f"set {DATA_ENV} to ALFWorld's data (a folder holding json_2.1.1/)")
    low, high = (int(part) for part in args.items.split("-"))
    indices = list(range(low, high + 1))
    root = Path(os.environ[DATA_ENV]).expanduser()
    with embedded_server("alfworld") as server:
        if not args.skip_walkthrough:
            started = time.perf_counter()
            won = walkthroughs(server.url, root, indices)
            report("walkthrough", won, time.perf_counter() - started)
        if not args.skip_policy:
            records, elapsed = asyncio.run(play("ALFWorld", server.url, POLICY, indices, random_moves=False))
            report(f"reference policy (at most {records[0].max_rounds} rounds)",
                   {r.task_index: r.reward == 1 for r in records}, elapsed)


if __name__ == "__main__":
    main()
