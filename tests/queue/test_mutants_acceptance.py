"""Mutation-pass test for the coordinator's roll (benchmarks/gates/mutations_acceptance.py):
every queue's workers beat on one heartbeat subject, so a worker heard is one whose heartbeat
names this queue; a worker of another queue on the same nats-server, whatever its name, is no
worker of this run (its results would count, queue/acceptance.py). A real nats-server."""

from __future__ import annotations

import pytest

import pytest_agentgym
from helpers.nats_server import NatsServer
from helpers.queue_forger import QueueClient
from helpers.waiting import wait_until
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.coordinator import QueueCoordinator
from pytest_agentgym.queue.wire import Heartbeat

pytestmark = pytest.mark.faults


def test_a_heartbeat_of_another_queue_makes_no_worker_of_this_one(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    address = QueueAddress.parse(f"{server.url}?name=acc")
    coord = QueueCoordinator(address, run_id="r1", model="reference", endpoint_kind="reference")
    client = None
    try:
        coord.connect()
        coord.start(lambda record: record)
        client = QueueClient(address.server, address)
        for worker, queue in (("w1", "another-queue"), ("w2", "acc")):  # one connection: in this order
            client.beat(Heartbeat(worker=worker, queue=queue, profile="node", model="reference", capacity=1,
                                  load=0, version=pytest_agentgym.__version__, endpoint_kind="reference"))
        wait_until(lambda: "w2" in coord.workers, 10, "this queue's worker heard")
        assert set(coord.workers) == {"w2"}, coord.workers
    finally:
        if client is not None:
            client.close()
        coord.close()
        server.stop()
