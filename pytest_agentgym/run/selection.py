"""The episodes a run selects before pytest collects: those of the suites under the
command line's paths that ``choose`` (the command line's -k, -m, --deselect, --lf)
keeps, each named by its suite's path as pytest writes node ids. What the run warms up
at configure time and what an xdist controller plans and starts come from here. No
pytest: ``choose`` is the plugin's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

#: an episode as the command line's selection sees it: (suite path as in node ids,
#: environment, task index, repeat)
Episode = tuple[str, str, int, int]
#: the command line's selection of episodes (plugin/selection.py); None keeps them all
Choose = Callable[[Sequence[Episode]], list[Episode]]


def selected_episodes(suites: Sequence[Any], settings: Any, choose: Choose | None,
                      rootpath: Any = None) -> list[Episode]:
    """The episodes of ``suites`` (their tasks and repeats under ``settings``) as (node
    path, environment, task, repeat), those ``choose`` keeps (all without it)."""
    from pytest_agentgym.config.suites import episodes

    every = [(node_path(suite.path, rootpath), suite.environment, task, repeat) for suite in suites
             for task, repeat in episodes(suite, settings.tasks, settings.repeat)]
    return every if choose is None else choose(every)


def node_path(path: Path, rootpath: Any = None) -> str:
    """``path`` as pytest writes it in node ids (relative to the rootdir, else the current
    directory; '/'-separated), so a gate has the same id with and without xdist."""
    root = Path(rootpath) if rootpath is not None else Path.cwd()
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
