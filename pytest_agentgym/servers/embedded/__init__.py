"""The plugin's own AgentGym-compatible servers, one FastAPI app per server.

``pytest-agentgym serve NAME --host 127.0.0.1 --port N`` runs one of them in
its own process. Each module named here exposes ``create_app() -> FastAPI``.
"""

from __future__ import annotations

import importlib
from typing import Any

#: server name -> module that builds its app
EMBEDDED_SERVERS = {
    "babyai": "pytest_agentgym.servers.embedded.babyai",
    "textcraft": "pytest_agentgym.servers.embedded.textcraft",
    # Maze and Wordle share one server under /maze and /wordle, like the original lmrlgym.
    "lmrlgym": "pytest_agentgym.servers.embedded.lmrlgym",
    # on the real sqlgym package: the optional extra 'sqlgym'
    "sqlgym": "pytest_agentgym.servers.embedded.sqlgym_server",
}

#: server name -> (module it needs, the extra that installs it) for servers on optional extras
EMBEDDED_REQUIRES = {
    "sqlgym": ("sqlgym", "sqlgym"),
}


def missing_requirement(name: str) -> str | None:
    """What to install for the embedded server ``name``, or None when it can run here."""
    import importlib.util

    module, extra = EMBEDDED_REQUIRES.get(name, (None, None))
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"the embedded server {name!r} needs the package {module!r}: pip install 'pytest-agentgym[{extra}]'"


def create_app(name: str) -> Any:
    try:
        module = EMBEDDED_SERVERS[name]
    except KeyError:
        raise KeyError(
            f"no embedded server {name!r}; available: {', '.join(sorted(EMBEDDED_SERVERS))}"
        ) from None
    missing = missing_requirement(name)
    if missing:
        raise SystemExit(missing)
    return importlib.import_module(module).create_app()


def serve(name: str, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Run one embedded server in this process until interrupted (blocking)."""
    import uvicorn

    uvicorn.run(create_app(name), host=host, port=port, log_level=log_level, workers=1)
