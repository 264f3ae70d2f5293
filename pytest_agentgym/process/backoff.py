"""Starting a server again when its start fails: start-up back-off, and how its
failures are told.

:func:`start_with_backoff` starts a spawned server that exits or never answers
again on its port, up to ``attempts`` times in all, waiting ``backoff`` seconds,
doubling, in between; each failed attempt is a line in the server's log and a
warning, and the last failure is raised as one :class:`ServerStartError` paragraph
(attempts, why, command, log). It is the one restart mechanism: the server pool
starts environment servers with it, and :meth:`ManagedServer.revive
<pytest_agentgym.process.managed.ManagedServer.revive>` brings back a server that
died with it. No pytest.
"""

from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path
from typing import Protocol, TypeVar

from pytest_agentgym.process.errors import ServerCommandError, ServerStartError
from pytest_agentgym.process.health import describe_exit

__all__ = ["start_with_backoff"]

#: start attempts and failures (harness.log in a run): the process manager's logger
log = logging.getLogger("pytest_agentgym.process")


class Startable(Protocol):
    """What back-off needs of a server (a ManagedServer is one)."""

    label: str
    url: str
    startup_timeout: float
    log_path: Path | None

    @property
    def attached(self) -> bool: ...

    @property
    def argv(self) -> list[str] | None: ...

    def start(self) -> Startable: ...

    def note(self, text: str) -> None: ...

    def leave_a_taken_port(self) -> str | None: ...


S = TypeVar("S", bound=Startable)


def start_with_backoff(server: S, attempts: int, backoff: float, logger: logging.Logger = log) -> S:
    """``server.start()``; a spawned server that exits or never answers is started again
    (same port) up to ``attempts`` times in all, waiting ``backoff`` seconds, doubling,
    in between. One that never answered and whose port another process now holds is
    started again at once on a new port (:meth:`leave_a_taken_port`). Each failed attempt is noted in its log and logged to ``logger``; the
    last failure is raised as one :class:`ServerStartError` paragraph (attempts, why,
    command, log). A command that cannot run at all is raised at once; an attached
    server is tried once, and its own one-line error raised."""
    attempts = 1 if server.attached else max(1, attempts)
    waits: list[float] = []
    for attempt in range(1, attempts + 1):
        try:
            server.start()
            return server
        except ServerCommandError:
            raise  # the command cannot run at all: starting it again cannot help
        except ServerStartError as exc:
            last = exc
            if attempt == attempts:
                break
            moved = server.leave_a_taken_port()
            if moved is not None:  # lost its port before it bound it: not the server's fault
                server.note(moved)
                logger.warning("%s: %s", server.label, moved)
                continue
            waits.append(backoff * 2 ** (attempt - 1))
            _log_attempt(server, attempt, attempts, exc, waits[-1], logger)
            time.sleep(waits[-1])  # back-off before the next start
    _log_attempt(server, attempts, attempts, last, None, logger)
    if server.attached:
        raise last  # one line already: nothing was started here
    raise ServerStartError(
        gave_up(server, attempts, waits, last),
        exit_code=last.exit_code, log_tail=last.log_tail, attempts=attempts,
    ) from last


def _why(server: Startable, exc: ServerStartError) -> str:
    if exc.exit_code is not None:
        return f"{describe_exit(exc.exit_code)} before it answered"
    return f"did not answer at {server.url} within {server.startup_timeout:g} s"


def _log_attempt(server: Startable, attempt: int, attempts: int, exc: ServerStartError, wait: float | None,
                 logger: logging.Logger) -> None:
    then = f"; next attempt in {wait:g} s" if wait is not None else "; giving up"
    line = f"start attempt {attempt} of {attempts} failed: it {_why(server, exc)}{then}"
    server.note(line)
    logger.warning("%s: %s (log: %s)", server.label, line, server.log_path)


def gave_up(server: Startable, attempts: int, waits: list[float], last: ServerStartError) -> str:
    """One paragraph: how many attempts, why the last failed, the command, the log."""
    tail = " | ".join(line.strip() for line in last.log_tail.splitlines()[-5:] if line.strip())
    tries = (f"{attempts} attempts (waiting {', '.join(f'{w:g} s' for w in waits)} between "
             "them); the last one" if waits else "1 attempt; it")
    return (
        f"{server.label} did not start after {tries} {_why(server, last)}; "
        f"command: `{shlex.join(server.argv or [])}`; its log: {server.log_path}"
        + (f"; last lines: {tail}" if tail else "")
    )
