"""pytest-agentgym: evaluate LLM agents on AgentGym environments with pytest.

The public API, what users and other plugins may import from here:

- ``__version__``
- the records of a run: :class:`EpisodeRecord`, :class:`Turn`, :class:`ErrorInfo`,
  :class:`RunInfo` (``pytest_agentgym.results.records``)
- the run-directory reader :class:`RunDir` (``pytest_agentgym.results.store``) and
  :func:`current_records` (``pytest_agentgym.results.current``), which keeps what a run
  counts (the newest generation of each episode):
  ``current_records(RunDir(path).read_episodes())``
- ``hookspecs``: the module of the plugin's hook specifications
  (``pytest_agentgym.plugin.hookspecs``), for instance
  ``pytest_agentgym_add_environments``
- :func:`evaluate` and its :class:`Evaluation` (``pytest_agentgym.plugin.evaluate``):
  a whole run from inside a training script, its metrics and verdicts returned

Everything else is internal and may move between releases.

Importing this package is cheap on purpose: pytest imports every installed
plugin's entry point in every project, so nothing heavy (pytest, httpx, jinja2,
openai, nats, numpy) is imported here. Each name above is imported on first
access (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "EpisodeRecord",
    "Turn",
    "ErrorInfo",
    "RunInfo",
    "RunDir",
    "current_records",
    "hookspecs",
    "evaluate",
    "Evaluation",
]

# name -> (module, attribute in it; None: the module itself). The targets are
# strings, not import statements, on purpose: the modules that read __version__
# from here (run/, rollouts/) must not appear to depend on the plugin package
# in the import graph that lint-imports and tests/architecture/test_layering.py check.
_LAZY: dict[str, tuple[str, str | None]] = {
    "EpisodeRecord": ("pytest_agentgym.results.records", "EpisodeRecord"),
    "Turn": ("pytest_agentgym.results.records", "Turn"),
    "ErrorInfo": ("pytest_agentgym.results.records", "ErrorInfo"),
    "RunInfo": ("pytest_agentgym.results.records", "RunInfo"),
    "current_records": ("pytest_agentgym.results.current", "current_records"),
    "RunDir": ("pytest_agentgym.results.store", "RunDir"),
    "hookspecs": ("pytest_agentgym.plugin.hookspecs", None),
    "evaluate": ("pytest_agentgym.plugin.evaluate", "evaluate"),
    "Evaluation": ("pytest_agentgym.plugin.evaluate", "Evaluation"),
}

if TYPE_CHECKING:  # for type checkers and IDEs only; never runs
    from pytest_agentgym.plugin import hookspecs
    from pytest_agentgym.plugin.evaluate import Evaluation, evaluate
    from pytest_agentgym.results.current import current_records
    from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo, Turn
    from pytest_agentgym.results.store import RunDir


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # the next access does not come back here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
