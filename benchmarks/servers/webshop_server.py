"""The embedded WebShop server: start-up, episodes per second, resident memory after N episodes.

Each round starts the server (``python -m pytest_agentgym serve webshop``) on a free
loopback port and times spawn -> first answer to ``GET /`` (the shop is built in the
background) and spawn -> first ``/create`` answered (the shop and its search index
built), then plays N episodes one after another through HTTP along the gold path,
each on the next session id: create, reset, search the goal product's title, click
the product (through the result pages when it is not on the first), click each of the
goal's option values, Buy Now. The benchmark reads the goals from the same catalogue
(load_shop) to know the gold path; a policy never does. Then the server's RSS (psutil).
Prints per round, then medians and ranges, and the mean reward of the gold path (below
1 where the product is not found in the first 5 result pages or the goal's options
cannot all be clicked).

    python benchmarks/servers/webshop_server.py [--rounds 5] [--episodes 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
import psutil

from pytest_agentgym.process.managed import ManagedServer
from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop
from pytest_agentgym.servers.pool import embedded_command

#: result pages looked through for the goal product
PAGES = 5


def gold_episode(http: httpx.Client, shop, session: int) -> float:
    """One episode along the gold path for goal ``session``; its reward."""
    goal = shop.goals[session]
    env = http.post("/create").json()
    http.post("/reset", json={"env_idx": env, "session_id": session}).raise_for_status()

    def step(action: str) -> dict:
        answer = http.post("/step", json={"env_idx": env, "action": action})
        answer.raise_for_status()
        return answer.json()

    def clickables() -> list[str]:
        return http.get("/available_actions", params={"env_idx": env}).json()["clickables"]

    step(f"search[{shop.by_asin[goal['asin']]['Title']}]")
    for _ in range(PAGES):
        if goal["asin"].lower() in clickables():
            break
        if "next >" not in clickables():
            return 0.0
        step("click[next >]")
    else:
        return 0.0
    step(f"click[{goal['asin'].lower()}]")
    offered = clickables()
    for value in goal.get("goal_options", {}).values():
        if value in offered:
            step(f"click[{value}]")
    return float(step("click[buy now]")["reward"])


def one_round(shop, first: int, episodes: int) -> dict[str, float]:
    managed = ManagedServer("WebShop", command=embedded_command("webshop"), startup_timeout=120)
    started = time.perf_counter()
    managed.start()
    startup = time.perf_counter() - started
    try:
        with httpx.Client(base_url=managed.url, timeout=120) as http:
            http.post("/create").raise_for_status()
            ready = time.perf_counter() - started
            began = time.perf_counter()
            rewards = [gold_episode(http, shop, (first + n) % len(shop.goals)) for n in range(episodes)]
            elapsed = time.perf_counter() - began
        rss = psutil.Process(managed.proc.pid).memory_info().rss / 2**20
    finally:
        managed.stop()
    return {"startup_s": startup, "ready_s": ready, "episodes_per_s": episodes / elapsed, "rss_mib": rss,
            "mean_reward": statistics.fmean(rewards)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="server starts (default: 5)")
    parser.add_argument("--episodes", type=int, default=200, help="episodes per round (default: 200)")
    args = parser.parse_args()
    shop = load_shop()
    print(f"shop: {shop.source}, {len(shop.products)} products, {len(shop.goals)} goals", flush=True)
    results = []
    for r in range(args.rounds):
        figures = one_round(shop, r * args.episodes, args.episodes)
        results.append(figures)
        print(f"round {r + 1}: first answer {figures['startup_s']:.2f} s, first /create {figures['ready_s']:.2f} s, "
              f"{figures['episodes_per_s']:.1f} episodes/s, RSS {figures['rss_mib']:.1f} MiB, "
              f"gold-path mean reward {figures['mean_reward']:.3f}", flush=True)
    print(f"\n{args.episodes} gold-path episodes per round, {args.rounds} rounds; median [min-max]:")
    for key, unit in (("startup_s", "s to the first answer"), ("ready_s", "s to the first /create"),
                      ("episodes_per_s", "episodes/s"), ("rss_mib", "MiB RSS after the episodes"),
                      ("mean_reward", "gold-path mean reward")):
        values = [f[key] for f in results]
        print(f"  {statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] {unit}")


if __name__ == "__main__":
    main()
