"""ALFWorld's task mapping and data directory, shared by the embedded server and
the game generator.

AgentGym's ``agentenv-alfworld`` maps a ``game`` index to a file: games 0-2419
to ``<data>/json_2.1.1/train/<task_type>/<task_id>/game.tw-pddl`` (its
``mappings_train.json``), games 2420-2619 to ``<data>/json_2.1.1/valid_train/...``
(``mappings_test.json``). ``alfworld_mappings.json`` holds those two lists in
index order; the same rule is applied to the shipped games and to the real
ALFWorld data, so an index means the same game in both.

ALFWorld's own evaluation splits, which AgentGym does not map, follow (this
project's extension, played by the embedded server only): games 2620-2759 are
``json_2.1.1/valid_seen`` (140 games), 2760-2893 ``json_2.1.1/valid_unseen``
(134), each in sorted path order (:data:`SPLIT_NAMES`).

The data directory is ``ALFWORLD_DATA`` when it is set (alfworld's own variable;
``alfworld-download`` fills ``~/.cache/alfworld``), else the games shipped with
this package (:data:`SHIPPED_DATA`: test games 2420-2427).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_agentgym.process import variables

DATA_ENV = "ALFWORLD_DATA"
SHIPPED_DATA = Path(__file__).parent / "alfworld_data"
MAPPINGS = Path(__file__).parent / "alfworld_mappings.json"
#: the mapping's parts, in index order: the directory under json_2.1.1, also the key in MAPPINGS
SPLITS = ("train", "valid_train", "valid_seen", "valid_unseen")
#: what each part is, for messages
SPLIT_NAMES = {"train": "train", "valid_train": "test", "valid_seen": "valid_seen",
               "valid_unseen": "valid_unseen"}
INSTALL_HINT = "pip install 'pytest-agentgym[alfworld]'"
#: what the server needs: TextWorld's PDDL games run on fast-downward (textworld's 'pddl' extra)
REQUIRED_MODULES = ("alfworld", "textworld", "fast_downward")


def missing_requirements() -> str | None:
    """What to install for the embedded ALFWorld server, or None when it can run here."""
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"the ALFWorld server needs the Python packages {', '.join(missing)}: {INSTALL_HINT}"


def import_alfworld() -> None:
    """Import alfworld without its side effect on ``ALFWORLD_DATA``: ``alfworld.info``
    sets the variable to ``~/.cache/alfworld`` when it is unset, and every process
    started afterwards (a server, a test's subprocess) would take it for the user's
    choice. Call it before any other alfworld import."""
    before = os.environ.get(DATA_ENV)
    import alfworld.info  # noqa: F401

    if before is None:
        os.environ.pop(DATA_ENV, None)
    else:
        os.environ[DATA_ENV] = before


@lru_cache(maxsize=1)
def game_dirs() -> tuple[str, ...]:
    """``<split>/<task_type>/<task_id>`` of every game index, 0-2893."""
    data = json.loads(MAPPINGS.read_text())
    return tuple(f"{split}/{entry}" for split in SPLITS for entry in data[split])


def data_dir() -> tuple[Path, bool]:
    """(the data directory, whether it is the shipped one)."""
    configured = variables.value(DATA_ENV)
    if configured is not None:
        return Path(configured).expanduser(), False
    return SHIPPED_DATA, True


class UnknownGame(LookupError):
    """A game index the mapping does not have, or whose file is not in the data."""


def game_file(root: Path, index: int) -> Path:
    """The ``game.tw-pddl`` of game ``index`` under the data directory ``root``."""
    dirs = game_dirs()
    if not 0 <= index < len(dirs):
        parts = [f"{low}-{high} ({SPLIT_NAMES[split]})" for split, low, high in split_ranges()]
        raise UnknownGame(f"game {index} is not in the ALFWorld mapping: games are {', '.join(parts[:-1])} "
                          f"and {parts[-1]}")
    return root / "json_2.1.1" / dirs[index] / "game.tw-pddl"


def task_type(path: Path | str) -> str:
    """The reset answer's ``task_type``: the game file's two parent directories, as the original
    cuts them from the path (``<task_type>/<task_id>``)."""
    return "/".join(str(path).split("/")[-3:-1])


#: what a run records when the games are the project's own (GET /embedded/data's note)
NOT_COMPARABLE = ("ALFWorld plays the project's generated games: not comparable with published ALFWorld "
                  f"scores ({DATA_ENV} names ALFWorld's own json_2.1.1 games; docs/envs/alfworld.md)")


@lru_cache(maxsize=4)
def describe_data(root: Path, shipped: bool) -> dict[str, Any]:
    """``GET /embedded/data``: which games the server plays and what a score on them compares
    with. Real data is named by split: the games of the mapping found there, the items they
    are, and a sha256 over those files in index order (the first 16 hex digits)."""
    if shipped:
        return {"source": "generated", "comparable": False, "note": NOT_COMPARABLE, "splits": {}}
    splits, parts = {}, []
    for split, low, high in split_ranges():
        digest, found = hashlib.sha256(), 0
        for index in range(low, high + 1):
            path = game_file(root, index)
            if path.is_file():
                digest.update(path.read_bytes())
                found += 1
        if found:
            splits[split] = {"games": found, "of": high - low + 1, "items": f"{low}-{high}",
                             "sha256": digest.hexdigest()[:16]}
            count = f"{found} games" if found == high - low + 1 else f"{found} of {high - low + 1} games"
            parts.append(f"{split} ({count}, items {low}-{high}, sha256 {digest.hexdigest()[:16]})")
    note = (f"ALFWorld plays ALFWorld's own games from {root}: {'; '.join(parts)}" if parts else
            f"ALFWorld's data directory {root} holds none of the mapping's games ({DATA_ENV}; "
            f"docs/envs/alfworld.md)")
    return {"source": str(root), "comparable": bool(parts), "note": note, "splits": splits}


def split_ranges() -> list[tuple[str, int, int]]:
    """(directory under json_2.1.1, first index, last index) of each part of the mapping."""
    data = json.loads(MAPPINGS.read_text())
    ranges, low = [], 0
    for split in SPLITS:
        ranges.append((split, low, low + len(data[split]) - 1))
        low += len(data[split])
    return ranges


def shipped_indices() -> list[int]:
    """The game indices whose files ship with this package."""
    return [index for index in range(len(game_dirs())) if game_file(SHIPPED_DATA, index).is_file()]
