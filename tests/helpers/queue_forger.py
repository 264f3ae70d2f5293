"""A NATS client that is not one of a run's workers, for the tests of what a queue run
counts: it beats, answers roll calls, publishes results by hand, or, as a forger,
answers every work item it overhears with results of its own making.

    client = QueueClient(url, address)            # connected, on its own thread and loop
    client.beat(heartbeat)                        # one heartbeat on agentgym.field.status.v1
    client.answer_pings(heartbeat)                # a heartbeat whenever the roll is called
    client.publish(result, subject=...)           # a result on a results subject (JetStream)
    forger = Forger(url, address, forge)          # forge(item) -> [(subject, Result), ...]
    forger.published                              # what it published, in order
    client.close()

A plain nats-py client on a core subscription to the work subjects: it reads every work
item as it is published, without taking it from the workers' consumer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Callable

from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.wire import HEARTBEAT_SUBJECT, MSG_ID_HEADER, Heartbeat, Result, WorkItem, decode, encode


class QueueClient:
    def __init__(self, url: str, address: QueueAddress) -> None:
        self.address = address
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="queue-client", daemon=True)
        self._thread.start()
        self._nc: Any = self.call(self._connect(url))

    async def _connect(self, url: str) -> Any:
        import nats

        return await nats.connect(url, name="a client that is no worker")

    def call(self, coro: Any, timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def beat(self, beat: Heartbeat) -> None:
        async def send() -> None:
            await self._nc.publish(HEARTBEAT_SUBJECT, json.dumps(beat.to_payload()).encode())
            await self._nc.flush()

        self.call(send())

    def answer_pings(self, beat: Heartbeat) -> None:
        """Beat as ``beat`` whenever the coordinator calls the roll (as a worker does)."""
        async def answer(msg: Any) -> None:
            await self._nc.publish(HEARTBEAT_SUBJECT, json.dumps(beat.to_payload()).encode())

        async def subscribe() -> None:
            await self._nc.subscribe(self.address.ping_subject, cb=answer)
            await self._nc.flush()

        self.call(subscribe())

    async def _publish(self, result: Result, subject: str, msg_id: str | None) -> None:
        data, headers = encode(result.to_payload())
        if msg_id is not None:
            headers[MSG_ID_HEADER] = msg_id
        await self._nc.jetstream().publish(subject, data, headers=headers or None)

    def publish(self, result: Result, *, subject: str | None = None, msg_id: str | None = None) -> None:
        """``result`` on ``subject`` (default: the results subject of its record's episode),
        stored by the results stream; no msg id unless given (nothing to deduplicate it by)."""
        r = result.record
        self.call(self._publish(result, subject or self.address.result_subject(r.run_id, r.env, r.task_index,
                                                                                  r.repeat), msg_id))

    def close(self) -> None:
        if self._loop.is_running():
            try:
                self.call(self._nc.close(), 5.0)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(5.0)


class Forger(QueueClient):
    """Reads every work item of the queue as it is published and publishes what
    ``forge(item)`` makes of it: ``(subject, result)`` pairs, in order, or
    ``(subject, result, msg_id)`` to store it under that msg id (a squatter takes the id
    an honest worker's result will carry)."""

    def __init__(self, url: str, address: QueueAddress,
                 forge: Callable[[WorkItem], list[tuple[Any, ...]]]) -> None:
        super().__init__(url, address)
        self.forge = forge
        self.items: list[WorkItem] = []
        self.published: list[tuple[str, Result]] = []
        self.problems: list[str] = []
        self.call(self._listen())

    async def _listen(self) -> None:
        await self._nc.subscribe(self.address.work_subjects, cb=self._item)
        await self._nc.flush()

    async def _item(self, msg: Any) -> None:
        try:
            item = WorkItem.from_payload(decode(msg.data, msg.headers))
            self.items.append(item)
            for subject, result, *msg_id in self.forge(item):
                await self._publish(result, subject, msg_id[0] if msg_id else None)
                self.published.append((subject, result))
        except Exception as exc:  # noqa: BLE001 - the test asserts there were none
            self.problems.append(f"{type(exc).__name__}: {exc}")
