"""The rollout answers the trainer-format tests map: batches posted to a real rollout
service (node local) whose model is the reference agent, both on loopback."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from helpers.rollout_services import post, reference_agent, rollout_server


@contextmanager
def answered(base: Path, bodies: Mapping[str, Mapping[str, Any]]) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Each body of ``bodies`` posted as one batch (``base_url`` set to the reference
    agent's); yields each batch's ``rollouts`` by name, then stops both processes."""
    agent = reference_agent(base)
    service = rollout_server(base / "service", "--node", "local", "--concurrency", "4", "--allow-base-url", agent.url)
    try:
        found = {}
        for name, body in bodies.items():
            answer = post(service, {**body, "base_url": agent.url})
            assert answer.status_code == 200, answer.text
            found[name] = answer.json()["rollouts"]
        yield found
    finally:
        service.stop()
        agent.stop()
