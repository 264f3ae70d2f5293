"""What the plugin keeps in ``config.stash`` (pytest's typed store, not private attributes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the plugin's module loads in every pytest session: keep it light
    from pytest_agentgym.config.settings import Settings

#: The run's settings, resolved once in pytest_configure.
SETTINGS_KEY = pytest.StashKey["Settings"]()
#: Messages of suite files that could not be loaded (turned into one UsageError).
SUITE_ERRORS_KEY = pytest.StashKey[list]()
#: The suite files collected so far: resolved path -> the path it was first reached by (one
#: file reached by two paths, through a symlinked folder, is one suite).
SUITE_FILES_KEY = pytest.StashKey[dict]()
#: The run (run/evaluation.py EvaluationRun); created in pytest_configure.
RUN_KEY = pytest.StashKey[Any]()
#: Environments the node skips -> how many episodes of theirs were not collected.
NODE_SKIPPED_KEY = pytest.StashKey[dict]()
