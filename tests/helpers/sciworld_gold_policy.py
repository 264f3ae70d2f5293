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
    """Replays ``{"<text that starts an episode>": [actions]}`` from the JSON file named
    by the variable ``gold_env``; ``idle`` past the end (ALFWorld's gold replay reuses it)."""

    def __init__(self, name: str = "SciWorld (gold replay, tests only)", gold_env: str = GOLD_ENV,
                 idle: str = "look around",
                 random_actions: tuple[str, ...] = ("look around", "inventory", "wait1")) -> None:
        self.name = name
        self.gold_env = gold_env
        self.idle = idle
        self.random_actions = random_actions
        self._gold: dict[str, list[str]] | None = None

    def gold(self) -> dict[str, list[str]]:
        if self._gold is None:
            self._gold = json.loads(open(os.environ[self.gold_env]).read())
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
        return self.gold_env in os.environ and self._episode(messages) is not None

    def reply(self, messages, rng) -> str:
        actions, after = self._episode(messages)
        done = sum(1 for message in after if message.get("role") == "assistant")
        action = actions[done] if done < len(actions) else self.idle
        return react(f"Gold step {done + 1} of {len(actions)}.", action)

    def random_reply(self, messages, rng) -> str:
        return react("Any action.", rng.choice(self.random_actions))


POLICY = GoldReplay()
