"""The event publisher and publish-outbox sign in as the queue's doors do
(transport/nats_options.py), against a real nats-server that requires a token.

A wrong token is said in the run's notes and the events wait in the outbox; the
right one gets them stored, and publish-outbox delivers the waiting ones with it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from helpers.nats_server import NatsServer, read_stream, sample_run_events
from helpers.queue_fleet import env_with_repo
from pytest_agentgym.publish import EventPublisher

TOKEN = "t0ken-for-the-events"


@pytest.fixture
def token_server(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTGYM_NATS_TOKEN", TOKEN)
    server = NatsServer(tmp_path / "nats", jetstream=True, config="authorization { token: $AGENTGYM_NATS_TOKEN }\n",
                        env={"AGENTGYM_NATS_TOKEN": TOKEN})
    yield server
    server.stop()


def stored(server: NatsServer) -> list:
    return asyncio.run(read_stream(server.url, connect={"token": TOKEN}))


def publish_all(url: str, outbox, events) -> tuple[list[str], object]:
    publisher = EventPublisher(url, outbox, create_stream=True, connect_timeout=2.0)
    notes = publisher.start()
    for event in events:
        publisher.publish(event)
    return notes, publisher.close(5.0)


def test_the_publisher_signs_in_with_a_token_from_a_variable_and_its_events_are_stored(token_server, tmp_path):
    events = sample_run_events("run-token", episodes=4)
    notes, stats = publish_all(f"{token_server.url}?token_env=AGENTGYM_NATS_TOKEN", tmp_path / "outbox.jsonl",
                               events)
    assert (stats.mode, stats.delivered, stats.outboxed) == ("jetstream", len(events), 0), notes
    assert [msg_id for _, msg_id, _ in stored(token_server)] == [e.msg_id for e in events]
    assert not any(TOKEN in note for note in notes)


def test_a_refused_token_is_said_and_the_events_wait_for_publish_outbox(token_server, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events = sample_run_events("run-refused", episodes=4)
    monkeypatch.setenv("WRONG_TOKEN", "guessed")
    notes, stats = publish_all(f"{token_server.url}?token_env=WRONG_TOKEN", run_dir / "outbox.jsonl", events)
    assert stats.outboxed == len(events) and stats.delivered == 0, notes
    said = " ".join(notes)
    assert f"NATS at {token_server.url}?token_env=WRONG_TOKEN unreachable (refused the sign-in (token from " \
           f"$WRONG_TOKEN; Error: nats: 'Authorization Violation')" in said, notes
    assert "guessed" not in said
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "publish-outbox", str(run_dir), "--nats",
                           f"{token_server.url}?token_env=AGENTGYM_NATS_TOKEN", "--create-stream"],
                          capture_output=True, text=True, env=env_with_repo(), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [msg_id for _, msg_id, _ in stored(token_server)] == [e.msg_id for e in events]
