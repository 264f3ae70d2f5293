"""The ScienceWorld simulator behind the embedded SciWorld server: what it needs,
how one is started, and which (task, variation) a task index names.

The simulator is the real one: the ``scienceworld`` PyPI package, whose
``scienceworld.jar`` runs in a JVM of its own that Python drives through py4j.
It needs a Java runtime (``java`` on PATH, Debian: ``default-jre-headless``).

Task mapping (AgentGym's ``agentenv-sciworld``, protocol sheet section 5): the
tasks in ScienceWorld's own ID order (``1-1`` boil, ``1-2`` melt, ... as listed
in the package's ``tasks.json``), leaving out ``5-1, 5-2, 9-1, 9-2, 9-3, 10-1,
10-2``; each task contributes its variations ``0 .. max-1``, where ``max`` is
what the simulator reports. Task index ``i`` is the ``i``-th pair of that list.
With ``scienceworld`` 1.2.3 there are 4,639 pairs. As in the original, the index
is used as a Python list index: a negative one counts from the end, one past the
end is the error ``list index out of range``.
"""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from dataclasses import dataclass
from typing import Any

#: ScienceWorld task ids AgentGym leaves out of its task list.
EXCLUDED_TASK_IDS = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})

INSTALL_HINT = (
    "install the extra and a Java runtime: pip install 'pytest-agentgym[sciworld]' "
    "and apt-get install default-jre-headless (any Java >= 8 on PATH will do)"
)


def missing_requirements() -> str | None:
    """What this machine lacks to run the simulator, or None when it has everything."""
    missing = []
    if importlib.util.find_spec("scienceworld") is None:
        missing.append("the Python package scienceworld")
    if shutil.which("java") is None:
        missing.append("a Java runtime (`java` on PATH)")
    if not missing:
        return None
    return f"the SciWorld server needs {' and '.join(missing)}: {INSTALL_HINT}"


class SimulatorUnavailable(RuntimeError):
    """The simulator cannot start on this machine; the message says what to install."""


def start_simulator() -> Any:
    """A new ``scienceworld.ScienceWorldEnv``: one JVM, with the original's step limit (100)."""
    why = missing_requirements()
    if why:
        raise SimulatorUnavailable(why)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from scienceworld import ScienceWorldEnv

        return ScienceWorldEnv()


@dataclass(frozen=True)
class Game:
    """One task index: a ScienceWorld task and one of its variations."""

    task_name: str
    variation: int


def list_games(simulator: Any) -> list[Game]:
    """AgentGym's task list, built from ``simulator``'s tasks and variation counts."""
    games: list[Game] = []
    for task_id, task_name in simulator.tasks.items():
        if task_id in EXCLUDED_TASK_IDS:
            continue
        count = simulator.get_max_variations(task_name)
        games.extend(Game(task_name, variation) for variation in range(count))
    return games
