"""Who may use the rollout service, and where its API key may go.

Two guards, both decided when the service starts (docs/training.md, "Keys,
callers and limits"):

- :class:`KeyAllowList`: the base URLs the service calls at all, and sends its own
  API key (``--api-key-env``) to. A batch names its model endpoint, so without a
  list anyone who can post a batch could have the key sent to a server of theirs,
  or, key or not, make the service request any URL it can reach (an internal admin
  route, a port scan of its network). By
  default the list holds the endpoints the service was started with
  (``--base-url`` and the node profile's model endpoints); ``--allow-base-url``
  adds more. A URL is allowed when its scheme, host and port are those of an
  entry and its path starts with the entry's path, segment by segment; one with
  a ``.`` or ``..`` segment never is (it could climb out of the entry's path),
  nor one with a backslash, a space or a control character, nor one that
  httpx (which sends the requests) reads another host or port from.
  Hosts are compared as written, without DNS: ``localhost`` and ``127.0.0.1``
  are different entries.
- :class:`BearerAuth`: an ASGI middleware that asks every request but
  ``GET /health`` for ``Authorization: Bearer <token>`` (``--auth-token-env``).

Pytest-free and HTTP-framework-free (the middleware speaks plain ASGI).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import unquote, urlsplit

import httpx

from pytest_agentgym.process import variables
from pytest_agentgym.rollouts.request import BadRollouts, openai_base, shown
from pytest_agentgym.transport.host_guard import binds_loopback_only  # noqa: F401 - where cli/ imports it

#: The fewest characters a caller token may have (a guessable token guards nothing).
MIN_TOKEN_CHARS = 16
#: Paths answered without a token: a liveness probe (it then says only whether the service is up).
OPEN_PATHS = frozenset({"/health"})
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class _Prefix:
    scheme: str
    host: str
    port: int
    segments: tuple[str, ...]
    text: str


def _split(url: str) -> _Prefix:
    """``url`` (already through :func:`openai_base`) as the parts an allow-list compares."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise BadRollouts(f"'base_url' has a port that is not a number: {shown(url)}") from None
    host = (parts.hostname or "").lower()
    if not host:
        raise BadRollouts(f"'base_url' must name a host, got {shown(url)}")
    scheme = parts.scheme.lower()
    segments = tuple(s for s in parts.path.split("/") if s)
    number = port if port is not None else DEFAULT_PORTS[scheme]
    where = f"[{host}]" if ":" in host else host
    return _Prefix(scheme, host, number, segments, f"{scheme}://{where}:{number}/{'/'.join(segments)}")


class KeyAllowList:
    """The base URLs the service may send its API key to (prefix match, see the module)."""

    def __init__(self, urls: Iterable[str]) -> None:
        self._entries: list[_Prefix] = []
        for url in urls:
            entry = _split(openai_base(url))
            if entry not in self._entries:
                self._entries.append(entry)

    @classmethod
    def build(cls, *, allowed: Iterable[str], base_url: str | None, node_urls: Iterable[str]) -> "KeyAllowList":
        """The list of a service started with ``--allow-base-url`` ``allowed``, ``--base-url``
        ``base_url`` and a node whose model endpoints are at ``node_urls``. Raises
        :class:`ValueError` naming the --allow-base-url value that is not a URL."""
        checked = []
        for url in allowed:
            try:
                checked.append(_split(openai_base(url)).text)
            except BadRollouts:
                raise ValueError(f"--allow-base-url {shown(url)} is not a URL a key could go to: give an http:// "
                                 f"or https:// URL with a host, such as http://127.0.0.1:8001") from None
        given = [base_url] if base_url else []
        return cls([*given, *node_urls, *checked])

    def allows(self, url: str) -> bool:
        """Whether ``url`` (a batch's base URL, through :func:`openai_base`) is on the list."""
        if "\\" in url or any(ord(c) <= 32 or ord(c) == 127 for c in url):
            return False  # characters parsers disagree on
        try:
            asked = _split(url)
            sent_to = httpx.URL(url)
        except (BadRollouts, KeyError, ValueError, httpx.InvalidURL):
            return False
        if (sent_to.host.lower(), sent_to.port or DEFAULT_PORTS.get(sent_to.scheme)) != (asked.host, asked.port):
            return False
        if any(unquote(segment) in (".", "..") for segment in asked.segments):
            return False
        for entry in self._entries:
            if (asked.scheme, asked.host, asked.port) == (entry.scheme, entry.host, entry.port) \
                    and asked.segments[:len(entry.segments)] == entry.segments:
                return True
        return False

    def describe(self) -> list[str]:
        """The entries as compared: ``scheme://host:port/path``."""
        return [entry.text for entry in self._entries]

    def said(self, *, calls: bool = False) -> str:
        """Where the key goes, as a sentence's end: ``sends it only to http://...``; with
        ``calls``, which endpoints the service calls at all: ``calls only http://...``."""
        if not self._entries:
            return (f"{'calls no endpoint' if calls else 'sends it nowhere'}: it was started with no --base-url "
                    f"and no --allow-base-url, and its node's model endpoints have no URL")
        return f"{'calls only' if calls else 'sends it only to'} {', '.join(self.describe())} and the paths below them"


def read_token(variable: str) -> str:
    """The caller token in the environment variable ``variable`` (``--auth-token-env``).
    Raises :class:`ValueError` when it is unset, empty or too short (never showing it)."""
    value = variables.value(variable)
    hint = (f"export {variable}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))') and give "
            f"callers the same token")
    if value is None:
        raise ValueError(f"--auth-token-env {variable}: the variable is not set or empty; {hint}")
    if len(value) < MIN_TOKEN_CHARS:
        raise ValueError(f"--auth-token-env {variable}: the token has {len(value)} characters, fewer "
                         f"than {MIN_TOKEN_CHARS}; {hint}")
    return value


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: every HTTP request but those to :data:`OPEN_PATHS` must carry
    ``Authorization: Bearer <token>``; any other is answered 401 before the app sees it.
    A request to an open path is marked (``scope["agentgym_authenticated"]``) so the
    route can answer less to a caller without the token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    def _carries_token(self, scope: dict[str, Any]) -> bool:
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                scheme, _, given = value.partition(b" ")
                if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token):
                    return True
        return False

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authenticated = self._carries_token(scope)
        if authenticated or scope.get("path") in OPEN_PATHS:
            await self.app({**scope, "agentgym_authenticated": authenticated}, receive, send)
            return
        body = json.dumps({"error": "this rollout service needs the header 'Authorization: Bearer <token>', "
                                    "the token being the one in the variable its --auth-token-env names"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="pytest-agentgym rollout service"')]})
        await send({"type": "http.response.body", "body": body})
