"""The outbox and its later delivery, against real nats-server processes.

The run's publisher writes to the outbox because NATS is not there; a server
is started afterwards (on the port the run could not reach) and
``publish_outbox`` delivers. A core subscription shows what went over the
wire, so "sends nothing twice" is checked independently of JetStream's
duplicate window.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter

import pytest

from helpers.nats_server import NatsServer, Subscriber, free_port, read_stream, sample_run_events, stream_names
from pytest_agentgym.results.events import Event
from pytest_agentgym.publish import EventPublisher, Outbox, publish_outbox
from pytest_agentgym.publish.outbox import publish_outbox_cli


def fill_outbox(run_dir, url, events) -> None:
    """A run whose NATS URL is dead at start: every event lands in the outbox."""
    publisher = EventPublisher(url, run_dir / "outbox.jsonl")
    notes = publisher.start()
    assert "unreachable" in notes[0]
    for event in events:
        publisher.publish(event)
    assert publisher.close().outboxed == len(events)


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "reports" / "run-outbox"
    path.mkdir(parents=True)
    return path


def test_outbox_is_delivered_exactly_once_to_a_server_started_afterwards(run_dir, tmp_path):
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    events = sample_run_events("run-outbox")
    fill_outbox(run_dir, url, events)

    with NatsServer(tmp_path / "nats", jetstream=True, port=port) as server:
        first = publish_outbox(run_dir, server.url, create_stream=True)
        assert (first.total, first.delivered, first.failed, first.mode) == (23, 23, 0, "jetstream"), first
        assert first.ok

        async def second_call():
            async with Subscriber(server.url) as subscriber:
                result = await asyncio.to_thread(publish_outbox, run_dir, server.url)
                await subscriber.settle()
                return result, subscriber.received

        second, on_the_wire = asyncio.run(second_call())
        assert (second.delivered, second.already_delivered, second.failed) == (0, 23, 0), second
        assert on_the_wire == []  # nothing was sent, whatever the duplicate window

        stored = asyncio.run(read_stream(server.url))
    assert Counter(msg_id for _, msg_id, _ in stored) == Counter(e.msg_id for e in events)
    assert [payload for _, _, payload in stored] == [json.loads(e.data()) for e in events]


def test_an_event_the_stream_already_holds_is_acknowledged_as_duplicate_not_stored_again(run_dir, tmp_path):
    events = sample_run_events("run-half", episodes=4)
    with NatsServer(tmp_path / "nats", jetstream=True) as server:
        # The run delivered the first two; say the ack of the second was lost,
        # so the run also kept it in the outbox.
        publisher = EventPublisher(server.url, run_dir / "unused-outbox.jsonl", create_stream=True)
        publisher.start()
        for event in events[:2]:
            publisher.publish(event)
        assert publisher.close().delivered == 2
        outbox = Outbox.of_run(run_dir)
        for event in events[1:]:
            outbox.append(event)

        result = publish_outbox(run_dir, server.url)
        stored = asyncio.run(read_stream(server.url))
    assert (result.delivered, result.duplicates) == (len(events) - 1, 1)
    assert sorted(msg_id for _, msg_id, _ in stored) == sorted(e.msg_id for e in events)


def test_core_nats_delivery_sends_each_event_once_and_skips_repeated_lines(run_dir, tmp_path):
    events = sample_run_events("run-core-outbox", episodes=3)
    fill_outbox(run_dir, f"nats://127.0.0.1:{free_port()}", events)
    outbox = Outbox.of_run(run_dir)
    outbox.append(events[0])  # the same event kept twice
    with (run_dir / "outbox.jsonl").open("a") as handle:
        handle.write('{"subject": "agentgym.episode.completed.v1", "msg_id": "torn", "payl\n')

    with NatsServer(tmp_path / "nats", jetstream=False) as server:
        async def deliver_twice():
            async with Subscriber(server.url) as subscriber:
                first = await asyncio.to_thread(publish_outbox, run_dir, server.url)
                second = await asyncio.to_thread(publish_outbox, run_dir, server.url)
                return first, second, await subscriber.wait_for(len(events))

        first, second, received = asyncio.run(deliver_twice())
    assert [msg_id for _, msg_id, _ in received] == [e.msg_id for e in events]
    assert (first.mode, first.delivered, first.unreadable) == ("core", len(events), 1)
    assert any("outbox.jsonl:" in note and "unreadable" in note for note in first.notes)
    assert (second.delivered, second.already_delivered) == (0, len(events))
    assert {json.loads(line)["msg_id"] for line in outbox.delivered_path.read_text().splitlines()} == {
        e.msg_id for e in events}


def test_undeliverable_outbox_is_left_for_later(run_dir):
    events = sample_run_events("run-later", episodes=2)
    for event in events:
        Outbox.of_run(run_dir).append(event)
    result = publish_outbox(run_dir, f"nats://127.0.0.1:{free_port()}", connect_timeout=1.0)
    assert (result.delivered, result.failed, result.ok) == (0, len(events), False)
    assert "connection refused" in result.error
    assert not Outbox.of_run(run_dir).delivered_path.exists()
    assert [e.msg_id for e in Outbox.of_run(run_dir).read()[0]] == [e.msg_id for e in events]


def test_cli_exit_codes_and_what_it_prints(run_dir, tmp_path, capsys):
    assert publish_outbox_cli(tmp_path / "missing", url="nats://127.0.0.1:1") == 2
    assert "does not exist" in capsys.readouterr().err

    assert publish_outbox_cli(run_dir, url="nats://127.0.0.1:1") == 0
    assert "no outbox, nothing to deliver" in capsys.readouterr().out

    port = free_port()
    events = sample_run_events("run-cli", episodes=2)
    fill_outbox(run_dir, f"nats://127.0.0.1:{port}", events)
    assert publish_outbox_cli(run_dir, url=f"nats://127.0.0.1:{port}") == 1
    err = capsys.readouterr().err
    assert "connection refused" in err and "5 event(s) stay in" in err

    with NatsServer(tmp_path / "nats", jetstream=True, port=port) as server:
        asyncio.run(_add_stream(server.url))  # made by hand, as an operator would
        assert publish_outbox_cli(run_dir, url=server.url) == 0
        out = capsys.readouterr().out
        assert "5 event(s); 0 delivered earlier, 5 delivered now" in out and "jetstream" in out
        assert publish_outbox_cli(run_dir, url=server.url) == 0
        assert "5 delivered earlier, 0 delivered now" in capsys.readouterr().out
        assert len(asyncio.run(read_stream(server.url))) == 5


def test_cli_create_stream_makes_the_stream_the_events_are_stored_in(tmp_path):
    """Subprocess runs of ``pytest-agentgym publish-outbox``: on a JetStream server
    without a stream, events go out unstored; with --create-stream they are stored."""
    events = sample_run_events("run-create-stream", episodes=2)
    plain, creating = tmp_path / "plain", tmp_path / "creating"
    for run in (plain, creating):
        run.mkdir()
        for event in events:
            Outbox.of_run(run).append(event)

    def publish(run, url, *flags):
        return subprocess.run([sys.executable, "-m", "pytest_agentgym", "publish-outbox", str(run),
                               "--nats", url, *flags], capture_output=True, text=True, timeout=120)

    with NatsServer(tmp_path / "nats", jetstream=True) as server:
        without = publish(plain, server.url)
        assert without.returncode == 0, without.stderr
        assert "JetStream has no stream for" in without.stdout
        assert asyncio.run(stream_names(server.url)) == []

        created = publish(creating, server.url, "--create-stream")
        assert created.returncode == 0, created.stderr
        assert "created stream AGENTGYM on agentgym.>" in created.stdout
        assert f"{len(events)} delivered now to {server.url} via jetstream" in created.stdout
        assert asyncio.run(stream_names(server.url)) == ["AGENTGYM"]
        stored = asyncio.run(read_stream(server.url))
    assert [msg_id for _, msg_id, _ in stored] == [e.msg_id for e in events]
    assert [payload for _, _, payload in stored] == [json.loads(e.data()) for e in events]


async def _add_stream(url: str) -> None:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        await nc.jetstream().add_stream(name="AGENTGYM", subjects=["agentgym.>"])
    finally:
        await nc.close()


def test_outbox_of_run_accepts_the_file_itself(run_dir):
    event = sample_run_events("run-file", episodes=1)[0]
    Outbox.of_run(run_dir).append(event)
    direct = Outbox.of_run(run_dir / "outbox.jsonl")
    assert direct.path == run_dir / "outbox.jsonl"
    assert direct.delivered_path == run_dir / "outbox.delivered.jsonl"
    assert direct.read() == ([Event(event.subject, event.msg_id, json.loads(event.data()))], [])
