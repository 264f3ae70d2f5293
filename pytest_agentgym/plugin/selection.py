"""Which episodes ``-k``, ``-m``, ``--deselect`` and ``--lf`` leave, known before collection.

The servers of the suites named on the command line are started at configure time, so
they boot while pytest collects; under pytest-xdist the controller starts them before
its workers exist and never collects at all. Either way the choice is made before
pytest has items to deselect, and ``-k Wordle`` used to start all four lightweight
servers. :func:`selection` answers the same question pytest will: it builds, for each
episode a suite file would make, the names and marks pytest matches an item on (the
item's name, its file's and directories' names below the rootdir, the ``agentgym`` mark
and the environment's) and evaluates the expressions with pytest's own evaluator. The
answer is exact for the items this plugin makes; a conftest that adds marks or keywords
to episodes at collection time is the one thing it cannot see (without xdist, only the
early start of a server is lost then: servers are started for the items pytest kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from pytest_agentgym.run.selection import Choose, Episode


def selection(config: pytest.Config) -> Choose | None:
    """The filter the command line's selection options amount to, or None when they
    select everything (or cannot be evaluated here: then nothing is left out)."""
    keyword = (config.option.keyword or "").lstrip()
    markexpr = config.option.markexpr or ""
    deselect = tuple(config.getoption("deselect", None) or ())
    last_failed = _last_failed_ids(config)
    if not (keyword or markexpr or deselect or last_failed is not None):
        return None
    try:
        from _pytest.mark import KeywordMatcher, MarkMatcher
        from _pytest.mark.expression import Expression

        by_keyword = Expression.compile(keyword) if keyword else None
        by_mark = Expression.compile(markexpr) if markexpr else None
    except (ImportError, SyntaxError, AttributeError):
        return None  # pytest reports a malformed expression itself, at collection

    from pytest_agentgym.config.suites import item_name, marker_name
    from pytest_agentgym.plugin.lastfailed import failed_gates

    widened = {where for where in failed_gates(config)} if last_failed is not None else set()

    def keep(path: str, env: str, task: int, repeat: int) -> bool:
        name = item_name(env, task, repeat)
        nodeid = f"{path}::{name}"
        if deselect and nodeid.startswith(deselect):
            return False
        marks = ("agentgym", marker_name(env))
        if by_keyword is not None:
            names = {*Path(path).parts, name, *marks}
            if not by_keyword.evaluate(KeywordMatcher(names)):
                return False
        if by_mark is not None and not by_mark.evaluate(
                MarkMatcher.from_markers([getattr(pytest.mark, m).mark for m in marks])):
            return False
        return True

    def failed_before(path: str, env: str, task: int, repeat: int) -> bool:
        return f"{path}::{item_name(env, task, repeat)}" in last_failed or (path, env) in widened

    def choose(episodes: Sequence[Episode]) -> list[Episode]:
        kept = [e for e in episodes if keep(*e)]
        if last_failed:  # as pytest: the previous failures among the selection, else all of it
            return [e for e in kept if failed_before(*e)] or kept
        return kept

    return choose


def _last_failed_ids(config: pytest.Config) -> set[str] | None:
    """With --lf: the ids of the last run's failures (an empty set when there were
    none: pytest then runs everything); None without --lf."""
    if not config.getoption("lf", False):
        return None
    plugin = config.pluginmanager.get_plugin("lfplugin")
    if plugin is None:
        return None
    return {str(nodeid) for nodeid in plugin.lastfailed}
