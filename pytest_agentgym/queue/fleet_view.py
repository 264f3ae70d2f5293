"""What ``pytest-agentgym fleet`` shows: one row per worker of a queue, from the
heartbeats heard (``agentgym.field.status.v1`` with ``status: "worker"``).

Plain data, no network and no clock of its own: the caller says when each heartbeat
was heard and what time it is now, so the table is the same for the same heartbeats.
The age of a worker is measured on this machine's clock from the moment its last
heartbeat arrived, not from the worker's ``timestamp``: two machines' clocks may
disagree by more than a heartbeat interval.

A worker's state, from the seconds since its last heartbeat (its age) and its
heartbeat interval (``interval_s`` in the heartbeat; :data:`DEFAULT_INTERVAL_S` for a
worker too old to send it):

* ``alive``: its age is at most the stale limit, :data:`STALE_INTERVALS` intervals
  (30 s for the default 10 s interval), or ``--stale S``: one heartbeat lost on the
  way, or a worker whose loop is busy for a moment, is not stale yet;
* ``stale``: silent for longer than the stale limit (a hung or partitioned worker:
  its items come back to the queue once AckWait passes without an in-progress ack);
* ``gone``: its last heartbeat said ``stopping`` (SIGTERM, Ctrl-C: it naked what it
  held), or silent for :data:`GONE_FACTOR` times the stale limit (a killed machine;
  by then JetStream has handed its items to other workers).

A heartbeat without ``played`` or ``runs`` (a worker older than these fields) still
makes a row; the missing cells show ``-``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_agentgym.queue.liveness import DEFAULT_INTERVAL_S, GONE_FACTOR, STALE_INTERVALS
from pytest_agentgym.queue.wire import Heartbeat

#: How many run ids a row names before it says "+N".
RUNS_SHOWN = 2

COLUMNS = ("WORKER", "NODE", "MODEL", "SLOTS", "PLAYED", "HEARD", "STATE", "RUNS")


@dataclass(frozen=True)
class Row:
    """One worker as the table shows it."""

    beat: Heartbeat
    age_s: float
    state: str

    def cells(self) -> tuple[str, ...]:
        beat = self.beat
        return (beat.worker, beat.profile, beat.model, f"{beat.load}/{beat.capacity}",
                "-" if beat.played is None else str(beat.played), f"{age_text(self.age_s)} ago",
                self.state, runs_text(beat.runs))

    def to_json(self) -> dict[str, Any]:
        beat = self.beat
        return {"worker": beat.worker, "queue": beat.queue, "node": beat.profile, "host": beat.host,
                "model": beat.model, "endpoint_kind": beat.endpoint_kind, "checkpoint": beat.checkpoint,
                "version": beat.version, "slots_in_use": beat.load, "concurrency": beat.capacity,
                "played": beat.played, "heard_s_ago": round(self.age_s, 1), "state": self.state,
                "runs": None if beat.runs is None else list(beat.runs), "envs": list(beat.envs),
                "interval_s": beat.interval_s, "timestamp": beat.timestamp}


def stale_limit(beat: Heartbeat, stale_s: float | None) -> float:
    """Seconds of silence after which ``beat``'s worker is stale (``stale_s``: --stale)."""
    if stale_s is not None:
        return stale_s
    return STALE_INTERVALS * (beat.interval_s or DEFAULT_INTERVAL_S)


def state_of(beat: Heartbeat, age_s: float, stale_s: float | None = None) -> str:
    """``alive``, ``stale`` or ``gone`` (the module's docstring has the rule)."""
    limit = stale_limit(beat, stale_s)
    if beat.state == "stopping" or age_s > GONE_FACTOR * limit:
        return "gone"
    return "stale" if age_s > limit else "alive"


def age_text(seconds: float) -> str:
    """``4s``, ``3m05s``, ``2h03m``."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def runs_text(runs: tuple[str, ...] | None) -> str:
    if runs is None:
        return "-"
    if not runs:
        return "none"
    shown = ", ".join(runs[:RUNS_SHOWN])
    return shown + (f" +{len(runs) - RUNS_SHOWN}" if len(runs) > RUNS_SHOWN else "")


class FleetView:
    """The newest heartbeat of each worker of one queue, and the table made of them."""

    def __init__(self, queue: str, *, stale_s: float | None = None) -> None:
        self.queue = queue
        self.stale_s = stale_s
        self._last: dict[str, tuple[Heartbeat, float]] = {}  # worker -> (heartbeat, heard at)

    def heard(self, beat: Heartbeat, at: float) -> bool:
        """Keep ``beat`` (heard at ``at`` seconds, the caller's clock) when it is of this
        queue; whether it was kept."""
        if beat.queue != self.queue:
            return False
        self._last[beat.worker] = (beat, at)
        return True

    def rows(self, now: float) -> list[Row]:
        """One row per worker heard, by name (the rows keep their places as the table redraws)."""
        rows = []
        for name in sorted(self._last):
            beat, at = self._last[name]
            age = max(0.0, now - at)
            rows.append(Row(beat, age, state_of(beat, age, self.stale_s)))
        return rows


def table(rows: list[Row]) -> list[str]:
    """The rows as aligned text lines under a header line (no trailing blanks)."""
    lines = [COLUMNS, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]


def summary(rows: list[Row], *, queue: str, server: str) -> str:
    """The line under the table: how many workers in each state, the slots in use."""
    counts = {state: sum(1 for row in rows if row.state == state) for state in ("alive", "stale", "gone")}
    states = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    live = [row for row in rows if row.state != "gone"]
    slots = f"{sum(r.beat.load for r in live)}/{sum(r.beat.capacity for r in live)} slot(s) in use"
    return f"queue {queue} at {server}: {len(rows)} worker(s) ({states or 'none'}); {slots}"


def nobody_line(*, queue: str, server: str, waited_s: float) -> str:
    """What --once says when no worker of the queue answered."""
    url = server + (f"?name={queue}" if queue != "agentgym" else "")
    return (f"no worker of queue {queue} at {server} answered within {waited_s:g} s; start one with "
            f"pytest-agentgym worker --nats {url} (or check the queue's name: --queue NAME)")
