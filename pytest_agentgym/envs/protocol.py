"""Async client for AgentGym environment servers, both wire dialects.

"id" dialect (BabyAI, TextCraft, ALFWorld, SciWorld, Maze, Wordle):
``POST /create`` answers ``{"id": n}``; bodies carry ``"id"``; GETs use ``?id=``.

"env_idx" dialect (WebShop, SQLGym): ``POST /create`` answers a bare JSON
int (WebArena: ``{"env_idx": n}``); bodies carry ``"env_idx"``; GETs use
``?env_idx=``. ``/reset`` answers ``[observation, null]`` on WebShop and SQLGym;
the client returns that list as it is and the adapter reads it.

Servers report most failures as HTTP 200 with ``{"error": "..."}``; the
env_idx servers have no error handling at all, so their failures arrive as
HTTP 500 ``Internal Server Error``. This client turns each way a call can go
wrong into a distinct subclass of :class:`EnvServerError` that names the
server, the endpoint, the environment and the env id:

==========================  ==============================================
what happened               raised
==========================  ==============================================
``{"error": ...}`` body     :class:`EnvErrorResponse` (``.server_message``)
body is not the JSON the    :class:`EnvBadResponse`
endpoint returns
HTTP status not 2xx         :class:`EnvHTTPError` (``.status_code``)
refused / dropped           :class:`EnvUnreachable`
connection
no answer in time           :class:`EnvTimeout`
==========================  ==============================================

HTTP 503 is retried a few times (the original WebShop and SQLGym clients retry
it five times) before it is reported.

Every request is listed, while it is in flight, in the
:class:`~pytest_agentgym.envs.watch.RequestWatch` of whoever opened
:func:`~pytest_agentgym.envs.watch.watch_requests` around the work.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from pytest_agentgym.envs.spec import DEFAULT_REQUEST_TIMEOUT
from pytest_agentgym.envs.watch import in_flight
from pytest_agentgym.transport.keepalive import KeepAliveTransport
from pytest_agentgym.transport.route import RawAnswer, Route, encode_json

Dialect = Literal["id", "env_idx"]
_DIALECTS = ("id", "env_idx")


class EnvServerError(Exception):
    """A call to an environment server failed. Always an infrastructure error."""

    def __init__(
        self,
        message: str,
        *,
        url: str,
        endpoint: str,
        env: str,
        env_id: int | None = None,
    ) -> None:
        self.detail = message
        self.url = url
        self.endpoint = endpoint
        self.env = env
        self.env_id = env_id
        where = f"environment server {env} at {url}: {endpoint}"
        if env_id is not None:
            where += f" (env id {env_id})"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> Any:
        # Keep the keyword-only fields when the error crosses a process boundary
        # (pytest-xdist workers pickle exceptions).
        return (_rebuild, (type(self), self.detail, self.__dict__.copy()))


def _rebuild(cls: type, detail: str, state: dict[str, Any]) -> EnvServerError:
    error = cls.__new__(cls)
    EnvServerError.__init__(
        error,
        detail,
        url=state["url"],
        endpoint=state["endpoint"],
        env=state["env"],
        env_id=state["env_id"],
    )
    error.__dict__.update(state)
    return error


class EnvErrorResponse(EnvServerError):
    """The server answered with an ``{"error": ...}`` body (usually HTTP 200).

    ``server_message`` is the server's own text, e.g. ``"The task with
    environment 3 has finished."``.
    """

    def __init__(self, message: str, *, server_message: Any = None, **kwargs: Any) -> None:
        self.server_message = server_message
        super().__init__(message, **kwargs)


class EnvBadResponse(EnvServerError):
    """The server answered, but not with the JSON this endpoint returns."""


class EnvHTTPError(EnvServerError):
    """The server answered with an HTTP status outside 2xx (usually 4xx or 5xx)."""

    def __init__(self, message: str, *, status_code: int, **kwargs: Any) -> None:
        self.status_code = status_code
        super().__init__(message, **kwargs)


class EnvUnreachable(EnvServerError):
    """No connection could be made (refused, reset, DNS), or the connection was
    dropped before an answer came (the server died mid-request)."""


class EnvTimeout(EnvServerError):
    """The server did not answer within the client's timeout."""


