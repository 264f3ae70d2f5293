"""Shared by the ALFWorld tests: the skip when the engine is not installed, a server
of its own as a real process, and the shipped games' walkthroughs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.embedded_servers import start_embedded
from pytest_agentgym.servers.embedded.alfworld_tasks import (
    SHIPPED_DATA,
    game_file,
    import_alfworld,
    missing_requirements,
    shipped_indices,
)
from pytest_agentgym.process.managed import ManagedServer

if missing_requirements() is None:
    import_alfworld()  # once, before any test imports alfworld: it would set ALFWORLD_DATA

needs_engine = pytest.mark.skipif(
    missing_requirements() is not None,
    reason=f"{missing_requirements()} (the ALFWorld tests run the real TextWorld engine)",
)

#: the games that ship with the package (test items of AgentGym's mapping)
SHIPPED = shipped_indices()


def start_server(log_dir: Path, env: dict[str, str] | None = None) -> ManagedServer:
    """``pytest-agentgym serve alfworld`` as a real process on a free port."""
    return start_embedded("alfworld", "ALFWorld", log_dir, env)


def shipped_rule(index: int) -> str:
    """The path of game ``index`` under a data directory, as the mapping places it."""
    return game_file(Path("/data"), index).relative_to("/data").as_posix()


def game(index: int) -> dict:
    return json.loads(game_file(SHIPPED_DATA, index).read_text())


def walkthrough(index: int) -> list[str]:
    """The shipped game's walkthrough (its own planner's, written by the generator)."""
    return list(game(index)["walkthrough"])


def task_sentence(index: int) -> str:
    """'Your task is to: ...' as the game prints it (the grammar's task rule)."""
    found = re.search(r'"rhs": "(Your task is to: [^"]*)"', game(index)["grammar"])
    assert found, f"game {index} has no task sentence in its grammar"
    return found.group(1)


#: ALFWorld's own games beside the checkout (their README: sources, licences, SHA256SUMS)
REAL_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "alfworld"
needs_real_data = pytest.mark.skipif(
    not (REAL_DATA / "json_2.1.1" / "valid_train").is_dir(),
    reason=f"ALFWorld's own games are not at {REAL_DATA} (a folder holding json_2.1.1/valid_train, "
           f"as alfworld-download lays it out; nothing is downloaded)",
)


def real_walkthrough(index: int) -> list[str]:
    """The walkthrough in the real game file of ``index`` (ALFWorld's own, json_2.1.2 grammar)."""
    return list(json.loads(game_file(REAL_DATA, index).read_text())["walkthrough"])


def task_kind(index: int) -> str:
    """The task type of game ``index``, from its mapping path (``pick_cool_then_place_in_recep``)."""
    return shipped_rule(index).split("/")[2].split("-")[0]
