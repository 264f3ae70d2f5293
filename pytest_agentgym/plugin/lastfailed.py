"""``--lf`` and ``--ff`` after a gate failed.

A gate is reported as a test of its own (``suites/x.yaml::BabyAI::gate[success_rate >=
0.5]``), so pytest's cache records its id among the last failures. No item has that
id, and pytest's last-failed plugin would answer "known failures not in selected
tests" and run everything: a whole day on a field node. A gate is judged on its
environment's episodes, so the rerun that can change its verdict plays them all:
each episode of an environment whose gate failed last time counts as a previous
failure. pytest's plugin filters items while it collects each file, so the suite file
marks its items as they are made (:func:`mark_if_gate_failed`); the collection report
then says what will run again (:func:`rerun_lines`), and pytest's own line counts the
failures of last time, not the episodes a failed gate adds (:class:`RerunStatus`).
"""

from __future__ import annotations

from typing import Any

import pytest

_GATES_KEY = pytest.StashKey[dict[tuple[str, str], list[str]]]()
#: the ids of the items counted as previous failures for their gate's sake only
_ADDED_KEY = pytest.StashKey[set]()
_STATUS_PLUGIN = "agentgym-lf-status"


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
        if found and not config.pluginmanager.has_plugin(_STATUS_PLUGIN):
            config.pluginmanager.register(RerunStatus(), _STATUS_PLUGIN)
    return config.stash[_GATES_KEY]


def mark_if_gate_failed(item: pytest.Item, environment: str) -> None:
    """Count ``item`` as a previous failure when its environment's gate (reported
    under the same suite file) failed last time."""
    gates = failed_gates(item.config)
    if not gates:
        return
    if (item.nodeid.split("::")[0], environment) not in gates:
        return
    # pytest 9 keys its last failures by the structured id, earlier ones by the string
    key = getattr(item, "id", item.nodeid)
    lastfailed = _last_failed(item.config).lastfailed
    if key not in lastfailed:
        lastfailed[key] = True
        item.config.stash.setdefault(_ADDED_KEY, set()).add(key)


def _where(item: pytest.Item) -> tuple[str, Any]:
    return item.nodeid.split("::")[0], getattr(getattr(item, "suite", None), "environment", None)


def _per_gate(gates: dict[tuple[str, str], list[str]], items: list[pytest.Item]) -> dict[tuple[str, str], int]:
    """(suite path, environment) of a failed gate -> how many of ``items`` it is judged on."""
    counts: dict[tuple[str, str], int] = {}
    for item in items:
        where = _where(item)
        if where in gates:
            counts[where] = counts.get(where, 0) + 1
    return counts


def rerun_lines(config: pytest.Config, selected: list[pytest.Item]) -> list[str]:
    """What a gate failure adds to the rerun, one line per environment."""
    gates = failed_gates(config)
    if not gates:
        return []
    counts = _per_gate(gates, selected)
    lines = []
    for (path, env), names in gates.items():
        n = counts.get((path, env), 0)
        what = ", ".join(f"{env}::{g}" for g in names)
        lines.append(f"agentgym: --lf: {what} failed last time; the gate is judged on every episode of "
                     f"{env}, so {n} episode(s) of {path} run again" if n else
                     f"agentgym: --lf: {what} failed last time, but none of {env}'s episodes in {path} is "
                     f"selected now: the gate cannot be judged again in this run")
    return lines


class RerunStatus:
    """Makes pytest's "run-last-failure: rerun previous N failures" true after a gate failed:
    N counts last time's failures (the episodes that failed and each failed gate), not
    every episode a gate brings back, and the line says what runs again for the gate."""

    @pytest.hookimpl(tryfirst=True)  # before pytest's own hook reads its status line
    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        plugin = _last_failed(config)
        status = getattr(plugin, "_report_status", None)
        if plugin is None or not isinstance(status, str) or not status.startswith("rerun previous"):
            return
        added, gates = config.stash.get(_ADDED_KEY, set()), failed_gates(config)
        per_gate = _per_gate(gates, items)
        failed = sum(1 for item in items if getattr(item, "id", item.nodeid) in plugin.lastfailed
                     and getattr(item, "id", item.nodeid) not in added)
        parts = [f"{failed} episode{'' if failed == 1 else 's'}"] if failed else []
        count = failed
        for where, names in gates.items():
            if where in per_gate:
                count += len(names)
                n = per_gate[where]
                parts.append(f"{'the gate' if len(names) == 1 else 'the gates'} "
                             f"{', '.join(f'{where[1]}::{g}' for g in names)}, with the {n} "
                             f"episode{'' if n == 1 else 's'} of {where[0]} it is judged on")
        if not per_gate:
            return
        suffix = " first" if config.getoption("failedfirst") else ""
        skipped = getattr(plugin, "_skipped_files", 0)
        files = f" (skipped {skipped} file{'' if skipped == 1 else 's'})" if skipped else ""
        plugin._report_status = (f"rerun previous {count} failure{'' if count == 1 else 's'}{suffix}: "
                                 f"{'; '.join(parts)}{files}")
