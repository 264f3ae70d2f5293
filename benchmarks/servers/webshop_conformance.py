"""Our WebShop server against AgentGym's own, route by route, on the same data.

Both servers must be running already, on the same product files (the original reads
them from its checkout's data/ directory; ours from ``AGENTENV_WEBSHOP_DATA``)::

    AGENTENV_WEBSHOP_DATA=<dir> pytest-agentgym serve webshop --port 36017 &
    webshop --port 36007 &           # AgentGym's agentenv-webshop
    python benchmarks/servers/webshop_conformance.py --ours http://127.0.0.1:36017 \\
        --original http://127.0.0.1:36007 --sessions 0-99

For each session id, both get ``/create`` and ``/reset``; then the same actions, chosen
from the ORIGINAL's pages (search the instruction's words, read from ``/instruction_text``,
open the first result, click each option the goal names that the item page offers, open
Description and go back, Buy Now; plus an action that is no action), and after each one ``/observation``,
``/available_actions`` and ``/instruction_text``. Every answer (status code and JSON
body; ``/create``'s random id only by its type) is compared; differences are printed
with the session, the request and both answers, and counted per route. Exit 0 when
nothing differs and every session searched its instruction's words.

Known difference: for a product whose price is a range, the original draws a price per
env from the clock and ours is fixed, so a price text, and a reward's price part, may
differ there (counted apart as "price" when the only differing words are prices).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from typing import Any

import httpx

PRICE = re.compile(r"\$\d[\d,]*(?:\.\d+)?")


def parse_ids(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out += list(range(int(low), int(high or low) + 1))
    return out


def answer(http: httpx.Client, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
    response = http.request(method, path, **kwargs)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def actions_for(page: str, clickables: list[str], instruction: str, step: int) -> str | None:
    """The next scripted action, from the original's page; None when the episode is over."""
    if step == 0:
        words = re.sub(r"(?i)^.*?find me|, and price lower than.*$", "", instruction)
        return f"search[{words.strip()}]"
    if step == 1:
        return "click[nothing that is on the page]"
    asins = [c for c in clickables if re.fullmatch(r"[a-z0-9]{10}", c)]
    if step == 2:
        return f"click[{asins[0]}]" if asins else None
    options = [c for c in clickables if c not in ("back to search", "< prev", "next >", "description", "features",
                                                  "reviews", "buy now", "attributes")]
    wanted = [o for o in options if o in instruction.lower()]
    if step - 3 < len(wanted):
        return f"click[{wanted[step - 3]}]"
    extra = step - 3 - len(wanted)
    return ["click[description]", "click[< prev]", "click[buy now]", None][min(extra, 3)]


def instruction_of(http: httpx.Client, env_idx: int) -> str:
    """The goal's instruction, from ``/instruction_text`` (a JSON string). Not from ``/state``:
    the first run of this script read it there, and against the original, whose ``/state`` gave
    no instruction, every scripted episode searched for nothing."""
    code, body = answer(http, "GET", "/instruction_text", params={"env_idx": env_idx})
    return body if code == 200 and isinstance(body, str) else ""


def same(a: Any, b: Any) -> str | None:
    """None when equal; "price" when only prices differ; else "differ"."""
    if a == b:
        return None
    if PRICE.sub("$P", repr(a)) == PRICE.sub("$P", repr(b)):
        return "price"
    return "differ"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", required=True)
    parser.add_argument("--original", required=True)
    parser.add_argument("--sessions", default="0-19", help="session ids, e.g. 0-99 or 0,5,7 (default 0-19)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per request (the original's "
                        "/create builds a whole shop)")
    args = parser.parse_args()
    tally: Counter[str] = Counter()
    shown = searched = 0
    sessions = parse_ids(args.sessions)
    with httpx.Client(base_url=args.ours, timeout=args.timeout) as ours, \
            httpx.Client(base_url=args.original, timeout=args.timeout) as original:
        for session in sessions:
            ids = {}
            for name, http in (("ours", ours), ("original", original)):
                code, body = answer(http, "POST", "/create")
                if code != 200 or not isinstance(body, int):
                    print(f"session {session}: {name} /create answered {code} {body!r:.200}")
                    return 2
                ids[name] = body

            def both(method: str, path: str, body: dict | None = None, query: bool = False) -> tuple[Any, Any]:
                got = []
                for name, http in (("ours", ours), ("original", original)):
                    if query:
                        got.append(answer(http, method, path, params={"env_idx": ids[name]}))
                    else:
                        got.append(answer(http, method, path, json={**(body or {}), "env_idx": ids[name]}))
                return got[0], got[1]

            def check(label: str, pair: tuple[Any, Any]) -> None:
                nonlocal shown
                verdict = same(*pair)
                tally[f"{label} {verdict or 'same'}"] += 1
                if verdict == "differ" and shown < 40:
                    shown += 1
                    print(f"session {session} {label}:\n  ours     {pair[0]!r:.400}\n  original {pair[1]!r:.400}")

            check("/reset", both("POST", "/reset", {"session_id": session}))
            step = 0
            while True:
                for route in ("/observation", "/available_actions", "/instruction_text"):
                    check(route, both("GET", route, query=True))
                page = answer(original, "GET", "/observation", params={"env_idx": ids["original"]})[1]
                offered = answer(original, "GET", "/available_actions", params={"env_idx": ids["original"]})[1]
                instruction = instruction_of(original, ids["original"])
                action = actions_for(str(page), list((offered or {}).get("clickables", [])), instruction, step)
                if step == 0:
                    searched += action != "search[]"
                if action is None:
                    break
                pair = both("POST", "/step", {"action": action})
                check(f"/step {action.split('[')[0]}", pair)
                step += 1
                if isinstance(pair[1][1], dict) and pair[1][1].get("done"):
                    break
    print(f"\nsessions that searched their instruction's words: {searched} of {len(sessions)}")
    print("answers compared, by route and verdict:")
    for key, count in sorted(tally.items()):
        print(f"  {key:40s} {count}")
    if searched < len(sessions):  # a scripted episode that searched for nothing tests little
        return 1
    return 1 if any(key.endswith("differ") for key in tally) else 0


if __name__ == "__main__":
    sys.exit(main())
