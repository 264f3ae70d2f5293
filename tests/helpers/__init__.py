"""Helpers shared by the tests: a user's project, real servers of the tests' own, fixtures
of run directories, and the few waiting and reading functions every test folder needs.

Test modules import them as ``from helpers.projects import run`` (tests/ is on sys.path:
pytest's default "prepend" import mode puts the rootdir conftest's folder there). Some are
also run as scripts or loaded by name in child processes (``python tests/helpers/env_faults.py``,
``AGENTGYM_REFERENCE_POLICIES=helpers.agentbench_policy:HOUSE`` with tests/ on PYTHONPATH)."""

from __future__ import annotations

import os
from pathlib import Path

#: The tests folder (tests/), the folder of these helpers, and the repository above both.
TESTS = Path(__file__).resolve().parents[1]
HELPERS = TESTS / "helpers"
REPO = TESTS.parent

#: Data copied from the golden files for tests (tests/data/).
DATA = TESTS / "data"


def pythonpath(*folders: Path | str) -> str:
    """A PYTHONPATH of ``folders`` in front of the one this process was given."""
    return os.pathsep.join(filter(None, [*map(str, folders), os.environ.get("PYTHONPATH")]))
