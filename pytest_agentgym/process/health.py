"""Addresses, health checks, commands and messages for the servers we run or attach to.

The pieces of :mod:`pytest_agentgym.process.managed` that need no process:
choosing a free loopback port, writing a server's URL, probing it for health
(:class:`HealthCheck`), filling a command's ``{host}``/``{port}``/``{python}``
placeholders, and the wording of start failures (:func:`describe_exit`,
:class:`Advice`). No pytest here.
"""

from __future__ import annotations

import errno
import shlex
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # imported on first probe: a run spawns its servers before it needs httpx
    import httpx

DEFAULT_HOST = "127.0.0.1"
#: A server command: a shell-like string (split, never run by a shell) or an argv list.
Command = str | Sequence[str]


# -- addresses -----------------------------------------------------------------------


#: every port :func:`free_port` has handed out in this process (a server may not have
#: bound it yet, so the OS would offer it again)
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port that nothing listens on right now and that this process has not
    handed out before. The OS may offer a port again as soon as the probe socket is
    closed, before the server it was chosen for binds it: two servers started together
    (an environment server and the reference agent) were given the same port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with _handed_out_lock:
        while True:
            with socket.socket(family) as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def port_is_taken(host: str, port: int) -> bool:
    """Whether something on this machine holds ``port`` (binding it fails as in use)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def server_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# -- health --------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthCheck:
    """What a healthy server answers: ``GET path``, with any status or only 200."""

    path: str = "/"
    require_ok: bool = False

    def describe(self) -> str:
        return f"GET {self.path}" + (" with HTTP 200" if self.require_ok else "")


#: environment servers: any HTTP answer to ``GET /``
ANY_ANSWER = HealthCheck("/")
#: vLLM and the reference agent: HTTP 200 from ``GET /health``
HEALTH_ENDPOINT = HealthCheck("/health", require_ok=True)


#: what :func:`probe` answers when nothing listens on the port
REFUSED = "connection refused"


def probe_client() -> httpx.Client:
    """The HTTP client for health probes: make one per lifecycle (a server, a pool)
    and reuse it for every poll. Building a client builds an SSL context, which
    costs tens of milliseconds of CPU; a new one per poll adds up under load.
    Its requests follow the plugin's one proxy rule
    (:func:`pytest_agentgym.transport.proxies.proxy_for`): never a proxy for this machine's
    servers, the ``*_PROXY`` variables for others."""
    from pytest_agentgym.transport.proxies import http_client

    return http_client(timeout=5.0, follow_redirects=False)


#: what a proxy answers when it could not reach the server (not the server's answer)
PROXY_GATEWAY_ERRORS = (502, 504)


def probe(url: str, timeout: float, check: HealthCheck = ANY_ANSWER,
          client: httpx.Client | None = None) -> str | None:
    """``None`` when ``url`` passes ``check``, else why not (a short phrase).

    ``client``: the caller's long-lived probe client (:func:`probe_client`); a
    one-off probe without one builds (and closes) its own. A probe that goes
    through a proxy says so (``through the proxy http://...: connection refused``),
    and a 502 or 504 from there is the proxy's failure, not the server's answer."""
    if client is None:
        with probe_client() as own:
            return probe(url, timeout, check, own)
    import httpx

    from pytest_agentgym.transport.proxies import proxy_for, proxy_phrase

    target = url.rstrip("/") + check.path
    try:
        via = proxy_for(target)
    except httpx.InvalidURL:
        via = None  # the request below says what is wrong with the URL
    reason = _why_not(client, target, timeout, check, via)
    if reason is not None and via is not None:
        return f"{proxy_phrase(via)}: {reason}"
    return reason


def _why_not(client: httpx.Client, target: str, timeout: float, check: HealthCheck,
             via: str | None) -> str | None:
    import httpx

    try:
        response = client.get(target, timeout=timeout)
    except httpx.ConnectError:
        return REFUSED
    except httpx.ConnectTimeout:
        return f"connecting took longer than {timeout:g} s"
    except httpx.TimeoutException:
        return f"the port accepts connections but nothing answered within {timeout:g} s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if via is not None and response.status_code in PROXY_GATEWAY_ERRORS:
        return f"the proxy answered HTTP {response.status_code} (it could not reach the server)"
    if check.require_ok and response.status_code != 200:
        return f"GET {check.path} answered HTTP {response.status_code}"
    return None


class NoAnswer(Exception):
    """A server gave no answer to a question before its deadline (:func:`ask`)."""


#: the pause between two tries of :func:`ask` after a failed connection or a 5xx
ASK_PAUSE_S = 0.25


def ask(client: httpx.Client, url: str, within: float) -> httpx.Response:
    """The server's answer to ``GET url``, however long it takes within ``within`` seconds.

    For a question whose answer goes into a run's record (a server's version, which
    data it serves): one slow answer is waited for as long as the deadline allows, a
    refused or dropped connection and a 5xx are asked again after a short pause, and
    only a server that never answers by the deadline raises :class:`NoAnswer` (its
    message says what the last try got). A busy machine makes the answer late, never
    missing. Any answer below 500 is returned as it is: a 404 is the server saying it
    has no such route."""
    import httpx

    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        try:
            response = client.get(url, timeout=max(left, 0.1))
        except httpx.TimeoutException:
            why = "no answer"
        except httpx.TransportError as exc:
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            if response.status_code < 500:
                return response
            why = f"HTTP {response.status_code}"
        if time.monotonic() + ASK_PAUSE_S >= deadline:
            raise NoAnswer(f"GET {url}: {why} within {within:g} s")
        time.sleep(ASK_PAUSE_S)  # a retry's pause, not a wait for a condition


# -- commands and messages -------------------------------------------------------------


def build_argv(command: Command, *, host: str, port: int, python: str = sys.executable) -> list[str]:
    """The argv of ``command`` with ``{host}``, ``{port}`` and ``{python}`` filled in.

    A string is split like a shell would (no shell runs it); a sequence is used as is.
    """
    parts = shlex.split(command) if isinstance(command, str) else [str(p) for p in command]
    if not parts:
        raise ValueError("empty server command")
    values = {"{host}": host, "{port}": str(port), "{python}": python}
    filled = []
    for part in parts:
        for placeholder, value in values.items():
            part = part.replace(placeholder, value)
        filled.append(part)
    return filled


def describe_exit(code: int) -> str:
    """'exited with code 3' or 'was killed by SIGKILL'."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass(frozen=True)
class Advice:
    """The clause that ends each kind of start failure: what the user can change."""

    cannot_run: str = "is it installed, and is the command right?"
    slow_start: str = "give it a longer startup timeout if it is slow to start"
    attach: str = "is it running and healthy?"


def environment_advice(name: str) -> Advice:
    """Advice naming the keys of configs/envs.yaml for environment ``name``."""
    return Advice("is it installed, and is the command in envs.yaml right?",
                  f"raise envs.{name}.startup_timeout if it is slow to start",
                  f"is it running and healthy? start it, or point envs.{name}.url at one that is")
