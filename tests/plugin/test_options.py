"""Options as the plugin reads them (plugin/options.py): a bad value is a usage error
naming where it was given (the flag or the AGENTGYM_* variable) and what it must be."""

from __future__ import annotations

from helpers.projects import make_project
from helpers.usage_errors import says, settings_refusal


def test_bad_option_value_names_the_option(pytester):
    node = make_project(pytester)
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}", "--agentgym-tasks=a-b")
    assert says(refused, ["*--agentgym-tasks: task spec 'a-b' is not an index*"]), refused


def test_bad_environment_variable_names_the_variable(pytester, monkeypatch):
    node = make_project(pytester)
    monkeypatch.setenv("AGENTGYM_CONCURRENCY", "zero")
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}")
    assert says(refused, ["*environment variable AGENTGYM_CONCURRENCY: expected a whole number, got 'zero'*"]), \
        refused
