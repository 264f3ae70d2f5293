"""A fixed script of requests to an ALFWorld server, and what came back.

Used twice: ``python tests/helpers/alfworld_exchanges.py URL OUT.json`` recorded
tests/data/alfworld_original_answers.json from AgentGym's original
``agentenv-alfworld`` server, run unmodified on loopback with its data directory
(``~/.cache/alfworld``, it reads no variable) holding the shipped games and the
json_2.1.1 domain and grammar under ``logic/`` (docs/envs/alfworld.md says how);
tests/servers/test_alfworld_exchanges.py plays the same script against the embedded
server and compares.

Each exchange is ``{"name", "method", "path", "body", "status", "answer"}``;
``answer`` is the body's text for HTTP 200 (compared byte for byte: ``0.0`` and
``0`` differ), the names of the missing fields for 422. The script starts from
a fresh server: env ids are 0, 1, ... in creation order on both.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

#: the shipped games (test items 2420-2427 of AgentGym's mapping)
GAMES = list(range(2420, 2428))
#: the game whose file is not shipped (train item 0), and past the mapping's end
MISSING_GAME, PAST_THE_END = 0, 2894  # past ALFWorld's own splits (2620-2893): the original's 2620
MAX_STEPS = 50


def play(base_url: str, walkthroughs: dict[int, list[str]]) -> list[dict[str, Any]]:
    """Run the script against the fresh server at ``base_url``; ``walkthroughs``: game -> actions."""
    out: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url, timeout=120) as client:

        def call(name: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
            response = client.post(path, json=body) if method == "POST" else client.get(path)
            answer = None
            if response.status_code == 200:
                answer = response.text
            elif response.status_code == 422:
                answer = sorted(str(error["loc"][-1]) for error in response.json()["detail"])
            out.append({"name": name, "method": method, "path": path, "body": body,
                        "status": response.status_code, "answer": answer})
            return response.json() if response.status_code == 200 else None

        def step(name: str, env: int, action: str) -> Any:
            return call(name, "POST", "/step", {"id": env, "action": action})

        call("root", "GET", "/")
        env, other = call("create", "POST", "/create")["id"], call("create other", "POST", "/create")["id"]
        step("step before reset", other, "look")
        for get in ("observation", "available_actions", "detail"):
            call(f"{get} before reset", "GET", f"/{get}?id={other}")
        call("reset unknown env", "POST", "/reset", {"id": 99, "game": GAMES[0], "world_type": "Text"})
        call("step unknown env", "POST", "/step", {"id": 99, "action": "look"})
        call("reset bad world_type", "POST", "/reset", {"id": env, "game": GAMES[0], "world_type": "text"})
        call("reset missing world_type", "POST", "/reset", {"id": env, "game": GAMES[0]})
        call("step missing action", "POST", "/step", {"id": env})
        for game in GAMES:
            call(f"reset {game}", "POST", "/reset", {"id": env, "game": game, "world_type": "Text"})
            for get in ("observation", "available_actions", "detail"):
                call(f"{get} {game}", "GET", f"/{get}?id={env}")
            for action in ("open the pod bay doors", "look", "inventory", "help"):
                step(f"step {game} {action}", env, action)
            for n, action in enumerate(walkthroughs[game]):
                step(f"step {game} walkthrough {n}", env, action)
            step(f"step {game} after the win", env, "look")
            call(f"detail {game} after the win", "GET", f"/detail?id={env}")
            # every receptacle: go there, then open, examine and close what can be
            start = call(f"reset {game} again", "POST", "/reset", {"id": env, "game": game, "world_type": "Embody"})
            for place in [a for a in start["available_actions"] if a.startswith("go to ")]:
                there = step(f"step {game} {place}", env, place)
                for action in [a for a in there["available_actions"] if a.split()[0] in ("open", "examine")]:
                    step(f"step {game} {place}: {action}", env, action)
                    if action.startswith("open "):
                        step(f"step {game} {place}: close", env, "close " + action[len("open "):])
        call("reset for the step limit", "POST", "/reset", {"id": other, "game": GAMES[0], "world_type": "Hybrid"})
        for n in range(MAX_STEPS):
            step(f"look {n + 1}", other, "look")
        step("look past the limit", other, "look")
        call("reset past the end", "POST", "/reset", {"id": env, "game": PAST_THE_END, "world_type": "Text"})
        call("reset a game not in the data", "POST", "/reset",
             {"id": env, "game": MISSING_GAME, "world_type": "Text"})
    return out


def shipped_walkthroughs() -> dict[int, list[str]]:
    from helpers.alfworld_support import walkthrough

    return {game: walkthrough(game) for game in GAMES}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/helpers/alfworld_exchanges.py SERVER_URL OUT.json", file=sys.stderr)
        return 2
    url, out = argv
    exchanges = play(url, shipped_walkthroughs())
    Path(out).write_text(json.dumps({"exchanges": exchanges}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, the folder above, holds the helpers package
    raise SystemExit(main(sys.argv[1:]))
