"""Usage errors checked in-process, against the loaders a run calls before its first
episode, instead of through a pytest subprocess each (seconds each, milliseconds here).
The patterns are fnmatch patterns, as ``RunResult.stderr.fnmatch_lines`` takes them;
tests/plugin/test_usage_errors.py checks once per kind that such an error reaches the
user as exit status 4 with its message on stderr."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from pytest_agentgym.config.options import BY_NAME, OPTIONS
from pytest_agentgym.plugin.options import resolve_settings


def option_values(**given: str) -> dict[str, Any]:
    """The values ``config.settings.resolve`` takes: every option's row, None unless
    given; a given value is parsed by its row, as the plugin parses what a user writes."""
    values: dict[str, Any] = {option.name: None for option in OPTIONS}
    for name, text in given.items():
        parse = BY_NAME[name].parse
        values[name] = parse(text) if parse is not None else bool(text)
    return values


def settings_refusal(pytester: pytest.Pytester, *args: str) -> str:
    """The message of the ``pytest.UsageError`` that the plugin's settings (the command
    line ``args``, ``AGENTGYM_*`` variables, the node, the baseline) raise in the
    project of ``pytester``; fails when they raise none."""
    config = pytester.parseconfig(*args)
    with pytest.raises(pytest.UsageError) as refused:
        resolve_settings(config)
    return str(refused.value)


def says(message: str, patterns: list[str]) -> bool:
    """Whether ``message`` matches every fnmatch pattern of ``patterns``."""
    return all(fnmatch.fnmatch(message, pattern) for pattern in patterns)
