"""The coordinator against a real nats-server, with this test playing the worker
by hand: results that arrive twice, a resumed coordinator that collects stored
results and adopts queued items, a malformed result."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from helpers.nats_server import NatsServer
from helpers.waiting import wait_until
from pytest_agentgym.envs.spec import DEFAULT_ENVS_FILE, load_specs
from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.coordinator import QueueCoordinator
from pytest_agentgym.queue.wire import MSG_ID_HEADER, Result, WorkItem, decode, encode
from pytest_agentgym.results.records import EpisodeRecord

SPEC = load_specs(DEFAULT_ENVS_FILE)["Maze"]


@pytest.fixture
def address(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    yield QueueAddress.parse(f"{server.url}?name=unit&ack_wait=30")
    server.stop()


def request(task: int, run_id: str = "run1") -> EpisodeRequest:
    return EpisodeRequest(run_id=run_id, spec=SPEC, task_index=task, repeat=1,
                          limits=EpisodeLimits(max_rounds=15, timeout_s=60.0), nodeid=f"suites/maze.yaml::Maze[{task}]")


def record(item: WorkItem, reward: float = 1.0) -> EpisodeRecord:
    return EpisodeRecord(run_id=item.run_id, env=item.env, task_index=item.task_index, repeat=item.repeat,
                         reward=reward, success=reward > 0, rounds=3, stop_reason="done",
                         started_at="2025-01-01T00:00:00+00:00", duration_s=1.0, model="reference",
                         outcome="passed", generation=item.generation)


class HandWorker:
    """Takes work items from the queue and publishes results, as `pytest-agentgym worker` would."""

    def __init__(self, address: QueueAddress) -> None:
        self.address = address

    async def _take(self, count: int) -> list[WorkItem]:
        import nats

        nc = await nats.connect(self.address.server)
        try:
            js = nc.jetstream()
            sub = await js.pull_subscribe_bind(self.address.workers_consumer, self.address.work_stream)
            items = []
            for msg in await sub.fetch(count, timeout=5):
                items.append(WorkItem.from_payload(decode(msg.data, msg.headers)))
                await msg.ack_sync()
            return items
        finally:
            await nc.close()

    async def _publish(self, item: WorkItem, delivery: int, worker: str, reward: float) -> bool:
        import nats

        nc = await nats.connect(self.address.server)
        try:
            result = Result(record(item, reward), worker, delivery, item.generation)
            data, headers = encode(result.to_payload())
            ack = await nc.jetstream().publish(
                self.address.result_subject(item.run_id, item.env, item.task_index, item.repeat), data,
                headers={**headers, MSG_ID_HEADER: result.msg_id()})
            return bool(ack.duplicate)
        finally:
            await nc.close()

    async def _garbage(self, item: WorkItem) -> None:
        import nats

        nc = await nats.connect(self.address.server)
        try:
            await nc.jetstream().publish(
                self.address.result_subject(item.run_id, item.env, item.task_index, item.repeat), b"{oops")
        finally:
            await nc.close()

    def take(self, count: int) -> list[WorkItem]:
        return asyncio.run(self._take(count))

    def publish(self, item: WorkItem, *, delivery: int = 1, worker: str = "hand", reward: float = 1.0) -> bool:
        return asyncio.run(self._publish(item, delivery, worker, reward))

    def garbage(self, item: WorkItem) -> None:
        asyncio.run(self._garbage(item))


def coordinator(address: QueueAddress, written: list, *, generation: int = 1, scored=()) -> QueueCoordinator:
    coord = QueueCoordinator(address, run_id="run1", generation=generation)
    coord.connect()
    coord.start(lambda r: written.append(r) or r, scored_keys=set(scored))
    return coord


def test_a_result_that_arrives_twice_is_recorded_once(address):
    written: list[EpisodeRecord] = []
    coord = coordinator(address, written)
    worker = HandWorker(address)
    try:
        future = coord.submit("suites/maze.yaml::Maze[3]", request(3))
        (item,) = worker.take(1)
        assert item.msg_id == "run1:Maze:3:r1:g1" and item.max_rounds == 15
        assert worker.publish(item, delivery=1, worker="w1") is False
        assert worker.publish(item, delivery=1, worker="w1") is True  # the same msg id: JetStream keeps one
        worker.garbage(item)  # a malformed result is dropped, not fatal
        worker.publish(item, delivery=2, worker="w2", reward=0.0)  # a redelivered item played again
        assert future.result(timeout=10).worker == "w1"
        wait_until(lambda: coord.stats["results"] >= 2, 10, "both results are read")
        assert coord.stats["results"] == 2 and coord.stats["duplicates"] == 1
        assert [(r.task_index, r.reward, r.worker) for r in written] == [(3, 1.0, "w1")]
        assert coord.submit("again", request(3)) is future  # submitted once, published once
        assert coord.stats["published"] == 1
    finally:
        coord.close()


def test_a_resumed_coordinator_collects_stored_results_and_adopts_queued_items(address):
    first: list[EpisodeRecord] = []
    coord = coordinator(address, first)
    for task in (0, 1, 2):
        coord.submit(f"Maze[{task}]", request(task))
    coord.close()  # the coordinator dies; its three items wait in the work stream
    worker = HandWorker(address)
    played = {item.task_index: item for item in worker.take(1)}
    worker.publish(played[0])  # stored while no coordinator listens

    second: list[EpisodeRecord] = []
    resumed = coordinator(address, second, generation=2)
    try:
        futures = {task: resumed.submit(f"Maze[{task}]", request(task)) for task in (0, 1, 2)}
        collected = futures[0].result(timeout=10)
        assert (collected.task_index, collected.generation) == (0, 1)
        assert resumed.stats["collected"] == 1 and resumed.stats["adopted"] == 2
        assert resumed.stats["published"] == 0  # the queued items were not published again
        rest = worker.take(2)
        assert sorted((i.task_index, i.generation) for i in rest) == [(1, 1), (2, 1)]
        for item in rest:
            worker.publish(item)
        assert sorted(f.result(timeout=10).task_index for f in futures.values()) == [0, 1, 2]
        assert sorted(r.task_index for r in second) == [0, 1, 2] and first == []
    finally:
        resumed.close()


def test_a_resumed_coordinator_does_not_take_a_stored_result_the_run_has_scored(address):
    coord = coordinator(address, [])
    coord.submit("Maze[5]", request(5))
    coord.close()
    worker = HandWorker(address)
    (item,) = worker.take(1)
    worker.publish(item)
    written: list[EpisodeRecord] = []
    resumed = coordinator(address, written, generation=2, scored={("Maze", 5, 1)})
    try:
        future = resumed.submit("Maze[5]", dataclasses.replace(request(5)))
        assert resumed.stats["published"] == 1 and resumed.stats["collected"] == 0
        (again,) = worker.take(1)
        assert again.generation == 2
    finally:
        resumed.close()
    assert future.cancelled() and written == []
