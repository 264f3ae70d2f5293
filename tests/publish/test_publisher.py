"""EventPublisher against a real nats-server on a free loopback port.

Each test starts its own server (never the shared one on 4222), since several
stop or restart it. What reached NATS is observed with nats-py in the test:
a core subscription, or a JetStream consumer reading the stream.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter

import jsonschema
import pytest

from helpers.nats_server import NatsServer, Subscriber, free_port, read_stream, sample_run_events, stream_names
from helpers.waiting import wait_until
from pytest_agentgym.results.events import Event
from pytest_agentgym.publish import EventPublisher, load_schema


@pytest.fixture
def core_server(tmp_path):
    with NatsServer(tmp_path / "nats", jetstream=False) as server:
        yield server


@pytest.fixture
def js_server(tmp_path):
    with NatsServer(tmp_path / "nats", jetstream=True) as server:
        yield server


def outbox_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_publisher(publisher: EventPublisher, events: list[Event], close_timeout: float = 5.0):
    notes = publisher.start()
    for event in events:
        publisher.publish(event)
    return notes, publisher.close(close_timeout)


def test_subscriber_receives_exactly_the_published_events_on_core_nats(core_server, tmp_path):
    events = sample_run_events("run-core")
    publisher = EventPublisher(core_server.url, tmp_path / "outbox.jsonl")

    async def scenario():
        async with Subscriber(core_server.url) as subscriber:
            notes, stats = await asyncio.to_thread(run_publisher, publisher, events)
            return notes, stats, await subscriber.wait_for(len(events))

    notes, stats, received = asyncio.run(scenario())
    assert received == [(e.subject, e.msg_id, json.loads(e.data())) for e in events]
    assert (stats.mode, stats.published, stats.delivered, stats.outboxed) == ("core", 23, 23, 0)
    assert any("no JetStream" in note for note in notes), notes
    assert not (tmp_path / "outbox.jsonl").exists()
    for subject, _, payload in received:
        jsonschema.validate(payload, load_schema(subject), cls=jsonschema.Draft202012Validator)


def test_jetstream_keeps_each_event_once_across_a_server_restart(js_server, tmp_path):
    events = sample_run_events("run-restart")
    first, second = events[:8], events[8:]
    publisher = EventPublisher(js_server.url, tmp_path / "outbox.jsonl", create_stream=True)
    notes = publisher.start()
    assert any("created stream AGENTGYM" in note for note in notes), notes
    for event in first:
        publisher.publish(event)
    wait_until(lambda: publisher.stats().delivered == len(first), 10, lambda: f"the first delivered: {publisher.stats()}")

    js_server.stop()
    for event in second:
        publisher.publish(event)  # buffered: nobody to deliver them to
    wait_until(lambda: publisher.stats().failed_attempts > 0, 10, lambda: f"a failed attempt: {publisher.stats()}")
    assert publisher.stats().buffered == len(second)

    js_server.start()  # same port, same store dir
    stats = publisher.close(timeout=15.0)
    assert (stats.delivered, stats.outboxed, stats.buffered) == (len(events), 0, 0), stats
    assert stats.reconnects >= 1
    assert not (tmp_path / "outbox.jsonl").exists()

    stored = asyncio.run(read_stream(js_server.url))
    assert Counter(msg_id for _, msg_id, _ in stored) == Counter(e.msg_id for e in events)
    assert [payload for _, _, payload in stored] == [json.loads(e.data()) for e in events]


def test_the_same_msg_id_published_again_is_stored_once(js_server, tmp_path):
    events = sample_run_events("run-dup", episodes=2)
    repeated = events + [events[1], events[1], events[-1]]
    publisher = EventPublisher(js_server.url, tmp_path / "outbox.jsonl", create_stream=True)
    _, stats = run_publisher(publisher, repeated)
    assert (stats.delivered, stats.duplicates) == (len(repeated), 3)
    stored = asyncio.run(read_stream(js_server.url))
    assert sorted(msg_id for _, msg_id, _ in stored) == sorted(e.msg_id for e in events)
    config = asyncio.run(stream_config(js_server.url, "AGENTGYM"))
    assert (config.subjects, config.duplicate_window) == (["agentgym.>"], 3600.0)


async def stream_config(url: str, stream: str):
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        return (await nc.jetstream().stream_info(stream)).config
    finally:
        await nc.close()


def test_jetstream_without_a_stream_falls_back_to_core_and_says_so(js_server, tmp_path):
    events = sample_run_events("run-nostream", episodes=3)
    publisher = EventPublisher(js_server.url, tmp_path / "outbox.jsonl")  # create_stream=False

    async def scenario():
        async with Subscriber(js_server.url) as subscriber:
            notes, stats = await asyncio.to_thread(run_publisher, publisher, events)
            return notes, stats, await subscriber.wait_for(len(events))

    notes, stats, received = asyncio.run(scenario())
    assert any("JetStream has no stream for agentgym.episode.completed.v1" in n for n in notes), notes
    assert [msg_id for _, msg_id, _ in received] == [e.msg_id for e in events]
    assert (stats.mode, stats.delivered) == ("core", len(events))
    assert asyncio.run(stream_names(js_server.url)) == []


def test_jetstream_required_but_absent_sends_events_to_the_outbox(core_server, tmp_path):
    publisher = EventPublisher(core_server.url, tmp_path / "outbox.jsonl", jetstream=True)
    notes, stats = run_publisher(publisher, sample_run_events("run-req", episodes=1))
    assert "JetStream is required" in notes[0]
    assert (stats.mode, stats.outboxed, stats.delivered) == ("outbox", 4, 0)


def test_jetstream_seen_at_start_is_not_silently_downgraded_to_core_after_a_restart(js_server, tmp_path):
    events = sample_run_events("run-sticky", episodes=2)
    outbox = tmp_path / "outbox.jsonl"
    publisher = EventPublisher(js_server.url, outbox, create_stream=True)
    publisher.start()
    publisher.publish(events[0])
    wait_until(lambda: publisher.stats().delivered == 1, 10, lambda: f"one delivered: {publisher.stats()}")
    js_server.stop()
    js_server.jetstream = False
    js_server.start()  # back on the same port, but without JetStream

    async def scenario():
        async with Subscriber(js_server.url) as subscriber:
            for event in events[1:]:
                publisher.publish(event)
            stats = await asyncio.to_thread(publisher.close, 1.0)
            await subscriber.settle()
            return stats, subscriber.received

    stats, on_the_wire = asyncio.run(scenario())
    assert on_the_wire == []  # not sent unstored on core NATS
    assert (stats.delivered, stats.outboxed) == (1, len(events) - 1), stats
    assert "JetStream was there before" in stats.last_error
    assert [line["msg_id"] for line in outbox_lines(outbox)] == [e.msg_id for e in events[1:]]


def test_server_gone_for_good_mid_run_leaves_the_rest_in_the_outbox(core_server, tmp_path):
    events = sample_run_events("run-gone", episodes=6)
    delivered, stranded = events[:3], events[3:]
    outbox = tmp_path / "outbox.jsonl"
    publisher = EventPublisher(core_server.url, outbox)
    publisher.start()
    for event in delivered:
        publisher.publish(event)
    wait_until(lambda: publisher.stats().delivered == 3, 10, lambda: f"three delivered: {publisher.stats()}")
    core_server.stop()
    for event in stranded:
        publisher.publish(event)
    stats = publisher.close(timeout=0.5)
    assert (stats.delivered, stats.outboxed, stats.buffered) == (3, len(stranded), 0), stats
    assert [line["msg_id"] for line in outbox_lines(outbox)] == [e.msg_id for e in stranded]
    assert all(set(line) == {"subject", "msg_id", "payload"} for line in outbox_lines(outbox))


def test_dead_url_connect_is_bounded_and_every_event_goes_to_the_outbox(tmp_path):
    url = f"nats://127.0.0.1:{free_port()}"  # nobody listens there
    outbox = tmp_path / "outbox.jsonl"
    events = sample_run_events("run-dead")
    publisher = EventPublisher(url, outbox, connect_timeout=1.0)
    began = time.monotonic()
    notes = publisher.start()
    connect_s = time.monotonic() - began
    assert connect_s < 3.0, f"start() against a dead URL took {connect_s:.2f} s"
    assert len(notes) == 1 and "unreachable (connection refused)" in notes[0] and str(outbox) in notes[0]
    for event in events:
        publisher.publish(event)
    stats = publisher.close()
    assert (stats.mode, stats.published, stats.outboxed, stats.delivered) == ("outbox", 23, 23, 0)
    assert [Event.from_dict(line) for line in outbox_lines(outbox)] == [
        Event(e.subject, e.msg_id, json.loads(e.data())) for e in events]


def test_a_server_that_accepts_but_never_answers_costs_about_the_connect_timeout(tmp_path):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # handshakes complete in the kernel; no NATS INFO ever comes
        publisher = EventPublisher(f"nats://127.0.0.1:{silent.getsockname()[1]}",
                                   tmp_path / "outbox.jsonl", connect_timeout=1.0)
        began = time.monotonic()
        notes = publisher.start()
        connect_s = time.monotonic() - began
    assert connect_s < 3.0, f"start() against a silent server took {connect_s:.2f} s"
    assert "unreachable (no answer within 1 s)" in notes[0]
    publisher.publish(sample_run_events("run-silent", episodes=1)[0])
    assert publisher.close().outboxed == 1


def test_publish_never_raises_even_when_the_outbox_cannot_be_written(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the run directory should be")
    publisher = EventPublisher(f"nats://127.0.0.1:{free_port()}", blocker / "outbox.jsonl")
    publisher.start()
    publisher.publish(sample_run_events("run-lost", episodes=1)[0])
    stats = publisher.close()
    publisher.publish(sample_run_events("run-lost", episodes=1)[1])  # after close: still no exception
    assert (publisher.stats().published, publisher.stats().lost, stats.outboxed) == (2, 2, 0)
    assert publisher.stats().last_error is not None


def test_events_published_after_close_go_to_the_outbox(core_server, tmp_path):
    outbox = tmp_path / "outbox.jsonl"
    publisher = EventPublisher(core_server.url, outbox)
    events = sample_run_events("run-late", episodes=1)
    notes, stats = run_publisher(publisher, events[:2])
    assert stats.delivered == 2
    publisher.publish(events[2])
    assert [line["msg_id"] for line in outbox_lines(outbox)] == [events[2].msg_id]
