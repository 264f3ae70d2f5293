"""``--lf`` and ``--ff`` after a gate failed.

A gate is reported as a test of its own (``suites/x.yaml::BabyAI::gate[success_rate >=
0.5]``), so pytest's cache records its id among the last failures. No item has that
id, and pytest's last-failed plugin would answer "known failures not in selected
tests" and run everything: a whole day on a field node. A gate is judged on its
environment's episodes, so the rerun that can change its verdict plays them all:
each episode of an environment whose gate failed last time counts as a previous
failure. pytest's plugin filters items while it collects each file, so the suite file
marks its items as they are made (:func:`mark_if_gate_failed`); the collection report
then says what will run again (:func:`rerun_lines`).
"""

from __future__ import annotations

from typing import Any

import pytest

_GATES_KEY = pytest.StashKey[dict[tuple[str, str], list[str]]]()
_WIDENED_KEY = pytest.StashKey[dict[tuple[str, str], int]]()


def _last_failed(config: pytest.Config) -> Any:
    """pytest's last-failed plugin when --lf or --ff is in effect, else None."""
    plugin = config.pluginmanager.get_plugin("lfplugin")
    return plugin if plugin is not None and getattr(plugin, "active", False) else None


def failed_gates(config: pytest.Config) -> dict[tuple[str, str], list[str]]:
    """(suite path, environment) -> the gates recorded as failed by the last run."""
    if _GATES_KEY not in config.stash:
        found: dict[tuple[str, str], list[str]] = {}
        plugin = _last_failed(config)
        for nodeid in (plugin.lastfailed if plugin is not None else ()):
            parts = str(nodeid).split("::")
            if len(parts) == 3 and parts[2].startswith("gate["):
                found.setdefault((parts[0], parts[1]), []).append(parts[2])
        config.stash[_GATES_KEY] = found
    return config.stash[_GATES_KEY]


def mark_if_gate_failed(item: pytest.Item, environment: str) -> None:
    """Count ``item`` as a previous failure when its environment's gate (reported
    under the same suite file) failed last time."""
    gates = failed_gates(item.config)
    if not gates:
        return
    where = (item.nodeid.split("::")[0], environment)
    if where not in gates:
        return
    # pytest 9 keys its last failures by the structured id, earlier ones by the string
    _last_failed(item.config).lastfailed.setdefault(getattr(item, "id", item.nodeid), True)
    widened = item.config.stash.setdefault(_WIDENED_KEY, {})
    widened[where] = widened.get(where, 0) + 1


def rerun_lines(config: pytest.Config, selected: list[pytest.Item]) -> list[str]:
    """What a gate failure adds to the rerun, one line per environment."""
    gates = failed_gates(config)
    if not gates:
        return []
    counts: dict[tuple[str, str], int] = {}
    for item in selected:
        env = getattr(getattr(item, "suite", None), "environment", None)
        where = (item.nodeid.split("::")[0], env)
        if where in gates:
            counts[where] = counts.get(where, 0) + 1
    lines = []
    for (path, env), names in gates.items():
        n = counts.get((path, env), 0)
        what = ", ".join(f"{env}::{g}" for g in names)
        lines.append(f"agentgym: --lf: {what} failed last time; the gate is judged on every episode of "
                     f"{env}, so {n} episode(s) of {path} run again" if n else
                     f"agentgym: --lf: {what} failed last time, but none of {env}'s episodes in {path} is "
                     f"selected now: the gate cannot be judged again in this run")
    return lines
