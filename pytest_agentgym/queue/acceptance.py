"""Which results a queue run counts: the coordinator's acceptance rule.

A result on a run's results subject counts only when

* it comes from one of the run's workers: a worker of that name whose heartbeat this
  coordinator has heard on the run's queue (it answered the roll call, or it has beaten
  since: a worker beats every ``--heartbeat`` seconds and whenever the roll is called, so
  one that joins the run later counts from its first heartbeat), and whose latest
  heartbeat does not say that it refuses the run (another model, endpoint kind,
  checkpoint, plugin or wire version: :func:`refusals`, the roll call's own rule);
* its record is one of this run's episodes: the run's id, model and checkpoint, and the
  environment, task and repeat that the subject it came on names.

A result from a name the coordinator has not heard is not refused at once: the
coordinator asks for a roll call and waits up to :data:`VOUCH_S` for that worker's
heartbeat (a worker that started a moment ago), then judges it again.

Anything else is refused: nothing of it is recorded, its item is not published again
(the run's own worker still holds it, and that worker's result resolves it), and
run.json's notes and the run's summary name the worker it claimed to be, why, and how
many (queue/meaning.py :meth:`RunMeaning.refused_result`). The names on the wire are
what the publisher says: without NATS permissions (docs/scale-out.md) a client that
beats under a worker's name and copies everything else is not told apart by this rule.

No network: the coordinator passes what it heard, and waits in :class:`Unheard` on its own
loop. A worker's side of it, :func:`played_before`: a result stored on an item's subject
counts as the worker's earlier play only when it is its own result of that very item.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping

from pytest_agentgym.queue.wire import WIRE_VERSION, Heartbeat, Result, WireError, WorkItem, decode
from pytest_agentgym.results.fingerprint import episode_differences

#: Seconds the coordinator waits for the heartbeat of a worker it has not heard yet before
#: it refuses that worker's result (it asks for a roll call first).
VOUCH_S = 3.0


def refusals(beat: Heartbeat, *, model: str | None, checkpoint: str | None,
             endpoint_kind: str | None = None) -> list[str]:
    """Why the worker of ``beat`` will refuse the run's work items, as far as its heartbeat
    tells (the run-level fields; sampling and prompts are checked on each item). ``model``
    and ``endpoint_kind``: the run's, None when not pinned yet (the worker's own counts)."""
    from pytest_agentgym import __version__

    if beat.wire != WIRE_VERSION:
        return [f"wire version {beat.wire!r} worker, {WIRE_VERSION} run (a pytest-agentgym older than the run's)"]
    run = {"plugin_version": __version__, "model": model or beat.model, "checkpoint": checkpoint,
           "endpoint_kind": endpoint_kind or beat.endpoint_kind}
    return episode_differences(run, {"plugin_version": beat.version, "model": beat.model,
                                     "checkpoint": beat.checkpoint, "endpoint_kind": beat.endpoint_kind})


def unaccepted(result: Result, *, run_id: str, run: Mapping[str, Any], queue: str, beat: Heartbeat | None,
               came_on: str, expected_on: str) -> list[str]:
    """Why ``result`` does not count (empty: it does). ``run``: the run's fingerprint (its
    model, endpoint kind and checkpoint); ``beat``: the latest heartbeat heard from a worker of
    the result's name on ``queue``, None when none was; ``came_on``: the subject the result
    came on, ``expected_on``: the results subject of its record's episode in this run.

    Each reason is the same text for every result of one kind from one worker, so that the
    notes count them."""
    record = result.record
    reasons = []
    if beat is None:
        reasons.append(f"not a worker of queue {queue}: it never answered the roll call nor sent a heartbeat")
    else:
        refused = refusals(beat, model=run.get("model"), checkpoint=run.get("checkpoint"),
                           endpoint_kind=run.get("endpoint_kind"))
        if refused:
            reasons.append("its heartbeat says it refuses this run: " + "; ".join(refused))
    if record.run_id != run_id:
        reasons.append(f"its record is of run {record.run_id!r}, not this run's {run_id!r}")
    if record.model != run.get("model"):
        reasons.append(f"its record names model {record.model!r}, the run's is {run.get('model')!r}")
    if record.checkpoint != run.get("checkpoint"):
        reasons.append(f"its record names checkpoint {record.checkpoint!r}, the run's is {run.get('checkpoint')!r}")
    if came_on != expected_on:
        reasons.append("its record's episode (environment, task, repeat) is not the one its subject names")
    return reasons


def played_before(stored: Any, item: WorkItem, *, worker: str, model: str) -> bool:
    """Whether ``stored``, the newest message on ``item``'s results subject, is ``worker``'s own
    result of this very work item (its generation and reissue; the item's run, episode and
    checkpoint; ``model``, the worker's): its ack was lost and the item need not be played
    again. Any other result there (another name, another model: one the coordinator refuses)
    does not make the worker ack an item it did not play."""
    try:
        result = Result.from_payload(decode(stored.data, stored.headers))
    except WireError:
        return False
    record = result.record
    return (result.worker == worker and (result.generation, result.reissue) == (item.generation, item.reissue)
            and (record.run_id, record.key, record.checkpoint, record.model)
            == (item.run_id, item.key, item.checkpoint, model))


class Unheard:
    """Results from workers this coordinator has not heard yet, each waiting up to
    :data:`VOUCH_S` for its worker's heartbeat (the coordinator's loop only)."""

    def __init__(self) -> None:
        self._heard: dict[str, asyncio.Event] = {}  # worker -> set on its first heartbeat
        self._waiting: dict[int, tuple[Any, ...]] = {}
        self._next = 0

    def heard(self, worker: str) -> None:
        if worker in self._heard:
            self._heard[worker].set()

    async def wait(self, worker: str, entry: tuple[Any, ...], ask: Callable[[], Awaitable[None]]) -> tuple | None:
        """Wait for a heartbeat of ``worker`` (``ask``, a roll call, first when none was asked
        for it yet); ``entry`` when it is still to be judged, None when :meth:`left` took it."""
        token, self._next = self._next, self._next + 1
        self._waiting[token] = entry
        heard = self._heard.get(worker)
        if heard is None:
            heard = self._heard[worker] = asyncio.Event()
            await ask()
        try:
            await asyncio.wait_for(heard.wait(), VOUCH_S)
        except asyncio.TimeoutError:
            pass
        return self._waiting.pop(token, None)

    def left(self) -> list[tuple[Any, ...]]:
        """The entries still waiting, taken to be judged now (the run ends)."""
        entries = list(self._waiting.values())
        self._waiting.clear()
        return entries
