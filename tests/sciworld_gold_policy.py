"""A scripted model for SciWorld tests: replays the simulator's own gold action
sequences through the reference agent server (not a SciWorld policy).

Loaded into the reference agent process with
``AGENTGYM_REFERENCE_POLICIES=sciworld_gold_policy:POLICY``; the gold sequences
come from the JSON file named by ``AGENTGYM_TEST_SCIWORLD_GOLD``:
``{"<task description>": ["action", ...], ...}`` (descriptions must be distinct).
The conversation's user message that contains a known description starts the
episode; the number of assistant replies after it is the position in the sequence.
Past the end it answers ``look around``.
"""

from __future__ import annotations

import json
import os

from pytest_agentgym.model.reference.base import react

GOLD_ENV = "AGENTGYM_TEST_SCIWORLD_GOLD"


class GoldReplay:
    name = "SciWorld (gold replay, tests only)"

    def __init__(self) -> None:
        self._gold: dict[str, list[str]] | None = None

    def gold(self) -> dict[str, list[str]]:
        if self._gold is None:
            self._gold = json.loads(open(os.environ[GOLD_ENV]).read())
        return self._gold

    def _episode(self, messages):
        for position, message in enumerate(messages):
            if message.get("role") != "user":
                continue
            for description, actions in self.gold().items():
                if description in message.get("content", ""):
                    return actions, messages[position + 1:]
        return None

    def recognizes(self, messages) -> bool:
        return GOLD_ENV in os.environ and self._episode(messages) is not None

    def reply(self, messages, rng) -> str:
        actions, after = self._episode(messages)
        done = sum(1 for message in after if message.get("role") == "assistant")
        action = actions[done] if done < len(actions) else "look around"
        return react(f"Gold step {done + 1} of {len(actions)}.", action)

    def random_reply(self, messages, rng) -> str:
        return react("Any action.", rng.choice(["look around", "inventory", "wait1"]))


POLICY = GoldReplay()
