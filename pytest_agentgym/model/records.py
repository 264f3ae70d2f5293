"""What one model turn gave back and how it went: :class:`ModelReply` and its
:class:`CallRecord` (latency, attempts, the reasons for retries, token counts).

The client (:mod:`pytest_agentgym.model.client`) makes them; a
:class:`~pytest_agentgym.model.errors.ModelError` carries the record of the
attempts made before it failed. Plain data: no HTTP here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CallRecord", "ModelReply"]


@dataclass(frozen=True)
class CallRecord:
    """How one turn's request went, successful or not.

    ``latency_s`` is the wall time of the whole turn (every attempt and every
    backoff wait); ``retry_reasons`` has one entry per failed attempt that was
    retried, e.g. ``"HTTP 503: <the server's message>"``, ``"HTTP 429 (Retry-After 1.0 s)"``,
    ``"connection error: ConnectError"``.
    """

    latency_s: float
    attempts: int
    retry_reasons: tuple[str, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class ModelReply:
    """The assistant's text and how it was obtained."""

    text: str
    record: CallRecord
    finish_reason: str | None = None
    model: str | None = None
    #: The endpoint's per-token data for this reply, untouched (see
    #: :data:`pytest_agentgym.model.token_data.TOKEN_DATA_KEYS`);
    #: None when it sent none.
    token_data: dict[str, Any] | None = None

    @property
    def latency_s(self) -> float:
        return self.record.latency_s

    @property
    def prompt_tokens(self) -> int | None:
        return self.record.prompt_tokens

    @property
    def completion_tokens(self) -> int | None:
        return self.record.completion_tokens
