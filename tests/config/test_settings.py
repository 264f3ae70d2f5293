"""The run's settings resolved without pytest (config/settings.py): options that name
what the node does not have are refused with what it has."""

from __future__ import annotations

import pytest

from helpers.projects import make_project
from helpers.usage_errors import option_values, says
from pytest_agentgym.config.settings import SettingsError, resolve


def test_unknown_environment_option_is_a_usage_error(pytester):
    node = make_project(pytester)
    with pytest.raises(SettingsError) as refused:
        resolve(option_values(node=str(node), envs="Chess"), rootdir=pytester.path, command="pytest")
    assert says(str(refused.value), ["*--agentgym-envs: unknown environment(s) Chess; known: *BabyAI*"]), \
        refused.value
