"""NATS publishing of run events, and the outbox it falls back to.

    publisher.py   EventPublisher (background thread, buffering, retries, outbox fallback)
    connection.py  NatsSender (one connection: JetStream or core NATS), NatsUnavailable
    outbox.py      Outbox (outbox.jsonl), publish_outbox / the publish-outbox command
    schemas/       JSON Schemas (draft 2020-12) of the event payloads, one per subject

The event payloads themselves are built in :mod:`pytest_agentgym.results.events`.
Nothing here imports nats-py until a connection is made.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from pytest_agentgym.publish.outbox import Outbox, OutboxDelivery, publish_outbox
from pytest_agentgym.publish.connection import NatsSender, NatsUnavailable
from pytest_agentgym.publish.publisher import EventPublisher, PublishStats

__all__ = ["EventPublisher", "NatsSender", "NatsUnavailable", "Outbox", "OutboxDelivery", "PublishStats",
           "publish_outbox", "load_schema"]


def load_schema(subject: str) -> dict[str, Any]:
    """The JSON Schema of a subject's payload, e.g. ``load_schema("agentgym.field.status.v1")``."""
    path = resources.files(__package__).joinpath("schemas", f"{subject}.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KeyError(f"no schema for subject {subject!r} in pytest_agentgym/publish/schemas/") from None
