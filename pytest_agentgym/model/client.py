"""Client for any OpenAI-compatible chat endpoint (TensorZero, Ollama, vLLM, the
reference agent), built on the ``openai`` package's ``AsyncOpenAI``.

One :meth:`EndpointClient.chat` call is one model turn; :meth:`EndpointClient.post_json`
sends any other POST (vLLM's ``/completions`` and ``/tokenize``: model/token_turns.py)
through the same loop. A call runs inside a per-turn budget (``turn_budget`` seconds);
each HTTP call inside it gets at most ``request_timeout`` seconds, and never more than
what is left of the budget.
Retries are done here, not by the SDK (``max_retries=0``), so the budget and
the records are exact:

* connection errors, HTTP 5xx and HTTP 429 are retried up to ``retries`` times
  with exponential backoff; a 429's ``Retry-After`` is honoured, but a wait that
  would overrun the turn budget ends the turn at once;
  the error when they run out says whether the last attempt made no exchange at
  all (``unreachable``: refused, reset, closed unanswered), what the engine's outage
  policy acts on (engine/outage.py);
* other HTTP 4xx answers (bad request, unknown model, bad key) are not
  retried (:class:`RequestRejected`); one that says the prompt is longer than
  the model's context is :class:`ContextLengthExceeded`, and so is a 5xx that
  says so (TensorZero wraps a provider's 400 in a 502);
* a call that times out is not retried either: the endpoint was reachable and
  busy, and a repeat would only spend the budget again;
* a 2xx answer that is not JSON, or not a chat completion, is
  :class:`EndpointBadResponse`.

Every failure is a :class:`ModelError` subclass (model/errors.py) naming the
endpoint URL and the model, and carries the :class:`CallRecord` of the attempts
made so far. What a call is sent with (:class:`Sampling`, :class:`RetryPolicy`,
the key) is in model/call_settings.py; what it gives back (:class:`ModelReply`,
:class:`CallRecord`) in model/records.py.

The API key is read from the environment variable *named* by ``api_key_env``
and handed to the SDK; this module never prints, logs or keeps it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar
from urllib.parse import parse_qsl

import httpx

from pytest_agentgym.model.call_settings import RetryPolicy, Sampling, read_api_key
from pytest_agentgym.model.errors import (  # re-exported: the client's errors
    ContextLengthExceeded,
    EndpointBadResponse,
    EndpointDown,
    EndpointTimeout,
    ModelError,
    RequestRejected,
    StatusAnswer,
    context_too_long,
    one_line,
    retry_after_seconds,
    server_message,
)
from pytest_agentgym.model.records import CallRecord, ModelReply
from pytest_agentgym.model.token_data import chat_token_data
from pytest_agentgym.transport.keepalive import KeepAliveTransport
from pytest_agentgym.transport.route import RawAnswer, Route, encode_json

__all__ = [
    "ContextLengthExceeded", "EndpointBadResponse", "EndpointClient", "EndpointDown",
    "EndpointTimeout", "ModelError", "RequestRejected",
]

#: The chat completions path under the endpoint's base URL.
CHAT_PATH = "/chat/completions"

_T = TypeVar("_T")  # what a call's answer is read as


# --------------------------------------------------------------------------- client


@dataclass
class _Attempts:
    """Mutable bookkeeping of one turn, turned into a CallRecord at the end."""

    started: float
    count: int = 0
    reasons: list[str] = field(default_factory=list)

    def record(self, prompt_tokens: int | None = None, completion_tokens: int | None = None) -> CallRecord:
        return CallRecord(
            latency_s=time.monotonic() - self.started,
            attempts=self.count,
            retry_reasons=tuple(self.reasons),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )


class EndpointClient:
    """Chat completions (and other POSTs) against one OpenAI-compatible endpoint.

    ``base_url`` is the URL the OpenAI paths hang off (``.../v1``, or ``<gateway>/openai/v1``
    for TensorZero). ``http_client`` (an ``httpx.AsyncClient``) lets unit tests inject a
    transport; otherwise the client is an ``httpx.AsyncClient`` over :class:`~pytest_agentgym.
    transport.keepalive.KeepAliveTransport`. Use as ``async with EndpointClient(...)``, or call :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        sampling: Sampling | None = None,
        request_timeout: float = 120.0,
        turn_budget: float | None = None,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if request_timeout <= 0:
            raise ValueError(f"request_timeout must be positive, got {request_timeout}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        #: the variable's name (never the key): what an in-process verifiers rollout reads it from
        self.api_key_env = api_key_env
        self.sampling = sampling or Sampling()
        self.request_timeout = float(request_timeout)
        #: default outer budget of one turn; by default room for every retry
        self.turn_budget = float(turn_budget) if turn_budget is not None else None
        self.retry = retry or RetryPolicy()
        self._rng = random.Random()
        self._params_of: dict[int, tuple[Sampling, dict[str, Any]]] = {}
        lean = None
        if http_client is None:  # one long-lived client over the lean keep-alive transport
            lean = KeepAliveTransport()
            http_client = httpx.AsyncClient(transport=lean, timeout=self.request_timeout)
        self._http = http_client
        self._api_key = _Secret(read_api_key(api_key_env))
        self._sdk_client: Any = None
        #: The direct route for calls to a plain http:// endpoint (see _post); None
        #: sends them through the SDK (https://, a query in the URL, an injected client).
        self._route = _direct_route(lean, self.base_url, self._api_key)
        self._lean, self._root_route = lean, None  # the route to root_url, made on first use

    @property
    def _sdk(self) -> Any:
        """The SDK's ``AsyncOpenAI`` over this client's HTTP client, made (and ``openai``
        imported, about 0.8 s) the first time a call goes through it."""
        if self._sdk_client is None:
            from openai import AsyncOpenAI

            base, _, query = self.base_url.partition("?")  # the SDK would append paths after a query
            self._sdk_client = AsyncOpenAI(
                base_url=base, default_query=dict(parse_qsl(query, keep_blank_values=True)) or None,
                api_key=self._api_key.value,
                max_retries=0,
                timeout=self.request_timeout,
                http_client=self._http,
            )
        return self._sdk_client

    def __repr__(self) -> str:  # no key in here, ever
        return f"EndpointClient(base_url={self.base_url!r}, model={self.model!r})"

    async def __aenter__(self) -> "EndpointClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._sdk_client is not None:
            await self._sdk_client.close()
        else:
            await self._http.aclose()

    def _default_budget(self) -> float:
        if self.turn_budget is not None:
            return self.turn_budget
        waits = sum(self.retry.backoff(n, random.Random(0)) * 1.1 for n in range(1, self.retry.retries + 1))
        return self.request_timeout * (self.retry.retries + 1) + waits

    async def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        sampling: Sampling | None = None,
        budget: float | None = None,
    ) -> ModelReply:
        """Ask for the next assistant message.

        ``budget`` (seconds) overrides the client's ``turn_budget`` for this
        call, e.g. with what is left of an episode's time. Raises a
        :class:`ModelError` subclass on failure.
        """
        # The request body, prepared once: a plain dict that the SDK's lower-level
        # post() serialises as it is. chat.completions.create() would walk it through
        # its TypedDict transform (async_maybe_transform) on every call, at a cost
        # that grows with the conversation (a quarter millisecond per message).
        body = {"model": self.model, "messages": list(messages), **self._params(sampling or self.sampling)}
        return await self._call(CHAT_PATH, body, budget, self._reply)

    async def post_json(self, path: str, body: dict[str, Any], *, budget: float | None = None,
                        at_root: bool = False) -> tuple[dict[str, Any], CallRecord]:
        """POST ``body`` to ``path`` under the base URL (``at_root``: under the server's root,
        :attr:`root_url`, as vLLM's ``/tokenize``), with the retries, budget and errors of
        :meth:`chat`; the answer's JSON object and the call's record. A 2xx answer that is
        not a JSON object is :class:`EndpointBadResponse`."""
        return await self._call(path, body, budget, self._json_object, at_root=at_root)

    @property
    def root_url(self) -> str:
        """The server's root: the base URL without its query and its trailing ``/v1``."""
        base = self.base_url.partition("?")[0]
        return base[:-3] if base.endswith("/v1") else base

    async def _call(self, path: str, body: dict[str, Any], budget: float | None,
                    read: Callable[[Any, _Attempts], _T], *, at_root: bool = False) -> _T:
        """One POST inside a turn budget, retried as the module's docstring says; ``read``
        turns the 2xx answer into the result."""
        timed_out, unreachable, refused = self._failures()
        turn_budget = budget if budget is not None else self._default_budget()
        state = _Attempts(started=time.monotonic())
        deadline = state.started + turn_budget

        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EndpointTimeout(self._budget_spent(turn_budget, state), url=self.base_url,
                                      model=self.model, record=state.record())
            call_timeout = min(self.request_timeout, remaining)
            state.count += 1
            try:
                response = await self._post(path, body, call_timeout, at_root)
            except timed_out:
                limit = ("the per-turn budget" if call_timeout < self.request_timeout
                         else "the request timeout")
                raise EndpointTimeout(
                    f"no answer within {call_timeout:.1f} s ({limit}; attempt {state.count}); "
                    f"the model may be overloaded or generating very long replies: raise "
                    f"model.request_timeout or lower sampling.max_tokens",
                    url=self.base_url, model=self.model, record=state.record()) from None
            except unreachable as exc:
                reason = f"connection error: {_cause_name(exc)}"
                wait = None
                down = True
            except refused as exc:
                down = False
                status = exc.status_code
                if status == 429:
                    retry_after = retry_after_seconds(exc.response.headers)
                    reason = (f"HTTP 429 (Retry-After {retry_after:.1f} s)" if retry_after is not None
                              else "HTTP 429")
                    wait = retry_after
                elif status >= 500 and not context_too_long(exc):
                    detail = server_message(exc)
                    reason = f"HTTP {status}: {detail[:200]}" if detail else f"HTTP {status}"
                    wait = None
                else:
                    raise self._rejected(exc, state) from None
            else:
                return read(response, state)

            # a retryable failure: retry, or give up with EndpointDown / EndpointTimeout
            retry_number = len(state.reasons) + 1
            if retry_number > self.retry.retries:
                state.reasons.append(reason)
                raise EndpointDown(
                    f"gave up after {state.count} attempt(s): {'; '.join(state.reasons)}; "
                    f"is the server running and healthy?",
                    url=self.base_url, model=self.model, record=state.record(), unreachable=down)
            if wait is None:
                wait = self.retry.backoff(retry_number, self._rng)
            remaining = deadline - time.monotonic()
            if wait >= remaining:
                state.reasons.append(reason)
                raise EndpointTimeout(
                    f"after {reason} on attempt {state.count}, waiting {wait:.1f} s before a retry "
                    f"would overrun the per-turn budget of {turn_budget:.1f} s "
                    f"({max(remaining, 0):.1f} s left)",
                    url=self.base_url, model=self.model, record=state.record(), unreachable=down)
            state.reasons.append(reason)
            await asyncio.sleep(wait)

    def _params(self, sampling: Sampling) -> dict[str, Any]:
        """``sampling.request_params()``, made once per Sampling object: the engine hands every
        turn of an episode the same one (engine/model.py caches them), and building the dict
        was a tenth of this method's cost per turn. Keyed by identity, the object kept beside its
        params so that its id is not reused while the entry lives; a few entries only."""
        entry = self._params_of.get(id(sampling))
        if entry is None or entry[0] is not sampling:
            if len(self._params_of) >= 64:
                self._params_of.clear()
            entry = self._params_of[id(sampling)] = (sampling, sampling.request_params())
        return entry[1]

    def _failures(self) -> tuple[tuple[type[BaseException], ...], ...]:
        """What a failed request raises, as (timed out, unreachable, a non-2xx answer):
        the transport's httpx errors and :class:`StatusAnswer` on the direct route,
        the SDK's wrappings of them through the SDK."""
        if self._route is not None:
            return (httpx.TimeoutException,), (httpx.TransportError,), (StatusAnswer,)
        import openai

        return (openai.APITimeoutError,), (openai.APIConnectionError,), (openai.APIStatusError,)

    async def _post(self, path: str, body: dict[str, Any], timeout: float,
                    at_root: bool = False) -> httpx.Response | RawAnswer:
        """One POST request. Through the direct route when there is one:
        the SDK's ``post()`` rebuilds URL, headers and options for every call, which
        cost more CPU than the exchange itself; the route sends the SDK's key, user agent
        and content headers with a body encoded here. A non-2xx answer is
        raised as :class:`StatusAnswer`, read as the SDK's ``APIStatusError`` is."""
        if self._route is None:
            url = self.root_url + path if at_root else path  # the SDK keeps an absolute URL as it is
            try:
                return await self._sdk.post(url, cast_to=httpx.Response, body=body, options={"timeout": timeout})
            except UnicodeEncodeError:  # the SDK cannot encode half a surrogate pair (a cut reply)
                return await self._sdk.post(url, cast_to=httpx.Response, body=_whole_characters(body),
                                            options={"timeout": timeout})
        if at_root and self._root_route is None:
            self._root_route = _direct_route(self._lean, self.root_url, self._api_key)
        route = self._root_route if at_root else self._route
        answer = await route.request("POST", path, encode_json(body), timeout)  # type: ignore[union-attr]
        if not 200 <= answer.status_code < 300:
            raise StatusAnswer(answer)
        return answer

    def _rejected(self, exc: Any, state: _Attempts) -> RequestRejected:
        """The error for a refused request: :class:`ContextLengthExceeded` when the
        server says the prompt is too long, else :class:`RequestRejected`."""
        status, text = exc.status_code, server_message(exc)
        if context_too_long(exc):
            return ContextLengthExceeded(
                f"the conversation no longer fits the model's context (HTTP {status}: "
                f"{text})", status_code=status, server_message=text,
                url=self.base_url, model=self.model, record=state.record())
        return RequestRejected(
            f"request rejected with HTTP {status}: {text}",
            status_code=status, server_message=text,
            url=self.base_url, model=self.model, record=state.record())

    def _bad(self, response: Any, state: _Attempts, problem: str) -> EndpointBadResponse:
        kind = response.headers.get("content-type", "no content-type")
        return EndpointBadResponse(
            f"HTTP {response.status_code} ({kind}) {problem}: {one_line(response.text)[:200]!r}; "
            "is this an OpenAI-compatible endpoint?", url=self.base_url, model=self.model, record=state.record())

    def _json_object(self, response: Any, state: _Attempts,
                     other: str = "body is not a JSON object") -> tuple[dict[str, Any], CallRecord]:
        """A 2xx answer's JSON object and the record, or :class:`EndpointBadResponse`."""
        try:
            body = json.loads(response.content)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            raise self._bad(response, state, "body is not JSON") from None
        if not isinstance(body, dict):
            raise self._bad(response, state, other)
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return body, state.record(_token(usage, "prompt_tokens"), _token(usage, "completion_tokens"))

    def _reply(self, response: httpx.Response | RawAnswer, state: _Attempts) -> ModelReply:
        """Read a 2xx answer as a chat completion, or raise :class:`EndpointBadResponse`."""
        body, record = self._json_object(response, state, "answer has no choices")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise self._bad(response, state, "answer has no choices")
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(content, (str, type(None))):
            raise self._bad(response, state, "answer has no choices[0].message with text content")
        finish, model = choice.get("finish_reason"), body.get("model")
        return ModelReply(
            text=content or "", record=record,
            finish_reason=finish if isinstance(finish, str) else None,
            model=model if isinstance(model, str) else None,
            token_data=chat_token_data(body, choice),
        )

    @staticmethod
    def _budget_spent(turn_budget: float, state: _Attempts) -> str:
        tried = f"; retried after: {'; '.join(state.reasons)}" if state.reasons else ""
        return f"the per-turn budget of {turn_budget:.1f} s ran out after {state.count} attempt(s){tried}"


