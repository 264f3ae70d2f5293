"""A lean way in for the hot requests of an embedded server, answered byte for byte as
its FastAPI app answers them.

Why: with many rollouts in flight the environment server is the queue, and most of
its CPU went to the framework, not the game: Starlette's middleware stack, routing,
FastAPI's request object and dependency solving, and a thread hop for every ``def``
handler (benchmarks/servers/server_cost.py measures it per route). The hot requests of a
rollout (``/create``, ``/reset``, ``/step``, ``/observation``) need none of that.

How: :class:`FastPath` is an ASGI app in front of the FastAPI app. When it starts it
reads the app's routes and keeps, per (method, path), the ones it can serve exactly as
FastAPI would (:func:`_plain`: no path parameters, dependencies, headers or cookies,
at most one JSON body model, the default response class). For a request to one of
them it does what FastAPI's request handler does, with FastAPI's own pieces: the
query through ``request_params_to_args``, the JSON body through ``json.loads`` and
``request_body_to_args`` (the route's pydantic fields), the endpoint called as FastAPI
calls it (``async def`` on the event loop, ``def`` in Starlette's thread pool), the
result through FastAPI's ``serialize_response`` into the same Starlette response
class, and exceptions through the app's own exception handlers. Only well-formed
requests are served here: whatever it would have to second-guess (another content
type, an empty or malformed body, a value that fails validation, a repeated, unknown
or missing required query parameter, any other method or path) goes to the FastAPI
app unchanged, with the body it already read handed back, so every error answer
(FastAPI's 422 bodies, 404, 405, the 307 of a trailing slash) is FastAPI's own.

What stays byte-identical, and is tested against the app with this layer switched
off (``pytest-agentgym serve NAME --no-fast-path``; tests/servers/test_fastpath_wire.py):
status line, headers (uvicorn's ``date`` and ``server`` first, then
``content-length`` and ``content-type``), body, and an unhandled exception's
``500 Internal Server Error`` followed by a closed connection.

``GET /embedded/fastpath`` (only with this layer) counts the requests served here
and those handed to FastAPI, per route.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from fastapi import FastAPI
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.datastructures import DefaultPlaceholder
from fastapi.routing import APIRoute, serialize_response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Match

from pytest_agentgym.servers.embedded.limits import content_length

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: the route of this layer's own counts (not in any original server)
STATS_PATH = "/embedded/fastpath"
#: larger bodies go to FastAPI (no hot request comes near it)
MAX_BODY = 1 << 20
JSON_TYPE = b"application/json"

# FastAPI's serialize_response writes JSON bytes itself (pydantic's dump_json) since
# 0.12x; before that it returned data for the route's response class to render.
_DUMP_JSON = "dump_json" in inspect.signature(serialize_response).parameters
_EMBED_ARG = "embed_body_fields" in inspect.signature(request_body_to_args).parameters


class _HandOver(Exception):
    """The request is not one this layer serves: FastAPI answers it."""


@dataclass
class _Plan:
    """How to serve one route for one method: what FastAPI's handler would do, prepared once."""

    label: str
    route: APIRoute
    call: Callable[..., Any]
    is_coroutine: bool
    query: list[Any]
    body: list[Any]
    #: the largest body served here (a route behind limits.BodyLimit: its limit, which it
    #: then answers itself)
    max_body: int = 0
    served: int = 0
    handed_over: int = 0


def _plain(route: Any) -> bool:
    """Whether FastAPI's handler does for ``route`` nothing beyond what this layer repeats:
    no path parameters, dependencies, headers, cookies or special parameters, at most one
    JSON body model (not embedded), a plain function, the default response class and
    serialization, status 200."""
    if not isinstance(route, APIRoute) or "{" in route.path:
        return False
    dep = route.dependant
    if (dep.path_params or dep.header_params or dep.cookie_params or dep.dependencies
            or dep.request_param_name or dep.websocket_param_name or dep.response_param_name
            or dep.background_tasks_param_name or dep.security_scopes_param_name
            or getattr(dep, "http_connection_param_name", None)):
        return False
    call = dep.call
    if not inspect.isfunction(call) or inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call):
        return False
    if dep.body_params and (len(dep.body_params) > 1 or getattr(route, "_embed_body_fields", True)
                            or type(dep.body_params[0].field_info).__name__ != "Body"):  # Form, File
        return False
    return (isinstance(route.response_class, DefaultPlaceholder) and route.response_model_include is None
            and route.response_model_exclude is None and not route.response_model_exclude_unset
            and not route.response_model_exclude_defaults and not route.response_model_exclude_none
            and route.response_model_by_alias and (route.status_code or 200) == 200)


def _plans(app: FastAPI) -> dict[tuple[str, str], _Plan]:
    """(method, path) -> plan, for the plain routes (:func:`_plain`) that Starlette's router
    would pick for that method and path (no earlier route matches it first)."""
    plans: dict[tuple[str, str], _Plan] = {}
    routes = list(app.router.routes)
    for index, route in enumerate(routes):
        if not _plain(route):
            continue
        for method in sorted(route.methods & {"GET", "POST"}):
            probe = {"type": "http", "path": route.path, "root_path": "", "method": method}
            if (method, route.path) in plans or any(
                    earlier.matches(probe)[0] == Match.FULL for earlier in routes[:index]):
                continue
            call = route.dependant.call
            plans[(method, route.path)] = _Plan(
                f"{method} {route.path}", route, call, inspect.iscoroutinefunction(call),
                list(route.dependant.query_params), list(route.dependant.body_params),
                min(MAX_BODY, getattr(route.app, "max_body", MAX_BODY)))
    return plans


