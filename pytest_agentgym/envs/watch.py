"""Which environment requests an episode attempt is waiting on.

The episode runner opens :func:`watch_requests` around an attempt; the
protocol client (:mod:`pytest_agentgym.envs.protocol`) lists every request made
inside it, in that task or in the tasks it starts, in the
:class:`RequestWatch` until the request is answered or fails. A request cut
short by cancellation stays listed, so when the episode's own wall-clock budget
ends an attempt, the episode can say which server and endpoint it was waiting
on, and for how long.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass(frozen=True, eq=False)
class PendingRequest:
    """One request sent to an environment server and not answered yet (compared by
    identity: two alike requests are still two)."""

    env: str
    url: str
    endpoint: str
    env_id: int | None
    #: ``time.monotonic()`` when it was sent
    sent_at: float

    def describe(self) -> str:
        """``environment server Maze at http://...: /step (env id 3)``, as errors name it."""
        where = f"environment server {self.env} at {self.url}: {self.endpoint}"
        return where + (f" (env id {self.env_id})" if self.env_id is not None else "")


class RequestWatch:
    """The environment requests in flight inside one :func:`watch_requests` block."""

    def __init__(self) -> None:
        self._pending: list[PendingRequest] = []

    def add(self, request: PendingRequest) -> None:
        self._pending.append(request)

    def discard(self, request: PendingRequest) -> None:
        if request in self._pending:
            self._pending.remove(request)

    def oldest(self) -> PendingRequest | None:
        """The request that has waited longest (the one a timeout cut short), if any."""
        return self._pending[0] if self._pending else None


_WATCH: contextvars.ContextVar[RequestWatch | None] = contextvars.ContextVar(
    "agentgym_env_request_watch", default=None
)


@contextlib.contextmanager
def watch_requests() -> Iterator[RequestWatch]:
    """List the environment requests made inside the block (and in tasks started
    inside it) while they are in flight."""
    watch = RequestWatch()
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        _WATCH.reset(token)


@contextlib.contextmanager
def in_flight(ctx: dict[str, Any]) -> Iterator[None]:
    """List the request in the current watch (if any) until it is answered or fails.
    A cancellation leaves it listed: whoever cancelled reads what it cut short."""
    watch = _WATCH.get()
    if watch is None:
        yield
        return
    pending = PendingRequest(sent_at=time.monotonic(), **ctx)
    watch.add(pending)
    try:
        yield
    except Exception:
        watch.discard(pending)
        raise
    watch.discard(pending)
