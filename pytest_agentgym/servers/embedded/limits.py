"""What every embedded server shares: a cap on open environments, and error texts
that say what was wrong.

**The cap.** AgentGym's servers keep every environment a client creates until the
process ends (several have no ``/close``; a client that dies never calls it), so a
long-lived server grows without bound. Each embedded server keeps at most a fixed
number of environments open: a module-level default, overridden by an environment
variable of the server's own (``AGENTGYM_<SERVER>_MAX_ENVS``) read when the app is
made. Past the cap a server either closes its least recently used environment that
no request is using (:class:`CappedEnvs`; the closed id then answers an error that
says so) or refuses the ``/create`` (SciWorld, where each environment is a JVM).
docs/servers.md lists each server's choice.

``GET /embedded/envs`` (under the environment's base URL: ``/maze/embedded/envs``)
is a route of the embedded servers only: how many environments are open, the cap,
the variable that sets it and what happens past it. No AgentGym client calls it.

**Errors.** :func:`explain` turns an exception a handler did not expect into a
sentence naming what was being done, the exception's type and, for a lookup, the
missing key; never an empty string or a bare number such as ``str(KeyError(0))``.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Annotated, Any, Callable, Generic, Iterator, Mapping, TypeVar

from pydantic import AfterValidator

V = TypeVar("V")

#: ids closed for the cap that a table still recognises (older ones get the plain
#: "not valid" answer); about 100 bytes each
REMEMBERED_CLOSURES = 4096

#: what ``GET /embedded/envs`` says happens past the cap, by policy
CLOSES_LRU = "the least recently used idle environment is closed"
REFUSES_CREATE = "POST /create is refused until an environment is closed"


def cap_from_env(variable: str, default: int, environ: Mapping[str, str] | None = None, *,
                 unit: str = "environments") -> int:
    """The cap set by ``variable`` (a whole number >= 1), or ``default`` when it is unset
    or empty. A bad value stops the server at start-up with a message naming it (and what
    the cap counts: ``unit``)."""
    raw = (os.environ if environ is None else environ).get(variable, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(f"{variable}={raw!r}: expected a whole number of {unit}, 1 or more "
                         f"(the most this server keeps open at once; default {default})")
    return value


async def on_worker(worker: Any, call: Callable[[], Any], doing: str, *,
                    refused: tuple[type[BaseException], ...], log: Any, server: str) -> Any:
    """``call`` on ``worker`` (the one thread a server does its work on), for a route of a
    server whose original fails with an exception (HTTP 500): an exception of ``refused``
    (a request the server turns down, e.g. an unknown env) answers 500 with its message,
    any other is logged with its traceback and answers 500 saying what failed
    (:func:`explain`; ``doing``: what the call was; the log names ``server``). FastAPI's JSONResponse, imported here
    so that this module stays importable without it."""
    import asyncio

    from fastapi.responses import JSONResponse

    try:
        return await asyncio.get_running_loop().run_in_executor(worker, call)
    except refused as exc:
        return JSONResponse({"detail": str(exc)}, status_code=500)
    except Exception as exc:  # noqa: BLE001 - the original's 500, but saying why
        log.exception("%s: %s failed", server, doing)
        return JSONResponse({"detail": explain(exc, doing)}, status_code=500)


def explain(exc: BaseException, doing: str) -> str:
    """A message for ``exc``, raised while ``doing`` ("resetting environment 3 to
    data_idx 7"): the exception's type and text, and for a failed lookup the key, so
    that ``KeyError(0)`` is not answered as ``"0"`` nor an empty message as ``""``."""
    name = type(exc).__name__
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else None
        return f"{doing} failed: {name}: no entry {key!r}"
    text = str(exc).strip()
    if not text:
        return f"{doing} failed: {name} (the exception carried no message)"
    return f"{doing} failed: {name}: {text}"


class CapReached(Exception):
    """Every open environment is busy (or the server refuses past its cap): the create
    is refused with this message."""


class CappedEnvs(Generic[V]):
    """The open environments of one server: id -> state, least recently used first,
    at most ``cap`` of them. Not thread-safe: the server calls it under its own lock
    (or from one thread).

    :meth:`make_room` is called before a create adds its environment: it closes the
    least recently used environments that ``busy`` does not name until there is room,
    and returns them for the server to free. With ``refuse=True`` it closes nothing and
    raises :class:`CapReached` instead. An id closed for the cap is remembered (the
    last :data:`REMEMBERED_CLOSURES`), so that :meth:`unknown` can say why it is gone.
    """

    def __init__(self, server: str, cap: int, variable: str, *, refuse: bool = False) -> None:
        self.server = server
        self.cap = cap
        self.variable = variable
        self.refuse = refuse
        self._open: OrderedDict[int, V] = OrderedDict()
        self._closed_for_cap: OrderedDict[int, None] = OrderedDict()
        #: how many environments were closed for the cap since the server started
        self.closed_count = 0

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._open

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._open))

    def values(self) -> list[V]:
        return list(self._open.values())

    def get(self, env_id: int) -> V | None:
        """The state of an open environment, which becomes the most recently used."""
        if env_id not in self._open:
            return None
        self._open.move_to_end(env_id)
        return self._open[env_id]

    def peek(self, env_id: int) -> V | None:
        """The state of an open environment, without touching its place."""
        return self._open.get(env_id)

    def make_room(self, busy: Callable[[V], bool] | None = None) -> list[tuple[int, V]]:
        """Close environments until one more fits; returns the closed ``(id, state)``."""
        if len(self._open) < self.cap:
            return []
        if self.refuse:
            raise CapReached(
                f"{self.server} already has {len(self._open)} open environments, its cap "
                f"({self.variable}={self.cap}): close one with POST /close, or restart the "
                f"server with a larger {self.variable}")
        closed: list[tuple[int, V]] = []
        for env_id in list(self._open):
            if len(self._open) < self.cap:
                break
            state = self._open[env_id]
            if busy is not None and busy(state):
                continue
            del self._open[env_id]
            self._remember(env_id)
            closed.append((env_id, state))
        if len(self._open) >= self.cap:
            raise CapReached(
                f"{self.server} has {len(self._open)} open environments, its cap ({self.variable}="
                f"{self.cap}), and every one is in use by a request: try again when one finishes, "
                f"or restart the server with a larger {self.variable}")
        return closed

    def add(self, env_id: int, state: V) -> None:
        """Add a new environment (after :meth:`make_room`) as the most recently used."""
        self._closed_for_cap.pop(env_id, None)
        self._open[env_id] = state

    def pop(self, env_id: int) -> V | None:
        """Remove an environment the client closed (not counted as closed for the cap)."""
        return self._open.pop(env_id, None)

    def _remember(self, env_id: int) -> None:
        self.closed_count += 1
        self._closed_for_cap[env_id] = None
        while len(self._closed_for_cap) > REMEMBERED_CLOSURES:
            self._closed_for_cap.popitem(last=False)

    def was_closed_for_cap(self, env_id: int) -> bool:
        return env_id in self._closed_for_cap

    def closed_for_cap(self, env_id: int) -> str:
        """Why ``env_id`` is gone (call when :meth:`was_closed_for_cap`), ending in what to do."""
        return (f"environment {env_id} was closed to stay within the cap of {self.cap} open "
                f"environments: it was the least recently used when another was created "
                f"({self.variable} sets the cap). Create a new one with POST /create")

    def unknown(self, env_id: int) -> str:
        """The original's ``The id N is not valid.``, with the reason when the id was
        closed for the cap."""
        if self.was_closed_for_cap(env_id):
            return f"The id {env_id} is not valid: {self.closed_for_cap(env_id)}."
        return f"The id {env_id} is not valid."

    def status(self, **extra: Any) -> dict[str, Any]:
        """The answer of ``GET /embedded/envs``."""
        return {
            "server": self.server,
            "open": len(self._open),
            "max_envs": self.cap,
            "setting": self.variable,
            "past_the_cap": REFUSES_CREATE if self.refuse else CLOSES_LRU,
            "closed_for_cap": self.closed_count,
            **extra,
        }


# --------------------------------------------------------------------------- the actions a /step takes

#: The largest ``POST /step`` body an embedded server reads, in bytes (64 KiB: an action of
#: AgentGym's environments is a line, a SQL query at most a few KiB). A larger one is
#: refused with HTTP 413 and a ``{"detail": ...}`` body before it is read (from its
#: ``Content-Length``, or as soon as the bytes read pass the limit), on the event loop: no
#: worker thread, no JSON parse, no game sees it. docs/servers.md, "Big and broken actions".
MAX_STEP_BODY = 64 * 1024
#: the routes it holds for (under any prefix: ``/maze/step``)
STEP_ROUTES = ("/step", "/step_visual")


def content_length(scope: Mapping[str, Any]) -> int | None:
    """The request's ``Content-Length`` as a number, or None (absent or not a number)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def too_large(size: str, limit: int) -> str:
    """The ``detail`` of a refused body: how big it was (``size``), the limit, what to do."""
    return (f"the request body ({size}) is larger than this server reads for a step ({limit} bytes, "
            f"MAX_STEP_BODY in servers/embedded/limits.py): an action is one command, not a document; "
            f"send a shorter action")


class BodyLimit:
    """ASGI wrapper of one route's app: a body over ``max_body`` bytes is answered 413
    without being read further (see :data:`MAX_STEP_BODY`); a smaller one is read and
    handed to the app whole. ``max_body`` is read by the fast path (fastpath.py), which
    hands a larger body to the app and so to this wrapper."""

    def __init__(self, app: Any, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        declared = content_length(scope)
        if declared is not None and declared > self.max_body:
            await self._refuse(scope, receive, send, f"{declared} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: the app sees it too
                chunks_message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                await self.app(scope, _replayed([chunks_message, message], receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                await self._refuse(scope, receive, send, f"more than {self.max_body} bytes")
                return
            if not message.get("more_body", False):
                break
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replayed([whole], receive), send)

    async def _refuse(self, scope: Any, receive: Any, send: Any, size: str) -> None:
        from fastapi.responses import JSONResponse

        await JSONResponse({"detail": too_large(size, self.max_body)}, status_code=413)(scope, receive, send)


def _replayed(messages: list[dict[str, Any]], receive: Any) -> Any:
    pending = list(messages)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def limit_step_bodies(app: Any, max_body: int = MAX_STEP_BODY) -> Any:
    """Put :class:`BodyLimit` in front of every ``POST .../step`` route of the FastAPI
    ``app`` (:data:`STEP_ROUTES`); returns ``app``. Each embedded server's app gets it
    when it is made (``servers.embedded.create_app``)."""
    for route in app.router.routes:
        path = getattr(route, "path", "")
        if "POST" in (getattr(route, "methods", None) or ()) and path.endswith(STEP_ROUTES) \
                and not isinstance(route.app, BodyLimit):
            route.app = BodyLimit(route.app, max_body)
    return app


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate (``"\\udc80"``, which JSON may carry but UTF-8
    cannot) replaced by U+FFFD, so that whatever the game keeps of an action can be
    answered later (a pair of surrogates, already one character here, is kept)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


#: The type of every embedded server's ``action`` field: a string whose lone surrogates are
#: replaced (:func:`replace_lone_surrogates`) as the body is read, by FastAPI and the fast
#: path alike, so no game keeps a character its answers could not encode.
Action = Annotated[str, AfterValidator(replace_lone_surrogates)]