def usable(app: FastAPI) -> str | None:
    """Why this layer cannot stand in front of ``app`` (it would skip something the app
    does), or None. It then serves nothing and hands every request over."""
    if not (_EMBED_ARG and _DUMP_JSON):
        return "this FastAPI predates the request and response helpers the fast path reuses"
    if app.user_middleware:
        return "the app has middleware"
    if app.debug or app.root_path or app.dependency_overrides:
        return "the app runs in debug mode, under a root path or with dependency overrides"
    if 500 in app.exception_handlers or Exception in app.exception_handlers:
        return "the app has its own handler of unexpected exceptions"
    return None


class FastPath:
    """ASGI app: serves the well-formed requests of ``app``'s plain routes itself and hands
    every other request (and the lifespan) to ``app``. See the module's docstring."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.why_not = usable(app)
        self.plans = {} if self.why_not else _plans(app)
        self.handed_over = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plan = None
        if scope["type"] == "http" and not scope.get("root_path"):
            plan = self.plans.get((scope["method"], scope["path"]))
            if plan is None and scope["method"] == "GET" and scope["path"] == STATS_PATH:
                await JSONResponse(self.stats())(scope, receive, send)
                return
        if plan is None:
            if scope["type"] == "http":
                self.handed_over += 1
            await self.app(scope, receive, send)
            return
        try:
            values = self._query(plan, scope)
        except _HandOver:
            plan.handed_over += 1
            await self.app(scope, receive, send)
            return
        if plan.body:
            declared = content_length(scope)
            if declared is not None and declared > plan.max_body:  # the app's answer, unread
                plan.handed_over += 1
                await self.app(scope, receive, send)
                return
            body, more, last = await _read_body(receive, plan.max_body)
            try:
                if more is not None:  # too large, or the client went away: FastAPI decides
                    raise _HandOver()
                values.update(await self._body(plan, scope, body))
            except _HandOver:
                plan.handed_over += 1
                await self.app(scope, _replay(body, more, last, receive), send)
                return
        plan.served += 1
        await self._respond(plan, values, scope, receive, send)

    # -- the request -----------------------------------------------------------

    @staticmethod
    def _query(plan: _Plan, scope: Scope) -> dict[str, Any]:
        if not plan.query:
            return {}
        params = QueryParams(scope["query_string"])
        names = [key for key, _ in params.multi_items()]
        if len(names) != len(set(names)) or not set(names) <= {f.alias for f in plan.query}:
            raise _HandOver()  # a repeated or unknown parameter: FastAPI's rules
        values, errors = request_params_to_args(plan.query, params)
        if errors:
            raise _HandOver()
        return values

    @staticmethod
    async def _body(plan: _Plan, scope: Scope, body: bytes) -> dict[str, Any]:
        types = [value for name, value in scope["headers"] if name == b"content-type"]
        if not body or len(types) != 1 or types[0].lower() != JSON_TYPE:
            raise _HandOver()
        try:
            received = json.loads(body)  # what Starlette's Request.json() does
        except ValueError:
            raise _HandOver() from None
        values, errors = await request_body_to_args(plan.body, received, embed_body_fields=False)
        if errors:
            raise _HandOver()
        return values

    # -- the answer ------------------------------------------------------------

    async def _respond(self, plan: _Plan, values: dict[str, Any], scope: Scope, receive: Receive,
                       send: Send) -> None:
        try:
            if plan.is_coroutine:
                raw = await plan.call(**values)
            else:
                raw = await run_in_threadpool(plan.call, **values)
            if isinstance(raw, Response):
                response = raw
            elif plan.route.response_field is not None:
                content = await serialize_response(field=plan.route.response_field, response_content=raw,
                                                   is_coroutine=True, dump_json=True)
                response = Response(content=content, media_type="application/json")
            else:
                response = JSONResponse(await serialize_response(response_content=raw))
        except Exception as exc:  # noqa: BLE001 - answered as the app's handlers answer it
            await self._failed(exc, scope, receive, send)
            return
        await response(scope, receive, send)

    async def _failed(self, exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        """What Starlette's exception handling does with ``exc``: the app's handler for it
        (by status code for an HTTPException, else by class) answers; without one,
        Starlette's plain 500, and the exception goes on to uvicorn (which logs it and
        closes the connection)."""
        handlers = self.app.exception_handlers
        handler = handlers.get(exc.status_code) if isinstance(exc, HTTPException) else None
        if handler is None:
            handler = next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)
        if handler is None:
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise exc
        request = Request({**scope, "app": self.app}, receive, send)
        if inspect.iscoroutinefunction(handler):
            response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        if response is not None:
            await response(scope, receive, send)

    def stats(self) -> dict[str, Any]:
        """``GET /embedded/fastpath``: requests served here and handed to FastAPI, per route."""
        return {
            "fast_path": self.why_not is None,
            "why_not": self.why_not,
            "routes": {plan.label: {"served": plan.served, "handed_over": plan.handed_over}
                       for plan in self.plans.values()},
            "other_requests": self.handed_over,
        }


async def _read_body(receive: Receive, max_body: int) -> tuple[bytes, bool | None, Message | None]:
    """The request body: (bytes, None, None) when it was read whole; otherwise what was
    read, whether more follows and the last message, for :func:`_replay`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False, message
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None, None
        if size > max_body:
            return b"".join(chunks), True, None


def _replay(body: bytes, more: bool | None, last: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that first gives back what this layer read, then the real one's messages."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": bool(more)}]
    if last is not None:
        pending.append(last)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
