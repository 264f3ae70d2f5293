"""The coordinator's view of its fleet: what stands in for the model endpoint in a
queue run, and the header lines naming the workers that answered the roll call.

In a run with ``--agentgym-queue`` the pytest process contacts no model and
starts no environment server: each worker brings its own. The run's model (in
run.json and its fingerprint) is ``--agentgym-model`` when given, else
``fleet:<queue>``; each record names the model and the worker that played it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.wire import Heartbeat

#: Seconds the coordinator listens for workers before the header is printed.
ROLL_CALL_S = 1.0


@dataclass
class FleetEndpoint:
    """Duck-types :class:`~pytest_agentgym.model.endpoints.ChosenEndpoint` for the run."""

    model: str
    base_url: str
    kind: str = "queue"
    notes: list[str] = field(default_factory=list)
    workers: list[Heartbeat] = field(default_factory=list)

    def close(self) -> None:  # nothing was launched
        return None


def open_fleet(settings: Any, *, generation: int, run_dir: str) -> tuple[Any, FleetEndpoint]:
    """Connect the coordinator to the queue and call the roll. Raises
    :class:`~pytest_agentgym.queue.streams.QueueUnavailable`."""
    from pytest_agentgym.queue.coordinator import QueueCoordinator

    address: QueueAddress = settings.queue
    model = settings.model or f"fleet:{address.name}"
    coordinator = QueueCoordinator(address, run_id=settings.run_id, generation=generation, model=model,
                                   run_dir=run_dir)
    try:
        coordinator.connect()
    except Exception:
        coordinator.close(timeout=2.0)
        raise
    workers = coordinator.roll_call(ROLL_CALL_S)
    endpoint = FleetEndpoint(model=model, base_url=address.server, workers=workers)
    endpoint.notes.append(f"{address.describe()}; {worker_line(workers, address)}")
    return coordinator, endpoint


def worker_line(workers: list[Heartbeat], address: QueueAddress) -> str:
    if not workers:
        return (f"no worker answered within {ROLL_CALL_S:g} s; episodes wait in the queue until one "
                f"does: pytest-agentgym worker --nats {address.server}"
                + (f"?name={address.name}" if address.name != "agentgym" else ""))
    slots = sum(w.capacity for w in workers)
    return (f"{len(workers)} worker(s), {slots} slot(s): "
            + ", ".join(w.describe() for w in sorted(workers, key=lambda w: w.worker)))
