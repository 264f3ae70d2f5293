"""The coordinator's view of its fleet: what stands in for the model endpoint in a
queue run, the roll call that pins the run's model, and the header lines naming
the workers that answered it.

In a run with ``--agentgym-queue`` the pytest process contacts no model and
starts no environment server: each worker brings its own. The run is played by
one model through one endpoint kind, pinned before the first work item is
published from the workers that answer the roll call (:func:`pin`): the model is
``--agentgym-model`` when given, else the one model the answering workers serve;
workers that serve different models and no ``--agentgym-model`` to choose stop
the run before any episode (:class:`FleetMismatch`). A run with no worker that
can play it waits for one. Each record names the model and the worker that
played it; run.json and the fingerprint name the pinned model.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from pytest_agentgym.queue.acceptance import refusals
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.wire import Heartbeat

#: Seconds the coordinator listens for workers before the header is printed.
ROLL_CALL_S = 1.0


class FleetMismatch(RuntimeError):
    """The workers that answered the roll call disagree on what would play the run."""


@dataclass
class FleetEndpoint:
    """Duck-types :class:`~pytest_agentgym.model.endpoints.ChosenEndpoint` for the run."""

    model: str
    base_url: str
    kind: str = "queue"
    notes: list[str] = field(default_factory=list)
    workers: list[Heartbeat] = field(default_factory=list)
    #: the endpoint kind of the workers that play the run (the fingerprint's endpoint_kind)
    endpoint_kind: str | None = None

    def close(self) -> None:  # nothing was launched
        return None


def open_fleet(settings: Any, *, generation: int, run_dir: str) -> tuple[Any, FleetEndpoint]:
    """Connect the coordinator to the queue, call the roll and pin the run's model (waiting
    for a worker that can play it). Raises :class:`~pytest_agentgym.queue.streams.QueueUnavailable`
    or :class:`FleetMismatch`."""
    from pytest_agentgym.queue.coordinator import QueueCoordinator

    address: QueueAddress = settings.queue
    coordinator = QueueCoordinator(address, run_id=settings.run_id, generation=generation,
                                   model=settings.model or f"fleet:{address.name}", run_dir=run_dir)
    try:
        coordinator.connect()
        workers = coordinator.roll_call(ROLL_CALL_S)
        pinned, refused = pin(workers, model=settings.model, checkpoint=settings.checkpoint, address=address)
        said = False
        while pinned is None:  # no worker can play the run yet: ask again until one answers
            if not said:
                print(waiting_line(workers, address, settings.model), file=sys.stderr, flush=True)
                said = True
            workers = coordinator.roll_call(ROLL_CALL_S)
            pinned, refused = pin(workers, model=settings.model, checkpoint=settings.checkpoint, address=address)
    except BaseException:
        coordinator.close(timeout=2.0)
        raise
    model, kind = pinned
    coordinator.model = model
    coordinator.meaning.endpoint_kind = kind
    endpoint = FleetEndpoint(model=model, base_url=address.server, workers=workers, endpoint_kind=kind)
    endpoint.notes.append(f"{address.describe()}; {worker_line(workers, address)}")
    endpoint.notes.extend(refused)
    return coordinator, endpoint


def pin(workers: list[Heartbeat], *, model: str | None, checkpoint: str | None,
        address: QueueAddress) -> tuple[tuple[str, str] | None, list[str]]:
    """The (model, endpoint kind) the run is played with, or None while no answering worker
    can play it; and a note per worker that will refuse the run. Raises :class:`FleetMismatch`
    when the workers that could play it serve different models (or kinds): a run is played
    by one, never a mix."""
    refused, groups = [], {}
    for beat in sorted(workers, key=lambda b: b.worker):
        if beat.state != "serving":
            continue
        why = refusals(beat, model=model, checkpoint=checkpoint)
        if why:
            refused.append(f"worker {beat.worker} (node {beat.profile}) will refuse this run's work items: "
                           + "; ".join(why))
        else:
            groups.setdefault((beat.model, beat.endpoint_kind), []).append(beat.worker)
    if len(groups) > 1:
        served = "; ".join(f"model {m!r} via {k} ({', '.join(names)})" for (m, k), names in sorted(groups.items()))
        fix = ("stop the workers of all but one endpoint kind" if model else
               "name the run's model with --agentgym-model=MODEL (the workers of another model then refuse "
               "its work items) or stop the workers of all but one")
        raise FleetMismatch(f"the workers of queue {address.name} that answered the roll call would play this "
                            f"run with different models or endpoint kinds: {served}; a run is played by one: {fix}")
    return (next(iter(groups)) if groups else None), refused


def waiting_line(workers: list[Heartbeat], address: QueueAddress, model: str | None) -> str:
    wanted = f"model {model!r}" if model else "a model"
    heard = ", ".join(w.describe() for w in sorted(workers, key=lambda w: w.worker)) or "none"
    return (f"agentgym: waiting for a worker of queue {address.name} that can play this run ({wanted}; "
            f"heard: {heard}); start one: pytest-agentgym worker --nats {address.server}"
            + (f"?name={address.name}" if address.name != "agentgym" else "") + " (Ctrl-C stops)")


def worker_line(workers: list[Heartbeat], address: QueueAddress) -> str:
    if not workers:
        return (f"no worker answered within {ROLL_CALL_S:g} s; episodes wait in the queue until one "
                f"does: pytest-agentgym worker --nats {address.server}"
                + (f"?name={address.name}" if address.name != "agentgym" else ""))
    slots = sum(w.capacity for w in workers)
    return (f"{len(workers)} worker(s), {slots} slot(s): "
            + ", ".join(w.describe() for w in sorted(workers, key=lambda w: w.worker)))
