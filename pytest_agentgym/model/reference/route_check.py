"""The chat that proves a route (:data:`pytest_agentgym.model.endpoint_settings.PROOF_MESSAGES`,
sent by a run and by preflight before the first episode): answered with one word, so that an
attached reference agent, or a gateway in front of one, reads as a route that chats."""

from __future__ import annotations

import random
from typing import Sequence

from pytest_agentgym.model.endpoint_settings import PROOF_MESSAGES
from pytest_agentgym.model.reference.base import Message


class RouteCheck:
    name = "route check"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return list(messages) == list(PROOF_MESSAGES)

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        return "ready"

    random_reply = reply


POLICY = RouteCheck()
