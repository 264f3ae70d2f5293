"""Which ``Host`` a local server answers: the one guard against DNS rebinding of the
rollout service, ``pytest-agentgym view`` and the embedded environment servers.

A web page cannot read the answers of another origin, but it can make its own name
resolve to 127.0.0.1 (DNS rebinding): the browser then sends the page's requests,
and lets the page read the answers, to a server on this machine, with the page's
name in ``Host``. So a server answers only the names it is reached by:

- the loopback names ``localhost``, ``127.0.0.1`` and ``[::1]``;
- the address it is bound to (``--host``), with or without a port;
- the names an option adds (``--allow-host NAME`` of ``rollout-server`` and ``view``,
  ``AGENTGYM_ALLOW_HOSTS=NAME,NAME`` or ``serve(allow_hosts=...)`` for an embedded
  server); ``*`` answers any ``Host`` (behind a proxy that checks it).

A wildcard bind (``0.0.0.0``, ``::``) cannot know every name it is reached by; it also
answers this machine's own names (``socket.gethostname()`` and its fully qualified
name) and any IP address written as such (a rebinding page always has a name, never
an address: an address is only ever reached as itself). Other names need the option;
the server says so when it starts (:meth:`HostGuard.said`).

A request without ``Host`` (HTTP/1.0) is answered: no browser sends one. A refused
one gets 403 with a body that names the ``Host`` and the option that allows it.

:class:`HostGuardASGI` is the guard as ASGI middleware; ``view`` (http.server) asks
:meth:`HostGuard.allows` itself. Pytest- and framework-free.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from typing import Any, Awaitable, Callable, Iterable

#: The names every server answers besides its bound address.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: The addresses that bind every interface.
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
#: The variable an embedded server reads extra Host names from (comma-separated).
ALLOW_HOSTS_ENV = "AGENTGYM_ALLOW_HOSTS"
#: The status of a refused Host.
REFUSED_STATUS = 403


def binds_loopback_only(host: str) -> bool:
    """Whether binding ``host`` reaches this machine only (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name or an empty string: it may be reachable from elsewhere


def binds_everywhere(host: str) -> bool:
    """Whether binding ``host`` listens on every interface (0.0.0.0, ::)."""
    return host.strip().strip("[]").lower() in WILDCARD_BINDS


def host_name(value: str) -> str | None:
    """The name of a ``Host`` value (``name``, ``name:port``, ``[v6]``, ``[v6]:port``),
    lower-cased, without its port and a trailing dot; None when it is none of those."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end], text[end + 1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    else:
        if text.count(":") > 1:
            return None  # an IPv6 address must be bracketed in a Host
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    name = name[:-1] if name.endswith(".") else name
    if _is_address(name):
        return str(ipaddress.ip_address(name))  # one spelling per address
    if not name or any(c in name for c in "/\\@ \t?#") or any(ord(c) < 33 or ord(c) == 127 for c in name):
        return None
    return name


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def names_from_env(environ: dict[str, str] | None = None) -> list[str]:
    """The names of :data:`ALLOW_HOSTS_ENV` (comma- or space-separated)."""
    text = (environ if environ is not None else os.environ).get(ALLOW_HOSTS_ENV, "")
    return [part for part in text.replace(",", " ").split() if part]


class HostGuard:
    """The ``Host`` names one server answers (see the module). ``option`` is how its
    user adds a name, ``NAME`` standing for it (``--allow-host NAME``, ``AGENTGYM_ALLOW_HOSTS=NAME``),
    said in refusals; raises :class:`ValueError`
    naming ``option`` for an added name that is no host name."""

    def __init__(self, bound: str, allowed: Iterable[str] = (), *, option: str = "--allow-host NAME") -> None:
        self.option = option
        self.everywhere = binds_everywhere(bound)
        self.any = False
        names = set(LOOPBACK_NAMES)
        if not self.everywhere:
            names.add(host_name(bound) or bound.strip().strip("[]").lower())
        else:
            for own in (socket.gethostname(), socket.getfqdn()):
                if own:
                    names.add(own.lower().rstrip("."))
        self.added: list[str] = []
        for given in allowed:
            if given.strip() == "*":
                self.any = True
                self.added.append("*")
                continue
            raw = given.strip()
            bare = raw.strip("[]")
            name = str(ipaddress.ip_address(bare)) if _is_address(bare) else host_name(raw)
            if name is None or (":" in raw and not _is_address(bare)):
                raise ValueError(f"{option.replace('NAME', repr(given))} is not a host name: give a name such as "
                                 f"trainer.example.org or an address such as 10.0.0.5 (no scheme, path or port), "
                                 f"or * to answer any Host")
            names.add(name)
            self.added.append(name)
        self.names = frozenset(names)

    def allows(self, header: str | None) -> bool:
        """Whether a request whose ``Host`` is ``header`` (None: it sent none) is answered."""
        if header is None or self.any:
            return True
        name = host_name(header)
        if name is None:
            return False
        return name in self.names or (self.everywhere and _is_address(name))

    def refusal(self, header: str | None) -> str:
        """What a refused request is told: its Host, and the option that would allow it."""
        shown = json.dumps((header or "")[:100])
        name = host_name(header or "")
        hint = self.option.replace("NAME", name) if name else self.option
        return (f"this server does not answer for Host {shown}: it answers only {self.listed()} (a page whose "
                f"name resolves to this machine must not read it); reach it by one of those names, or start it "
                f"with {hint} if that name is yours")

    def listed(self) -> str:
        if self.any:
            return "any Host"
        shown = sorted(f"[{name}]" if ":" in name else name for name in self.names)
        return ", ".join(shown) + (" and any IP address" if self.everywhere else "")

    def said(self) -> str:
        """A line for the server's start: which Host names it answers."""
        if self.any:
            return "answers any Host header (* allowed)"
        more = (f"; other names get 403 unless given with {self.option}" if self.everywhere
                else f"; add names with {self.option}")
        return f"answers the Host names {self.listed()}{more}"


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def scope_host(scope: Scope) -> str | None:
    """The ``Host`` header of an ASGI scope (the first one), decoded; None without one."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"host":
            return value.decode("latin-1")
    return None


class HostGuardASGI:
    """ASGI middleware: an HTTP request (or websocket) whose Host :class:`HostGuard` refuses
    gets 403 and a JSON body ``{"error": ...}`` before the app sees it; the rest, and the
    lifespan, go to ``app`` untouched."""

    def __init__(self, app: Any, guard: HostGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = scope_host(scope)
            if not self.guard.allows(host):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = json.dumps({"error": self.guard.refusal(host)}).encode("utf-8")
                await send({"type": "http.response.start", "status": REFUSED_STATUS,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
