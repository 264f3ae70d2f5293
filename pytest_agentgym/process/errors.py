"""What the process manager raises: a server that could not be started, reached or
restarted (:class:`ServerError`), one that did not become healthy
(:class:`ServerStartError`), one whose command cannot be run at all
(:class:`ServerCommandError`). Messages are redacted: credentials in URLs show as ``***``.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.results.redact import redact_text

__all__ = ["ServerCommandError", "ServerError", "ServerStartError"]


class ServerError(RuntimeError):
    """A server could not be started, reached or restarted. Credentials in the
    URLs of its message (and its command line) are shown as ``***``."""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(redact_text(message), *args)


class ServerStartError(ServerError):
    """A server did not become healthy; ``exit_code`` is set when its process died,
    ``attempts`` says how many starts were tried."""

    def __init__(self, message: str, *, exit_code: int | None = None, log_tail: str = "",
                 attempts: int = 1) -> None:
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.attempts = attempts
        super().__init__(message)  # pickles whole: the keywords have defaults, the state is kept


class ServerCommandError(ServerStartError):
    """The server's command could not be run at all (not found, not executable);
    starting it again cannot help."""
