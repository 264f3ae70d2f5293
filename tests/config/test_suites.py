"""Suite files read without pytest (config/suites.py): a broken file is refused with
its path and what to fix."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, suite
from helpers.usage_errors import says
from pytest_agentgym.config.profile import NodeProfile
from pytest_agentgym.config.suites import SuiteError, load_suite


@pytest.mark.parametrize(
    "body, expected",
    [
        ("environment: Maze\ntasks: [0, 1\n", ["*suites/bad.yaml: not valid YAML*"]),
        ("environment: Mazzze\ntasks: 0-1\n", ["*suites/bad.yaml: environment 'Mazzze' is unknown; known: *Maze*"]),
        ("environment: Maze\ntasks: 5-1\n", ["*suites/bad.yaml: tasks: task range '5-1' runs backwards*"]),
        ("environment: Maze\ntasks: 0-1\ngates: [median >= 1]\n", ["*suites/bad.yaml: gates: gate 'median >= 1' is not of the form*"]),
        ("environment: Maze\ntasks: 0-1\nrepeats: 2\n", ["*suites/bad.yaml: unknown key(s) repeats; known:*repeat*"]),
    ],
)
def test_bad_suite_files_are_usage_errors_naming_file_and_fix(pytester, body, expected):
    node = make_project(pytester)
    path = suite(pytester, "bad", body)
    profile = NodeProfile.load(str(node), pytester.path)
    with pytest.raises(SuiteError) as refused:
        load_suite(path, profile.name, list(profile.specs), profile.specs)
    assert says(str(refused.value), expected), refused.value
