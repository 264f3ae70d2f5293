"""The queue's JetStream setup: connection, the two streams, the consumers.

* ``AGENTGYMQ_<NAME>_WORK`` (work-queue retention, file storage): one work item
  per episode; JetStream removes an item when a worker acks it. Its durable pull
  consumer ``workers`` is shared by every worker: explicit acks, ``AckWait`` and
  ``MaxDeliver`` from the queue URL. JetStream redelivers an item whose worker
  neither acked it nor sent an in-progress ack within AckWait; after MaxDeliver
  deliveries it sends the advisory the coordinator turns into ``harness:WorkerLost``.
* ``AGENTGYMQ_<NAME>_RESULTS`` (limits retention, kept :data:`RESULTS_MAX_AGE_S`):
  the records workers publish. Each coordinator reads its run's results through
  its own durable consumer, from the first one, so a resumed coordinator collects
  what arrived while it was gone.

Both streams deduplicate by ``Nats-Msg-Id`` within :data:`DUPLICATE_WINDOW_S`.
nats-py is imported here, when a queue is used, never at plugin import.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.transport.nats_options import (NatsOptionsError, first_refusal, refusal,
                                                    refuse_plain_text)

log = logging.getLogger("pytest_agentgym.queue")

DUPLICATE_WINDOW_S = 3600.0
#: How long results stay in the results stream (a coordinator resumed later than
#: this finds them only in its episodes.jsonl).
RESULTS_MAX_AGE_S = 7 * 24 * 3600.0
#: Seconds between reconnect attempts after the server went away; the number of
#: attempts is the reconnect window divided by this.
RECONNECT_WAIT_S = 1.0
API_TIMEOUT_S = 5.0


class QueueUnavailable(ConnectionError):
    """The queue's NATS server cannot be used; the message says why and what to do."""


async def connect(address: QueueAddress, *, name: str, reconnect_s: float, connect_timeout: float = 5.0,
                  on_closed: Callable[[], Awaitable[None]] | None = None, door: str | None = None) -> Any:
    """A connection that reconnects for at most ``reconnect_s`` seconds after a loss
    (nats-py's defaults would try for two minutes), then closes and calls ``on_closed``.
    The first connect gives up after ``connect_timeout`` seconds. Its inbox prefix is the
    URL's ``inbox=``, else ``door``'s own (``_INBOX_agentgym_worker``, ...; the documented
    permissions let each user subscribe only to its door's), else nats-py's ``_INBOX``."""
    import nats

    attempts = max(1, int(reconnect_s / RECONNECT_WAIT_S))

    async def closed() -> None:
        if on_closed is not None:
            await on_closed()

    try:
        signed_in = address.auth.connect_kwargs(door=door)
        await refuse_plain_text(address.server, address.auth, connect_timeout)
    except NatsOptionsError as exc:
        raise QueueUnavailable(f"NATS at {address.server}: {exc}") from None
    seen: list[BaseException] = []
    nc = None

    async def noted(exc: BaseException) -> None:  # a refused sign-in is reported here; later, reconnect noise
        if nc is None:
            seen.append(exc)

    try:
        nc = await asyncio.wait_for(nats.connect(
            servers=[address.server], name=name, allow_reconnect=True, max_reconnect_attempts=attempts,
            reconnect_time_wait=RECONNECT_WAIT_S, connect_timeout=min(2.0, connect_timeout),
            ping_interval=5, max_outstanding_pings=2, closed_cb=closed, error_cb=noted, **signed_in),
            timeout=connect_timeout)
    except Exception as exc:  # noqa: BLE001 - refused, timed out, no servers, not signed in
        cause = first_refusal(seen, address.auth) or (seen[-1] if seen else exc)
        said = f"{type(cause).__name__}: {cause}".rstrip(": ")
        why = refusal(cause, address.auth)
        raise QueueUnavailable(f"NATS at {address.server} {why}" if why else
                               f"NATS at {address.server} unreachable ({said}); start nats-server with "
                               f"JetStream (nats-server -js) or fix the URL") from None
    return nc


async def ensure_streams(js: Any, address: QueueAddress) -> None:
    """Create the work and results streams when they are missing (idempotent)."""
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    wanted = [
        StreamConfig(name=address.work_stream, subjects=[address.work_subjects],
                     retention=RetentionPolicy.WORK_QUEUE, storage=StorageType.FILE,
                     duplicate_window=DUPLICATE_WINDOW_S),
        StreamConfig(name=address.results_stream, subjects=[address.result_subjects],
                     retention=RetentionPolicy.LIMITS, storage=StorageType.FILE,
                     duplicate_window=DUPLICATE_WINDOW_S, max_age=RESULTS_MAX_AGE_S),
    ]
    for config in wanted:
        try:
            await js.stream_info(config.name)
            continue
        except NotFoundError:
            pass
        try:
            await js.add_stream(config)
        except Exception as exc:  # noqa: BLE001 - no JetStream, subjects taken by another stream
            raise QueueUnavailable(f"NATS at {address.server}: cannot create stream {config.name} on "
                                   f"{config.subjects[0]} ({type(exc).__name__}: {exc}); the server needs "
                                   f"JetStream (nats-server -js) and no other stream on those subjects, and "
                                   f"this user must be allowed to create it (a worker's user is not: start "
                                   f"the coordinator first, it creates the queue)") from None


async def ensure_workers_consumer(js: Any, address: QueueAddress) -> None:
    """Create the workers' durable pull consumer, or update its AckWait and MaxDeliver."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    await js.add_consumer(address.work_stream, ConsumerConfig(
        durable_name=address.workers_consumer, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
        ack_wait=address.ack_wait_s, max_deliver=address.max_deliver, max_ack_pending=-1,
        filter_subject=address.work_subjects))


async def fresh_coordinator_consumer(js: Any, address: QueueAddress, run_id: str) -> str:
    """The coordinator's consumer of its run's results, made anew so that it
    delivers every result the stream holds for the run, from the first."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from nats.js.errors import NotFoundError

    name = address.coordinator_consumer(run_id)
    try:
        await js.delete_consumer(address.results_stream, name)
    except NotFoundError:
        pass
    await js.add_consumer(address.results_stream, ConsumerConfig(
        durable_name=name, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
        ack_wait=30.0, max_ack_pending=-1, filter_subject=address.results_of_run(run_id)))
    return name


async def last_on_subject(js: Any, stream: str, subject: str) -> Any | None:
    """The newest message of ``stream`` on ``subject``, or None."""
    from nats.js.errors import NotFoundError

    try:
        return await js.get_last_msg(stream, subject)
    except NotFoundError:
        return None


async def first(*aws: Any) -> None:
    """Wait until the first of ``aws`` finishes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def quietly(coro: Any) -> None:
    """Await ``coro``; log what it raises (best effort: the connection may be reconnecting)."""
    try:
        await coro
    except Exception as exc:  # noqa: BLE001
        log.debug("%s", exc)
