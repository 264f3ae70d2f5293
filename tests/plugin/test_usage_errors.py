"""Usage errors as users meet them through pytest: a bad suite file, an unknown node,
environment or option value, a bad AGENTGYM_* variable; each exits 4 naming what to fix.
Each test runs pytest in a subprocess inside a fresh project directory."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, run, suite


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
    suite(pytester, "bad", body)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(expected)


def test_unknown_node_is_a_usage_error_listing_known_nodes(pytester):
    make_project(pytester)
    result = run(pytester, "suites", "--agentgym-node=laptop")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-node=laptop: unknown node; known nodes: *4090*gpu*local*"])


def test_unknown_environment_option_is_a_usage_error(pytester):
    node = make_project(pytester)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-envs=Chess")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-envs: unknown environment(s) Chess; known: *BabyAI*"])


def test_bad_option_value_names_the_option(pytester):
    node = make_project(pytester)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-tasks=a-b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentgym-tasks: task spec 'a-b' is not an index*"])


def test_bad_environment_variable_names_the_variable(pytester, monkeypatch):
    node = make_project(pytester)
    monkeypatch.setenv("AGENTGYM_CONCURRENCY", "zero")
    result = run(pytester, "suites", f"--agentgym-node={node}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*environment variable AGENTGYM_CONCURRENCY: expected a whole number, got 'zero'*"])
