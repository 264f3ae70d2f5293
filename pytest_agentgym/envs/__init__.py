"""Environments: the protocol client, one adapter per environment, and their registry.

The registry maps an environment's name to its adapter class. Built-in adapters
are registered on first use; a third-party plugin or a conftest adds its own
through the ``pytest_agentgym_add_environments`` hook (see hookspecs.py), or,
outside pytest, by calling :func:`register` directly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not imported at run time: envs.base brings jinja2 and httpx, and the
    # plugin's start-up reaches this package (envs.spec) before it needs an adapter
    from pytest_agentgym.envs.base import EnvAdapter

_BUILTIN_MODULES = (
    "babyai",
    "textcraft",
    "maze",
    "wordle",
    "alfworld",
    "sqlgym",
    "webshop",
    "sciworld",
    # the AgentBench family: task servers of another protocol (integrations/agentbench)
    "pytest_agentgym.integrations.agentbench.adapters",
)

_registry: dict[str, type[EnvAdapter]] = {}
_builtins_loaded = False


def register(adapter: type[EnvAdapter]) -> type[EnvAdapter]:
    """Add an adapter class under its ``name``; usable as a class decorator."""
    name = getattr(adapter, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{adapter!r} has no 'name' class attribute")
    _registry[name] = adapter
    return adapter


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module in _BUILTIN_MODULES:
            importlib.import_module(module if "." in module else f"pytest_agentgym.envs.{module}")


def adapter_class(name: str) -> type[EnvAdapter]:
    """The adapter registered as ``name`` (case-insensitive)."""
    _load_builtins()
    for registered, cls in _registry.items():
        if registered.lower() == name.lower():
            return cls
    raise KeyError(
        f"no adapter for environment {name!r}; known: {', '.join(sorted(_registry))}"
    )


def names() -> list[str]:
    _load_builtins()
    return sorted(_registry)
