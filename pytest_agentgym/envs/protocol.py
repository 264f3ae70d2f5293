"""Async client for AgentGym environment servers, both wire dialects.

"id" dialect (BabyAI, TextCraft, ALFWorld, SciWorld, Maze, Wordle):
``POST /create`` answers ``{"id": n}``; bodies carry ``"id"``; GETs use ``?id=``.

"env_idx" dialect (WebShop, SQLGym): ``POST /create`` answers a bare JSON
int (WebArena: ``{"env_idx": n}``); bodies carry ``"env_idx"``; GETs use
``?env_idx=``.

Servers report most failures as HTTP 200 with ``{"error": "..."}``; this client
turns that, and every other way a call can go wrong, into a distinct subclass of
:class:`EnvServerError` that names the server, the endpoint, the environment and
the env id.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

Dialect = Literal["id", "env_idx"]


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


class EnvErrorResponse(EnvServerError):
    """The server answered with an ``{"error": ...}`` body (usually HTTP 200)."""


class EnvBadResponse(EnvServerError):
    """The server answered, but not with the JSON this endpoint returns."""


class EnvHTTPError(EnvServerError):
    """The server answered with an HTTP 4xx or 5xx status."""

    def __init__(self, message: str, *, status_code: int, **kwargs: Any) -> None:
        self.status_code = status_code
        super().__init__(message, **kwargs)


class EnvUnreachable(EnvServerError):
    """No connection could be made (refused, reset, DNS)."""


class EnvTimeout(EnvServerError):
    """The server did not answer within the client's timeout."""


class EnvClient:
    """One environment server, reached at ``base_url`` (which includes any path prefix
    such as ``/maze``).

    ``transport`` lets unit tests inject an ``httpx.MockTransport``; everything
    else talks real HTTP.
    """

    def __init__(
        self,
        base_url: str,
        *,
        env: str,
        dialect: Dialect = "id",
        timeout: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.env = env
        self.dialect = dialect
        self.timeout = timeout
        self._key = "id" if dialect == "id" else "env_idx"
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> "EnvClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the operations -------------------------------------------------------

    async def create(self, body: dict[str, Any] | None = None) -> int:
        """Create an environment instance and return its id."""
        data = await self.request("POST", "/create", json=body)
        if self.dialect == "env_idx":
            if isinstance(data, dict) and isinstance(data.get("env_idx"), int):
                return data["env_idx"]  # WebArena's variant
            if isinstance(data, int) and not isinstance(data, bool):
                return data
            raise self._bad("/create", f"expected a bare JSON int, got {_short(data)}")
        if isinstance(data, dict) and isinstance(data.get("id"), int):
            self.last_create = data
            return data["id"]
        raise self._bad("/create", f'expected {{"id": <int>}}, got {_short(data)}')

    async def reset(self, env_id: int, payload: dict[str, Any]) -> Any:
        """``POST /reset`` with the env id plus the adapter's payload (task index...)."""
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
        ctx = {"url": self.base_url, "endpoint": endpoint, "env": self.env, "env_id": env_id}
        try:
            response = await self._http.request(method, endpoint, json=json, params=params)
        except httpx.TimeoutException as exc:
            raise EnvTimeout(
                f"no answer within {self.timeout:g} s ({type(exc).__name__}); "
                "is the server overloaded or stuck?",
                **ctx,
            ) from exc
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise EnvUnreachable(
                f"cannot connect ({type(exc).__name__}: {exc}); is the server running? "
                "`pytest-agentgym envs` shows what is configured",
                **ctx,
            ) from exc
        if response.status_code >= 400:
            raise EnvHTTPError(
                f"HTTP {response.status_code}: {_short(response.text)}",
                status_code=response.status_code,
                **ctx,
            )
        try:
            data = response.json()
        except ValueError as exc:
            raise EnvBadResponse(
                f"HTTP {response.status_code} body is not JSON: {_short(response.text)}", **ctx
            ) from exc
        if isinstance(data, dict) and "error" in data:
            raise EnvErrorResponse(f"server says: {data['error']!r}", **ctx)
        return data

    def _bad(self, endpoint: str, message: str, env_id: int | None = None) -> EnvBadResponse:
        return EnvBadResponse(
            message, url=self.base_url, endpoint=endpoint, env=self.env, env_id=env_id
        )


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
