"""The embedded ALFWorld server against AgentGym's original ``agentenv-alfworld`` on
ALFWorld's own games (``../shared/alfworld``): three test games of three task types
(2435 cool, 2482 look, 2423 pick and place), each played from a fresh reset three
times: its walkthrough to the win and a step after it, random admissible actions, and
actions no game admits; ``/observation``, ``/available_actions`` and ``/detail`` after
each. The original's answers were recorded by benchmarks/servers/alfworld_wire.py
(``--record``, both servers fresh) into tests/data/alfworld_original_real_games.json;
here each request is sent to ours, a real process on the same data, and the answers
are compared as JSON text. Skipped with the reason where the games are absent."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers import DATA
from helpers.alfworld_support import REAL_DATA, needs_engine, needs_real_data, start_server

pytestmark = [needs_engine, needs_real_data, pytest.mark.heavy]

RECORDED = json.loads((DATA / "alfworld_original_real_games.json").read_text())["exchanges"]


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Every recorded request, answered by a fresh embedded server (env ids from 0)."""
    server = start_server(tmp_path_factory.mktemp("alfworld-wire"), env={"ALFWORLD_DATA": str(REAL_DATA)})
    answers = []
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for exchange in RECORDED:
                response = client.request(exchange["method"], exchange["path"], json=exchange.get("json"),
                                          params=exchange.get("params"))
                answers.append((response.status_code, response.json()))
    finally:
        server.stop()
    return answers


def as_text(status: int, body: object) -> str:
    """An answer as compared: JSON text, so that ``0`` and ``0.0`` differ."""
    return json.dumps([status, body])


def test_every_answer_equals_the_original_servers(ours):
    assert len(ours) == len(RECORDED)
    different = [(exchange["kind"], exchange["path"], exchange.get("json") or exchange.get("params"),
                  exchange["answer"], mine[1])
                 for exchange, mine in zip(RECORDED, ours)
                 if as_text(exchange["status"], exchange["answer"]) != as_text(*mine)]
    assert different == []


def test_the_recording_covers_wins_invalid_actions_and_the_done_guard():
    """What the recorded original did, so that the comparison above covers it."""
    steps = [e for e in RECORDED if e["path"] == "/step"]
    wins = [e for e in steps if e["kind"] == "walkthrough" and e["answer"]["reward"] == 1.0 and e["answer"]["done"]]
    assert len(wins) == 3
    invalid = {e["json"]["action"]: e["answer"]["observation"] for e in steps if e["kind"] == "invalid"}
    blanks = invalid.pop("  look  ")  # the engine strips blanks around an action; case it keeps
    assert blanks.startswith("You are in the middle of a room.") and invalid["LOOK"] == "Nothing happens."
    assert len(invalid) == 5 and set(invalid.values()) == {"Nothing happens."}
    after = [e for e in steps if e["kind"] == "after done"]
    assert after and all(e["answer"] == {"error": f"The task with environment {e['json']['id']} has finished."}
                         for e in after)
    assert len([e for e in steps if e["kind"] == "random"]) >= 12
