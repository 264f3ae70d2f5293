"""What the work queue decides that issue 39's mutation pass found no test for
(benchmarks/gates/mutations.py): a message of another wire version or of none is refused;
a work item published again after a dropped result is a message of its own, and its
earlier result does not count as played; the workers' consumer takes AckWait and
MaxDeliver from the queue URL; a coordinator's consumer reads its own run's results,
all of them, from the first, also when it is made again. Against a real nats-server
with JetStream on a free loopback port."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.streams import (ensure_streams, ensure_workers_consumer, fresh_coordinator_consumer,
                                           last_on_subject)
from pytest_agentgym.queue.wire import (MSG_ID_HEADER, WIRE_VERSION, Result, WireVersionError, WorkItem, decode,
                                        encode, stamp)

from helpers.nats_server import NatsServer
from helpers.report_fixtures import make_episode

ITEM = WorkItem(run_id="run-a", env="Maze", task_index=3, repeat=0, generation=1, max_rounds=10, timeout_s=30.0,
                retries=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with NatsServer(tmp_path_factory.mktemp("nats"), jetstream=True) as running:
        yield running


def _address(server: NatsServer, name: str) -> QueueAddress:
    return QueueAddress.parse(f"{server.url}?name={name}&ack_wait=7&max_deliver=3")


async def _jetstream(server: NatsServer):
    import nats

    nc = await nats.connect(server.url, connect_timeout=5, max_reconnect_attempts=0)
    return nc, nc.jetstream()


def _result(run_id: str, task: int, *, reissue: int = 0) -> Result:
    return Result(record=make_episode("Maze", task, run_id=run_id), worker="w1", delivery=1, generation=1,
                  reissue=reissue)


async def _publish(js, address: QueueAddress, result: Result) -> None:
    data, headers = encode(result.to_payload())
    r = result.record
    await js.publish(address.result_subject(r.run_id, r.env, r.task_index, r.repeat), data,
                     headers={**headers, MSG_ID_HEADER: result.msg_id()})


@pytest.mark.parametrize("version", [1, WIRE_VERSION + 1])
def test_a_message_of_another_wire_version_is_refused(version):
    with pytest.raises(WireVersionError, match=f"wire version {version}"):
        WorkItem.from_payload({**ITEM.to_payload(), "v": version})
    with pytest.raises(WireVersionError, match=f"wire version {version}"):
        Result.from_payload({**_result("run-a", 0).to_payload(), "v": version})


def test_a_work_item_without_a_wire_version_is_refused_after_its_fields():
    payload = {k: v for k, v in ITEM.to_payload().items() if k != "v"}
    with pytest.raises(WireVersionError, match="no wire version"):
        WorkItem.from_payload(payload)


def test_a_reissued_work_item_is_stored_again_beside_the_first(server):
    address = _address(server, "mutreissue")
    again = dataclasses.replace(ITEM, reissue=1)
    assert again.msg_id == ITEM.msg_id + ":i1"

    async def publish_both() -> int:
        nc, js = await _jetstream(server)
        try:
            await ensure_streams(js, address)
            subject = address.work_subject(ITEM.run_id, ITEM.env, ITEM.task_index, ITEM.repeat)
            for item in (ITEM, ITEM, again):  # the first twice: a retried publish is stored once
                data, headers = encode(item.to_payload())
                await js.publish(subject, data, headers={**headers, MSG_ID_HEADER: item.msg_id})
            return (await js.stream_info(address.work_stream)).state.messages
        finally:
            await nc.close()

    assert asyncio.run(publish_both()) == 2


def test_the_stamp_of_a_stored_result_names_its_reissue(server):
    address = _address(server, "mutstamp")

    async def stored_stamps() -> list:
        nc, js = await _jetstream(server)
        try:
            await ensure_streams(js, address)
            stamps = []
            for reissue in (0, 2):
                await _publish(js, address, _result("run-a", 5, reissue=reissue))
                stored = await last_on_subject(js, address.results_stream, address.result_subject("run-a", "Maze", 5, 0))
                stamps.append(stamp(stored))
            return stamps
        finally:
            await nc.close()

    assert asyncio.run(stored_stamps()) == [(1, 0), (1, 2)]


def test_the_workers_consumer_takes_ack_wait_and_max_deliver_from_the_url(server):
    address = _address(server, "mutworkers")

    async def configs():
        from nats.js.api import RetentionPolicy

        nc, js = await _jetstream(server)
        try:
            await ensure_streams(js, address)
            await ensure_workers_consumer(js, address)
            consumer = await js.consumer_info(address.work_stream, address.workers_consumer)
            stream = await js.stream_info(address.work_stream)
            return consumer.config, stream.config.retention == RetentionPolicy.WORK_QUEUE
        finally:
            await nc.close()

    config, work_queue = asyncio.run(configs())
    assert (config.ack_wait, config.max_deliver) == (7.0, 3)
    assert work_queue  # an acked item leaves the stream: nothing is played twice by a later worker


def test_a_coordinators_consumer_reads_its_runs_results_from_the_first_each_time_it_is_made(server):
    address = _address(server, "mutcoord")

    async def deliveries() -> tuple[list, list]:
        nc, js = await _jetstream(server)
        try:
            await ensure_streams(js, address)
            for run_id, task in (("run-a", 0), ("run-b", 0), ("run-a", 1)):  # before the consumer exists
                await _publish(js, address, _result(run_id, task))
            rounds = []
            for _ in range(2):  # a coordinator resumed: its consumer made again
                name = await fresh_coordinator_consumer(js, address, "run-a")
                sub = await js.pull_subscribe_bind(name, stream=address.results_stream)
                got = []
                for msg in await sub.fetch(10, timeout=2):
                    result = Result.from_payload(decode(msg.data, msg.headers))
                    got.append((result.record.run_id, result.record.task_index))
                    await msg.ack()
                rounds.append(sorted(got))
                await sub.unsubscribe()
            return rounds[0], rounds[1]
        finally:
            await nc.close()

    first, again = asyncio.run(deliveries())
    assert first == again == [("run-a", 0), ("run-a", 1)]
