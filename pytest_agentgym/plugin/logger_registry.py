"""pytest reads logging's registry of loggers while the run's threads may add to it.

At the start of every hook it wraps (the session, collection, each phase of each test),
pytest's logging plugin walks ``logging.Logger.manager.loggerDict`` to attach its
handlers. An evaluating run has threads of its own by then: the engine's event loop
plays episodes while pytest reports items, and the model client is imported on a
thread while the servers boot. A module imported on such a thread makes its logger
(``logging.getLogger(__name__)``), which adds an entry to that dict; when that lands
while pytest is walking it, pytest stops with ``INTERNALERROR> RuntimeError: dictionary
changed size during iteration`` (seen under load, where the two overlap more often).

:func:`guard_logger_registry` swaps the registry for a dict whose iteration runs over a
copy taken in one step (copying a dict holds the GIL throughout), so a walk never sees
the dict change under it. Lookups and inserts, which is all that logging itself does,
are the plain dict's. No pytest here: it is called when a session starts evaluating.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator


class SnapshotRegistry(dict):
    """A dict whose keys, values, items and iteration are copies taken in one step."""

    def keys(self) -> list[Any]:  # type: ignore[override]
        return list(dict.keys(self))

    def values(self) -> list[Any]:  # type: ignore[override]
        return list(dict.values(self))

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]
        return list(dict.items(self))

    def __iter__(self) -> Iterator[Any]:
        return iter(list(dict.keys(self)))


def guard_logger_registry() -> None:
    """Make logging's registry of loggers safe to walk while other threads add loggers.
    Idempotent; call it before the run starts any thread."""
    manager = logging.Logger.manager
    with logging._lock:  # logging's own lock, held by getLogger while it adds a logger
        if not isinstance(manager.loggerDict, SnapshotRegistry):
            manager.loggerDict = SnapshotRegistry(manager.loggerDict)
