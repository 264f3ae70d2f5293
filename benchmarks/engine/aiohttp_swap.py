"""A pytest plugin that swaps aiohttp's client in for the hot path's transport (issue 37).

Loaded into the run that ``transport_ab.py`` measures
(``PYTEST_PLUGINS=benchmarks.engine.aiohttp_swap``), with
``AGENTGYM_BENCH_TRANSPORT=aiohttp`` it puts ``aiohttp_transport``'s
``AiohttpTransport`` and ``AiohttpRoute`` in place of ``KeepAliveTransport`` and
``Route`` in ``pytest_agentgym.envs.protocol`` and ``pytest_agentgym.model.client``
as those modules are imported (aiohttp is imported then, where a shipped version
would import it). With ``ours`` (or unset) it changes nothing, so both arms of the
comparison load the same plugin. It imports nothing heavy itself: the plugin
imports httpx where first used, and loading this must not move that earlier.
"""

from __future__ import annotations

import importlib
import importlib.abc
import json
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

#: the modules of the hot path that import KeepAliveTransport and Route from pytest_agentgym.transport
_PATCHED = ("pytest_agentgym.envs.protocol", "pytest_agentgym.model.client")
CHOICE = os.environ.get("AGENTGYM_BENCH_TRANSPORT", "ours")


def _patch(module: ModuleType) -> None:
    import aiohttp  # noqa: F401  (imported with the module that would import it if shipped)

    package = __name__.rpartition(".")[0]
    implementation = importlib.import_module(f"{package}.aiohttp_transport" if package else "aiohttp_transport")
    module.KeepAliveTransport = implementation.AiohttpTransport  # type: ignore[attr-defined]
    module.Route = implementation.AiohttpRoute  # type: ignore[attr-defined]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in _PATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Swap aiohttp in for the hot path's transport in this process (and its xdist workers,
    which load this plugin too)."""
    for name in _PATCHED:
        if name in sys.modules:
            _patch(sys.modules[name])
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def pytest_unconfigure(config: Any) -> None:
    """Append which transport this process ran, and the aiohttp sessions it made, to
    ``AGENTGYM_BENCH_SWAP_LOG`` (one line per process, xdist workers included)."""
    where = os.environ.get("AGENTGYM_BENCH_SWAP_LOG")
    if not where:
        return
    package = __name__.rpartition(".")[0]
    implementation = sys.modules.get(f"{package}.aiohttp_transport" if package else "aiohttp_transport")
    # an xdist controller plays no episode (its workers do)
    plays = hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
    line = {"pid": os.getpid(), "choice": CHOICE, "plays": plays,
            "aiohttp_sessions": getattr(implementation, "SESSIONS", 0)}
    with open(where, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


if CHOICE == "aiohttp":
    install()
elif CHOICE != "ours":
    raise ValueError(f"AGENTGYM_BENCH_TRANSPORT: 'ours' or 'aiohttp', not {CHOICE!r}")
