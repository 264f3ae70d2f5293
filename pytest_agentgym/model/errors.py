"""What can go wrong when asking a model endpoint, as exceptions, and how error
answers are read (the server's message, whether it says the context is too long).

Every error is a :class:`ModelError` naming the endpoint URL and the model and
carrying the :class:`~pytest_agentgym.model.records.CallRecord` of the attempts so
far; all of them survive pickling (pytest-xdist workers send exceptions to the
controller). The client (:mod:`pytest_agentgym.model.client`) raises them, and
reads the answers it gets with the functions at the end: the server's message,
whether it says the context is too long, a ``Retry-After``, and a non-2xx answer
of the direct route as :class:`StatusAnswer`.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import TYPE_CHECKING, Any, Mapping

from pytest_agentgym.model.records import CallRecord
from pytest_agentgym.results.redact import redact_url

if TYPE_CHECKING:
    from pytest_agentgym.transport.route import RawAnswer


class ModelError(Exception):
    """A model call failed: an infrastructure error, never a policy failure (except
    :class:`ContextLengthExceeded`, which the episode turns into a stop reason)."""

    def __init__(self, message: str, *, url: str, model: str, record: "CallRecord | None" = None,
                 unreachable: bool = False) -> None:
        self.detail = message
        self.url = url
        self.model = model
        self.record = record
        #: the last attempt made no exchange at all (refused, reset, closed without an answer):
        #: the endpoint is down, not busy or refusing; what an outage policy acts on (engine/outage.py)
        self.unreachable = unreachable
        super().__init__(f"model endpoint {redact_url(url)} (model {model}): {message}")

    def __reduce__(self) -> Any:
        # Keep the keyword-only fields when the error crosses a process boundary
        # (pytest-xdist workers pickle exceptions).
        return (_rebuild, (type(self), self.args, self.__dict__.copy()))


def _rebuild(cls: type, args: tuple[Any, ...], state: dict[str, Any]) -> ModelError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class EndpointDown(ModelError):
    """No connection could be made, or the endpoint kept answering 5xx or 429."""


class RequestRejected(ModelError):
    """The endpoint refused the request with a 4xx status (not 429), e.g. an unknown
    model or a bad key. Deterministic: retrying cannot help, and the episode does not."""

    def __init__(self, message: str, *, status_code: int, server_message: str, **kwargs: Any) -> None:
        self.status_code = status_code
        self.server_message = server_message
        super().__init__(message, **kwargs)


class ContextLengthExceeded(RequestRejected):
    """The endpoint refused the request because the conversation no longer fits the
    model's context. Deterministic, so never retried; the episode ends with stop
    reason ``context_length`` (AgentGym's loop stops when the prompt reaches the
    maximum length), not with an error."""


#: What servers say when the prompt does not fit the context, case-insensitive:
#: OpenAI (code context_length_exceeded, "maximum context length"), vLLM ("This
#: model's maximum context length is N tokens", "... is too long to fit into the
#: model", "longer than the maximum model length"), Anthropic ("prompt is too
#: long"), Ollama and llama.cpp ("the input length exceeds the context length",
#: "exceeds the available context size", exceed_context_size_error, "the prompt is
#: longer than the context length"), others ("context window"). TensorZero passes
#: the provider's text on inside its own message.
CONTEXT_TOO_LONG = re.compile(
    r"context_length_exceeded|maximum context length|context window|prompt is too long"
    r"|too long to fit into the model|longer than the maximum model length"
    r"|exceeds? the (?:available )?context (?:length|size)|exceed_context_size_error"
    r"|longer than the context length",
    re.IGNORECASE,
)


def says_context_too_long(message: str, code: Any = None) -> bool:
    """Whether an error answer says the prompt is longer than the model's context."""
    return code == "context_length_exceeded" or bool(CONTEXT_TOO_LONG.search(message or ""))


class EndpointTimeout(ModelError):
    """A call, or the whole per-turn budget, ran out of time."""


class EndpointBadResponse(ModelError):
    """The endpoint answered 2xx, but not with a chat completion: a body that is not
    JSON, no choices, or a message without text."""


# --------------------------------------------------------------------------- reading error answers


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(text.split())


def context_too_long(exc: Any) -> bool:
    """Whether an error answer says the prompt does not fit the context: its whole
    message (TensorZero's can be long), or an OpenAI-style ``code``."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    code = inner.get("code") if isinstance(inner, Mapping) else None
    return says_context_too_long(_raw_server_message(exc), code)


def server_message(exc: Any) -> str:
    """The server's own error text, on one line: OpenAI-style ``{"error": {"message"}}``,
    ``{"message"}``, ``{"detail"}``, ``{"error": "..."}``, or the raw body."""
    return one_line(_raw_server_message(exc))[:500]


def _raw_server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)  # the SDK already unwraps {"error": ...}
    if isinstance(body, str) and body:
        return body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            for key in ("message", "detail"):
                if inner.get(key):
                    return str(inner[key])
        elif isinstance(inner, str) and inner:
            return inner
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    response = getattr(exc, "response", None)
    text = getattr(response, "text", "") if response is not None else ""
    return text or str(exc)


class StatusAnswer(Exception):
    """A non-2xx answer on the client's direct route, with what the error handling reads of
    the SDK's ``APIStatusError``: ``status_code``, ``response`` (headers, text) and ``body``
    (the JSON answer with ``{"error": ...}`` unwrapped, as the SDK does; else the text)."""

    def __init__(self, response: "RawAnswer") -> None:
        self.response = response
        self.status_code = response.status_code
        text = response.text.strip()
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        self.body = body.get("error", body) if isinstance(body, dict) else body
        super().__init__(f"Error code: {self.status_code}")


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
