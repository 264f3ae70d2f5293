"""An ``AGENTGYM_*`` variable set to the empty string (or blanks) is not given: CI systems map
an unset variable onto "" (GitHub's ``${{ vars.X }}``, GitLab's unset CI/CD variables), and
that must neither wake the plugin nor be a usage error. A real pytest in a subprocess with
every option's variable empty (config/options.py's rows)."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, run, suite
from pytest_agentgym.config.options import OPTIONS


@pytest.fixture
def empty_variables(monkeypatch):
    for option in OPTIONS:
        monkeypatch.setenv(option.env_var, " " if option.parse is None else "")


def test_an_unrelated_project_stays_as_without_the_plugin(pytester, empty_variables):
    pytester.makepyfile(test_math="def test_add():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert "agentgym" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "reports").exists()


def test_a_suite_is_collected_with_what_the_command_line_and_the_suite_say(pytester, empty_variables):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-2\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert [line for line in result.stdout.lines if "::" in line] == [
        "suites/maze.yaml::Maze[0]", "suites/maze.yaml::Maze[1]", "suites/maze.yaml::Maze[2]"]


def test_a_variable_with_a_value_is_still_read(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-2\n")
    monkeypatch.setenv("AGENTGYM_TASKS", "1")
    monkeypatch.setenv("AGENTGYM_CONCURRENCY", "0")
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only", "-q")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    refused.stderr.fnmatch_lines(["*environment variable AGENTGYM_CONCURRENCY: *"])
    monkeypatch.delenv("AGENTGYM_CONCURRENCY")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only", "-q")
    assert [line for line in result.stdout.lines if "::" in line] == ["suites/maze.yaml::Maze[1]"]
