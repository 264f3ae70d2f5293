"""Our ALFWorld server against AgentGym's own, request by request, on the same games.

Both servers must be running already, on the same data (the original reads
``~/.cache/alfworld`` whatever the environment says, so point its HOME at a folder whose
``.cache/alfworld`` is the data)::

    ALFWORLD_DATA=<data> pytest-agentgym serve alfworld --port 36002 &
    HOME=<home> alfworld --port 36001 &        # AgentGym's agentenv-alfworld
    python benchmarks/servers/alfworld_wire.py --ours http://127.0.0.1:36002 \\
        --original http://127.0.0.1:36001 --data <data> --games 2420-2619

Each game is played twice on one env of each server, in lockstep: its own walkthrough
(the game file's ``walkthrough``) to the win, then one step more (refused after
``done``); then, from a new reset, actions that are not admissible (:data:`INVALID`:
"Nothing happens.", or a look for the blank-padded one: the game stays where it was) and random
actions drawn from the original's ``available_actions`` (``random.Random(game)``) until
``done`` or ``--short-random`` steps (on every ``--long-every``-th game: 60, past the
servers' 50-step limit). Every answer (status code and JSON body) is compared:
``/create``, each ``/reset`` and ``/step``, and ``/observation``, ``/available_actions`` and
``/detail`` after each episode. The counts of identical answers per kind, the first example
of each kind's differences, and the seconds per episode on each server are printed (and
written as JSON with ``--out``). Exit 0 when nothing differs. ``--record`` keeps every
request with the original's answer (tests/data/alfworld_original_real_games.json, which
tests/servers/test_alfworld_wire_real.py replays against ours).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from benchmarks.servers.webshop_conformance import answer, parse_ids  # noqa: E402
from pytest_agentgym.servers.embedded.alfworld_tasks import game_file  # noqa: E402

#: actions that are not admissible: an unknown verb, an unknown object, case, a model's whole
#: reply, an empty action; and blanks around an admissible one (the engine strips them: it plays)
INVALID = ("dance", "go to moon 1", "LOOK", "  look  ", "Thought: I should look.\nAction: look", "")
SERVERS = ("original", "ours")


class Wire:
    """Both servers side by side: each request goes to both at once, and the answers are
    compared and counted under a kind."""

    def __init__(self, original: str, ours: str) -> None:
        self.http = {"original": httpx.Client(base_url=original, timeout=600),
                     "ours": httpx.Client(base_url=ours, timeout=600)}
        self.pool = ThreadPoolExecutor(2)
        self.same: Counter[str] = Counter()
        self.total: Counter[str] = Counter()
        self.first: dict[str, dict[str, Any]] = {}
        self.seconds: dict[str, float] = {name: 0.0 for name in SERVERS}
        #: every request with the original's answer, for --record
        self.exchanges: list[dict[str, Any]] = []

    def _timed(self, name: str, method: str, path: str, kwargs: dict[str, Any]) -> tuple[Any, float]:
        start = time.perf_counter()
        result = answer(self.http[name], method, path, **kwargs)
        return result, time.perf_counter() - start

    def call(self, kind: str, game: int, method: str, path: str, **kwargs: Any) -> tuple[Any, Any]:
        """(original's answer, ours) to one request; a difference is counted and kept."""
        futures = {name: self.pool.submit(self._timed, name, method, path, kwargs) for name in SERVERS}
        results = {name: futures[name].result() for name in SERVERS}
        for name in SERVERS:
            self.seconds[name] += results[name][1]
        original, ours = results["original"][0], results["ours"][0]
        self.exchanges.append({"kind": kind, "method": method, "path": path, **kwargs,
                               "status": original[0], "answer": original[1]})
        self.total[kind] += 1
        if json.dumps(original) == json.dumps(ours):  # as text: 0 and 0.0 differ
            self.same[kind] += 1
        elif kind not in self.first:
            self.first[kind] = {"game": game, "request": f"{method} {path} {kwargs.get('json', kwargs.get('params'))}",
                                "original": original, "ours": ours}
        return original[1], ours[1]

    def reads(self, kind: str, game: int, env_id: int) -> None:
        for path in ("/observation", "/available_actions", "/detail"):
            self.call(f"{kind}: {path}", game, "GET", path, params={"id": env_id})


def walkthrough(path: Path) -> list[str]:
    return json.loads(path.read_text())["walkthrough"]


def play_game(wire: Wire, game: int, data: Path, max_random: int) -> dict[str, dict[str, float]]:
    """The three episodes of one game; the seconds each server spent in each."""
    spent: dict[str, dict[str, float]] = {}
    original, _ = wire.call("create", game, "POST", "/create")
    env_id = original["id"] if isinstance(original, dict) and "id" in original else 0

    def episode(name: str, actions: Any) -> None:
        """One reset, then ``actions(step, state)`` -> (kind, action) until None or ``done``."""
        before = dict(wire.seconds)
        first, _ = wire.call("reset", game, "POST", "/reset", json={"id": env_id, "game": game, "world_type": "Text"})
        state = first if isinstance(first, dict) else {}
        for step in range(10_000):
            chosen = actions(step, state)
            if chosen is None:
                break
            kind, action = chosen
            state, _ = wire.call(kind, game, "POST", "/step", json={"id": env_id, "action": action})
            state = state if isinstance(state, dict) else {}
            if state.get("done"):
                wire.call("after done", game, "POST", "/step", json={"id": env_id, "action": "look"})
                break
        wire.reads(name, game, env_id)
        spent[name] = {server: wire.seconds[server] - before[server] for server in SERVERS}

    gold = walkthrough(game_file(data, game))
    episode("walkthrough", lambda step, state: ("walkthrough", gold[step]) if step < len(gold) else None)
    rng = random.Random(game)

    def invalid_then_random(step: int, state: dict[str, Any]) -> tuple[str, str] | None:
        if step < len(INVALID):  # "Nothing happens.": the game is where the reset left it
            return "invalid", INVALID[step]
        if step - len(INVALID) < max_random and state.get("available_actions"):
            return "random", rng.choice(state["available_actions"])
        return None

    episode("invalid, then random", invalid_then_random)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", required=True, help="base URL of our server")
    parser.add_argument("--original", required=True, help="base URL of AgentGym's agentenv-alfworld")
    parser.add_argument("--data", required=True, type=Path, help="the data both play (json_2.1.1/ inside)")
    parser.add_argument("--games", default="2420-2619", help="game indices, e.g. 2420-2619 or 2420,2431")
    parser.add_argument("--short-random", type=int, default=8, help="random steps at most (default 8)")
    parser.add_argument("--long-every", type=int, default=10,
                        help="every N-th game plays 60 random steps, past the 50-step limit (default 10; 0: none)")
    parser.add_argument("--out", type=Path, help="write the counts and timings here as JSON")
    parser.add_argument("--record", type=Path, help="write every request and the original's answer here "
                        "(tests/data/alfworld_original_real_games.json; start both servers fresh)")
    args = parser.parse_args()

    wire = Wire(args.original.rstrip("/"), args.ours.rstrip("/"))
    episodes: dict[str, dict[str, list[float]]] = defaultdict(lambda: {name: [] for name in SERVERS})
    started = time.perf_counter()
    games = parse_ids(args.games)
    for number, game in enumerate(games, 1):
        steps = 60 if args.long_every and (number - 1) % args.long_every == 0 else args.short_random
        for kind, seconds in play_game(wire, game, args.data, steps).items():
            for name in SERVERS:
                episodes[kind][name].append(seconds[name])
        differing = sum(wire.total.values()) - sum(wire.same.values())
        print(f"game {game} ({number}/{len(games)}): {differing} differing answers so far, "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        timing = {kind: {name: sum(per[name]) / len(per[name]) for name in SERVERS} for kind, per in episodes.items()}
        if args.out:  # after every game: a run stopped early still says what it compared
            args.out.write_text(json.dumps({"games": games[:number], "same": wire.same, "total": wire.total,
                                            "first_differences": wire.first, "seconds_per_episode": timing},
                                           indent=1, default=str))

    print(f"\nidentical answers per kind (original against ours), {len(games)} games:")
    for kind in wire.total:
        print(f"  {kind:32} {wire.same[kind]:6} of {wire.total[kind]:6}")
    print(f"  {'all':32} {sum(wire.same.values()):6} of {sum(wire.total.values()):6}")
    for kind, example in wire.first.items():
        print(f"\nfirst difference in {kind}: game {example['game']}, {example['request']}\n"
              f"  original: {example['original']!r}\n  ours:     {example['ours']!r}")
    print("\nseconds per episode (mean, each server's own request time; both served at once):")
    for kind, per_server in timing.items():
        ratio = per_server["original"] / per_server["ours"] if per_server["ours"] else float("nan")
        print(f"  {kind:12} original {per_server['original']:.3f}  ours {per_server['ours']:.3f}  ({ratio:.1f}x)")
    if args.record:
        args.record.write_text(json.dumps({"games": args.games, "exchanges": wire.exchanges}, indent=0) + "\n")
    return 0 if wire.same == wire.total else 1


if __name__ == "__main__":
    sys.exit(main())