#: Hints added to an HTTP error, by status.
_STATUS_HINTS = {
    404: "the server has no such endpoint; is this the right server for this environment "
    "(check the port and path prefix in envs.yaml)?",
    405: "the server does not accept this method here; is this the right server?",
    422: "the server rejected the request body; does the environment's dialect "
    "(id or env_idx) in envs.yaml match this server?",
    500: "the server failed while handling the request; its log has the traceback "
    "(an unknown env id gives this on WebShop and SQLGym)",
    503: "the server is busy or starting; it kept answering 503",
}


class EnvClient:
    """One environment server, reached at ``base_url`` (which includes any path prefix
    such as ``/maze``).

    ``timeout`` bounds each request, in seconds. ``retries_503`` is how many
    times an HTTP 503 answer is retried (after ``retry_delay`` seconds) before
    it is raised. ``transport`` lets unit tests inject an
    ``httpx.MockTransport``; everything else talks real HTTP.
    """

    def __init__(
        self,
        base_url: str,
        *,
        env: str,
        dialect: Dialect = "id",
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retries_503: int = 4,
        retry_delay: float = 0.1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if dialect not in _DIALECTS:
            raise ValueError(
                f"environment {env}: dialect {dialect!r} is not one of {', '.join(_DIALECTS)}"
            )
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"environment {env}: server URL {base_url!r} must start with http:// or https://"
            )
        if timeout <= 0:
            raise ValueError(f"environment {env}: timeout must be positive, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.env = env
        self.dialect: Dialect = dialect
        self.timeout = float(timeout)
        self.retries_503 = max(0, int(retries_503))
        self.retry_delay = retry_delay
        #: The whole answer of the last ``/create`` (TextCraft's carries an observation).
        self.last_create: Any = None
        self._key = "id" if dialect == "id" else "env_idx"
        # One long-lived client over the lean keep-alive transport (pytest_agentgym.transport):
        # its cost per request does not grow with the number of episodes in flight. Plain
        # http:// servers are reached through its direct route (no httpx Request/Response
        # per call); https:// and an injected transport (unit tests) go through httpx.
        lean = KeepAliveTransport() if transport is None else None
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, transport=transport or lean)
        self._route = Route(lean, self.base_url) if lean is not None and Route.usable(self.base_url) else None

    @property
    def id_key(self) -> str:
        """The field that carries the env id: ``"id"`` or ``"env_idx"``."""
        return self._key

    async def __aenter__(self) -> "EnvClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the operations -------------------------------------------------------

    async def create(self, body: dict[str, Any] | None = None) -> int:
        """Create an environment instance and return its id.

        id dialect: ``{"id": n, ...}``; env_idx dialect: a bare int, or WebArena's
        ``{"env_idx": n}``. Anything else is an :class:`EnvBadResponse`.
        """
        data = await self.request("POST", "/create", json=body)
        self.last_create = data
        if self.dialect == "env_idx":
            if isinstance(data, dict) and _is_int(data.get("env_idx")):
                return data["env_idx"]  # WebArena's variant
            if _is_int(data):
                return data
            raise self.bad_answer(
                "/create", f'expected a bare JSON int or {{"env_idx": <int>}}, got {_short(repr(data))}'
            )
        if isinstance(data, dict) and _is_int(data.get("id")):
            return data["id"]
        raise self.bad_answer("/create", f'expected {{"id": <int>, ...}}, got {_short(repr(data))}')

    async def reset(self, env_id: int, payload: dict[str, Any]) -> Any:
        """``POST /reset`` with the env id plus the adapter's payload (task index...).

        Returns the decoded answer as it is: a dict on id-dialect servers,
        ``[observation, null]`` on WebShop and SQLGym.
        """
        return await self.request(
            "POST", "/reset", json={self._key: env_id, **payload}, env_id=env_id
        )

    async def step(self, env_id: int, action: str) -> Any:
        return await self.request(
            "POST", "/step", json={self._key: env_id, "action": action}, env_id=env_id
        )

    async def observation(self, env_id: int) -> Any:
        return await self.request(
            "GET", "/observation", params={self._key: env_id}, env_id=env_id
        )

    async def close(self, env_id: int) -> Any:
        """``POST /close``; only some servers have it (the adapter knows which)."""
        return await self.request("POST", "/close", json={self._key: env_id}, env_id=env_id)

    async def get(self, endpoint: str, env_id: int | None = None) -> Any:
        """Any other GET endpoint, e.g. ``/filtered_vocab``, ``/available_actions``."""
        params = {self._key: env_id} if env_id is not None else None
        return await self.request("GET", endpoint, params=params, env_id=env_id)

    def release(self, env_id: int) -> None:
        """The engine is done with the episode on ``env_id``. Nothing to do with one server;
        a client over replicas (envs/replicas.py) counts it off its replica's load."""

    def abandon_open(self) -> None:
        """The episode being opened failed after its create, before the engine got its env id.
        Nothing to do with one server (see envs/replicas.py)."""

    def bad_answer(self, endpoint: str, message: str, env_id: int | None = None) -> EnvBadResponse:
        """The :class:`EnvBadResponse` for an answer of ``endpoint`` that cannot be read,
        naming this server and ``env_id``."""
        return EnvBadResponse(message, url=self.base_url, endpoint=endpoint, env=self.env, env_id=env_id)

    # -- plumbing -------------------------------------------------------------

    async def request(
        self,
        method: str,
        endpoint: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        env_id: int | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON answer, or raise a typed error."""
        ctx = {"url": self.base_url, "endpoint": endpoint, "env": self.env, "env_id": env_id}
        with in_flight(ctx):
            return await self._exchange(method, endpoint, json, params, ctx)

    async def _exchange(self, method: str, endpoint: str, json: Any,
                        params: dict[str, Any] | None, ctx: dict[str, Any]) -> Any:
        for attempt in range(self.retries_503 + 1):
            response = await self._send(method, endpoint, json, params, ctx)
            if response.status_code != 503 or attempt == self.retries_503:
                break
            await asyncio.sleep(self.retry_delay)  # back-off before retrying a 503
        if not 200 <= response.status_code < 300:
            hint = _STATUS_HINTS.get(response.status_code)
            tries = f" after {self.retries_503 + 1} tries" if response.status_code == 503 else ""
            raise EnvHTTPError(
                f"HTTP {response.status_code}{tries}: {_short(response.text)}"
                + (f"; {hint}" if hint else ""),
                status_code=response.status_code,
                **ctx,
            )
        try:
            data = response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise EnvBadResponse(
                f"HTTP {response.status_code} body is not JSON: {_short(response.text)!r}", **ctx
            ) from exc
        if isinstance(data, dict) and "error" in data:
            raise EnvErrorResponse(
                f"server says: {data['error']!r}", server_message=data["error"], **ctx
            )
        return data

    async def _send(
        self,
        method: str,
        endpoint: str,
        json: Any,
        params: dict[str, Any] | None,
        ctx: dict[str, Any],
    ) -> httpx.Response | RawAnswer:
        try:
            if self._route is None:
                return await self._http.request(method, endpoint, json=json, params=params)
            target = f"{endpoint}?{urlencode(params)}" if params else endpoint
            return await self._route.request(method, target, None if json is None else encode_json(json), self.timeout)
        except httpx.TimeoutException as exc:
            phase = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting"
            raise EnvTimeout(
                f"no answer within {self.timeout:g} s ({phase}, {type(exc).__name__}), the "
                "per-request timeout; is the server overloaded or stuck? its log may say why; "
                f"if it is only slow, raise envs.{self.env}.request_timeout",
                **ctx,
            ) from exc
        except httpx.ConnectError as exc:
            raise EnvUnreachable(
                f"cannot connect ({exc or type(exc).__name__}); is the server running? "
                "`pytest-agentgym envs` shows what is configured and what answers",
                **ctx,
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise EnvUnreachable(
                f"the connection was dropped before an answer ({type(exc).__name__}: {exc}); "
                "did the server crash or restart? check its log",
                **ctx,
            ) from exc
        except httpx.TransportError as exc:
            raise EnvUnreachable(
                f"request failed ({type(exc).__name__}: {exc}); check the server URL",
                **ctx,
            ) from exc


def _is_int(value: Any) -> bool:
    """A JSON integer (``true``/``false`` decode to bool, which is not an id)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any, limit: int = 200) -> str:
    """``value`` as one line (whitespace runs collapsed), cut to ``limit`` characters."""
    text = " ".join((value if isinstance(value, str) else repr(value)).split())
    return text if len(text) <= limit else text[:limit] + "..."
