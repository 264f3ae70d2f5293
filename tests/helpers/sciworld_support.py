"""Shared by the SciWorld tests: the skip when the simulator cannot run here, a
server of its own per test module, and the simulator's gold action sequences."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import psutil
import pytest

from helpers import DATA
from helpers.embedded_servers import start_embedded
from pytest_agentgym.servers.embedded.sciworld_tasks import missing_requirements, start_simulator
from pytest_agentgym.process.managed import ManagedServer


#: the original's task list: data_idx -> [task name, variation]
ORIGINAL_GAMES = [tuple(pair) for pair in
                  json.loads((DATA / "sciworld_games_original.json").read_text())["games"]]

needs_simulator = pytest.mark.skipif(
    missing_requirements() is not None,
    reason=f"{missing_requirements()} (the SciWorld tests run the real simulator)",
)


def start_server(log_dir: Path, env: dict[str, str] | None = None) -> ManagedServer:
    """``pytest-agentgym serve sciworld`` as a real process on a free port."""
    return start_embedded("sciworld", "SciWorld", log_dir, env)


def gold_paths(indices: list[int]) -> dict[int, list[str]]:
    """The simulator's own gold action sequence for each task index (one JVM, closed after)."""
    simulator = start_simulator()
    try:
        paths = {}
        for index in indices:
            task, variation = ORIGINAL_GAMES[index]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                simulator.load(task, variation, "", generateGoldPath=True)
            paths[index] = list(simulator.get_gold_action_sequence())
        return paths
    finally:
        simulator.close()


def java_children(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [child for child in children if "java" in child.name()]
