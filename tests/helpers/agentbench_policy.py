"""A reference policy for the tasks of tests/helpers/agentbench_server.py, loaded into the
reference agent with ``AGENTGYM_REFERENCE_POLICIES=agentbench_policy:HOUSE,agentbench_policy:SHOP``
(tests/ on PYTHONPATH). Like the built-in policies it decides from the
conversation alone; it plays to win, and its ``random_reply`` answers without an
action (so the task ends the sample as the agent's fault).
"""

from __future__ import annotations

import json
import re

from helpers.agentbench_tasks import HOUSE_INSTRUCTIONS, RECEPTACLES, SHOP_INSTRUCTIONS

_GOAL = re.compile(r"Your task is to: put a (\w+) in ([\w ]+? \d+)\.")


def _said(messages, role):
    return [m["content"] for m in messages if m.get("role") == role]


class HousePolicy:
    name = "AgentBench-ALFWorld (test)"

    def recognizes(self, messages):
        return bool(messages) and messages[0].get("content") == HOUSE_INSTRUCTIONS

    def reply(self, messages, rng):
        goal = _GOAL.findall("\n".join(_said(messages, "user")))[-1]
        noun, target = goal
        commands = messages[-1]["content"].split("AVAILABLE ACTIONS: ", 1)[1].splitlines()
        for command in commands:
            if command.startswith("put ") and command.endswith(target):
                return f"THOUGHT: I hold it and I am there.\nACTION: {command}"
        for command in commands:
            if command.startswith(f"take {noun} "):
                return f"ACTION: {command}"
        start = max(i for i, m in enumerate(messages) if m["content"].startswith("Here is your task."))
        played = messages[start:]
        if any(f"You pick up the {noun}" in said for said in _said(played, "user")):
            return f"ACTION: go to {target}"
        visited = {said.split("ACTION: go to ", 1)[1].strip()
                   for said in _said(played, "assistant") if "ACTION: go to " in said}
        unseen = [r for r in RECEPTACLES if r not in visited]
        return f"THOUGHT: Look somewhere new.\nACTION: go to {unseen[0] if unseen else RECEPTACLES[0]}"

    def random_reply(self, messages, rng):
        return "I am not sure what to do."


class ShopPolicy:
    name = "AgentBench-WebShop (test)"

    def recognizes(self, messages):
        return bool(messages) and messages[0].get("content") == SHOP_INSTRUCTIONS

    def reply(self, messages, rng):
        page, actions = messages[-1]["content"].split("\n\nAvailable Actions:\n", 1)
        clickables = json.loads(actions)["clickables"]
        instruction = page.split(" [SEP] ")[2 if page.startswith("Observation:\nWebShop") else 1]
        words = set(re.findall(r"[a-z0-9]+", instruction.lower()))
        if json.loads(actions)["has_search_bar"]:
            return f"Thought:\nSearch for it.\n\nAction:\nsearch[{instruction}]"
        if "buy now" in clickables:
            chosen = " ".join(_said(messages, "assistant"))
            for option in clickables:
                if option in words and f"click[{option}]" not in chosen:
                    return f"Thought:\nPick the option.\n\nAction:\nclick[{option}]"
            return "Thought:\nBuy it.\n\nAction:\nclick[buy now]"
        rows = page.split(" [SEP] ")
        best = max((rows[i + 1] for i in range(len(rows) - 1) if rows[i].lower() in clickables
                    and rows[i].startswith("B0")),
                   key=lambda title: len(words & set(re.findall(r"[a-z0-9]+", title.lower()))))
        asin = rows[rows.index(best) - 1].lower()
        return f"Thought:\nThis one fits.\n\nAction:\nclick[{asin}]"

    def random_reply(self, messages, rng):
        return "Thought:\nNo idea."


HOUSE = HousePolicy()
SHOP = ShopPolicy()
