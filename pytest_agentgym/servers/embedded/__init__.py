"""The plugin's own AgentGym-compatible servers, one FastAPI app per server.

``pytest-agentgym serve NAME --host 127.0.0.1 --port N`` runs one of them in
its own process. Each module named here exposes ``create_app() -> FastAPI``.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Iterable

#: server name -> module that builds its app
EMBEDDED_SERVERS = {
    "babyai": "pytest_agentgym.servers.embedded.babyai",
    "textcraft": "pytest_agentgym.servers.embedded.textcraft",
    # Maze and Wordle share one server under /maze and /wordle, like the original lmrlgym.
    "lmrlgym": "pytest_agentgym.servers.embedded.lmrlgym",
    # on the real sqlgym package: the optional extra 'sqlgym'
    "sqlgym": "pytest_agentgym.servers.embedded.sqlgym_server",
    # the real ScienceWorld simulator: needs the sciworld extra and Java
    "sciworld": "pytest_agentgym.servers.embedded.sciworld",
    # the real ALFWorld TextWorld engine: the optional extra 'alfworld'
    "alfworld": "pytest_agentgym.servers.embedded.alfworld",
    # a shop built once per process: its own BM25 engine and the original's reward (extra 'webshop')
    "webshop": "pytest_agentgym.servers.embedded.webshop.server",
}

#: server name -> "module:function" answering what this machine lacks to run it (None: nothing)
REQUIREMENTS = {
    "sciworld": "pytest_agentgym.servers.embedded.sciworld_tasks:missing_requirements",
    "sqlgym": "pytest_agentgym.servers.embedded.sqlgym_bird:missing_requirements",
    "alfworld": "pytest_agentgym.servers.embedded.alfworld_tasks:missing_requirements",
    "webshop": "pytest_agentgym.servers.embedded.webshop:missing_requirements",
}


def missing_requirements(name: str) -> str | None:
    """Why the embedded server ``name`` cannot run here (what to install), or None."""
    check = REQUIREMENTS.get(name)
    if check is None:
        return None
    module, function = check.split(":")
    return getattr(importlib.import_module(module), function)()


def create_app(name: str) -> Any:
    try:
        module = EMBEDDED_SERVERS[name]
    except KeyError:
        raise KeyError(
            f"no embedded server {name!r}; available: {', '.join(sorted(EMBEDDED_SERVERS))}"
        ) from None
    why = missing_requirements(name)
    if why:
        raise SystemExit(f"pytest-agentgym serve {name}: {why}")
    from pytest_agentgym.servers.embedded.limits import limit_step_bodies

    # a /step body over limits.MAX_STEP_BODY is refused before it is read, for every server
    return limit_step_bodies(importlib.import_module(module).create_app())


#: How long an idle keep-alive connection stays open (uvicorn's default is 5 s). The
#: harness's client reuses a connection idle for a few seconds (transport.keepalive.IDLE_EXPIRY_S):
#: with 5 s here, a request sent on a connection in the moment the server closed it was
#: lost ("server closed the connection without an answer"). A server setting, not wire
#: content; an idle connection costs a socket and a few kB.
KEEP_ALIVE_S = 75


def serve(name: str, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
          fast_path: bool = True, allow_hosts: Iterable[str] | None = None) -> None:
    """Run one embedded server in this process until interrupted (blocking).

    ``fast_path``: serve well-formed hot requests through :class:`.fastpath.FastPath`
    (byte-identical answers, less CPU); False runs the FastAPI app alone.
    ``allow_hosts``: the Host names it answers besides loopback and ``host``
    (transport/host_guard.py; default: those of ``AGENTGYM_ALLOW_HOSTS``, comma-separated,
    ``*`` for any); a request with another Host gets 403, every other is the app's."""
    import uvicorn

    from pytest_agentgym.transport.host_guard import ALLOW_HOSTS_ENV, HostGuard, HostGuardASGI, names_from_env

    try:
        guard = HostGuard(host, names_from_env() if allow_hosts is None else allow_hosts,
                          option=f"{ALLOW_HOSTS_ENV}=NAME" if allow_hosts is None else "--allow-host NAME")
    except ValueError as exc:
        raise SystemExit(f"pytest-agentgym serve {name}: {exc}") from None
    app = create_app(name)
    if fast_path:
        from pytest_agentgym.servers.embedded.fastpath import FastPath

        app = FastPath(app)
    app = HostGuardASGI(app, guard)
    if guard.everywhere or guard.any:  # a wildcard bind or '*': say which Host names it answers
        print(f"pytest-agentgym serve {name}: {guard.said()}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1,
                timeout_keep_alive=KEEP_ALIVE_S)