# --------------------------------------------------------------------------- helpers


class _Secret:
    """An API key that does not show in a repr (or in ``vars()`` of its holder)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<hidden>"


def _openai_version() -> str:
    """The installed ``openai``'s version, read without importing it."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("openai")
    except PackageNotFoundError:
        return "unknown"


def _whole_characters(value: Any) -> Any:
    """``value`` with each half of a surrogate pair in its strings replaced by U+FFFD, for the
    SDK, which encodes a body as strict UTF-8 (the direct route sends the half as its JSON
    escape, see jsonl.json_utf8). Only the request changes: the reply kept in the turn stays
    as the model gave it."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {key: _whole_characters(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_whole_characters(item) for item in value]
    return value


def _direct_route(lean: Any, base_url: str, api_key: "_Secret") -> "Route | None":
    """A :class:`~pytest_agentgym.transport.route.Route` to ``base_url`` with the headers the
    SDK sends (key, user agent, JSON), or None where the SDK must send (see ``EndpointClient._post``)."""
    if lean is None or not Route.usable(base_url):
        return None
    headers = {"Authorization": f"Bearer {api_key.value}", "Content-Type": "application/json",
               "User-Agent": f"AsyncOpenAI/Python {_openai_version()}"}
    return Route(lean, base_url, headers)


def _cause_name(exc: BaseException) -> str:
    """The transport's exception name: the SDK wraps it, the direct route raises it as it is."""
    if isinstance(exc, httpx.TransportError):
        return type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    return type(cause).__name__ if cause is not None else type(exc).__name__


def _token(usage: Mapping[str, Any], key: str) -> int | None:
    """A token count from ``usage``; None when it is missing or not an integer."""
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
