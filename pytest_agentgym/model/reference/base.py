"""What a reference policy for one environment provides.

A policy is stateless: every decision is derived from the conversation text
alone (the messages of one chat completion request), so the same conversation
always gets the same reply for the same seed. This keeps runs reproducible and
lets any number of episodes share one agent server.
"""

from __future__ import annotations

import random
from typing import Protocol, Sequence

Message = dict[str, str]


class Policy(Protocol):
    #: environment name, as in configs/envs.yaml ("BabyAI", ...)
    name: str

    def recognizes(self, messages: Sequence[Message]) -> bool:
        """True when this conversation is an episode of this policy's environment.

        Decide from the environment's own observation text (what the server
        sends), not from the instruction prompt, which users may replace.
        """

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        """The next assistant message, in AgentGym's 'Thought: ...\\n\\nAction: ...' form."""

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        """A reply with a uniformly random legal-looking action (the 'random' policy)."""


def react(thought: str, action: str) -> str:
    """Format a reply the way AgentGym prompts ask for it."""
    return f"Thought:\n{thought}\n\nAction:\n{action}"
