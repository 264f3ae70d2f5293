"""--agentgym-max-drop is the baseline comparison's margin, whose range is [0, 1): compare
refuses 1 (no change is a drop larger than 1, so nothing could be regressed). A run given
1 is refused at start, naming the option and the range, instead of learning it at its end
from every baseline gate's ``error`` (issue 40)."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, suite
from helpers.usage_errors import option_values, says, settings_refusal
from pytest_agentgym.config.options import parse_margin
from pytest_agentgym.config.settings import resolve


@pytest.mark.parametrize("text", ["1", "1.0", "1.5", "-0.01", "nan", "inf", "five"])
def test_a_margin_outside_0_1_open_is_refused_naming_the_range(text):
    with pytest.raises(ValueError, match=r"expected a number from 0 to 1, below 1 \(the range is \[0, 1\)"):
        parse_margin(text)


@pytest.mark.parametrize("text, value", [("0", 0.0), ("0.05", 0.05), ("0.999", 0.999)])
def test_a_margin_in_range_is_kept(text, value):
    assert parse_margin(text) == value


def test_max_drop_1_is_a_usage_error_at_start_from_the_flag_and_the_variable(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-4\n")
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}", "--agentgym-max-drop=1")
    assert says(refused, ["*--agentgym-max-drop: expected a number from 0 to 1, below 1 (the range is [0, 1)*"
                          "at 1 no drop could be larger than the margin*got 1*"]), refused
    monkeypatch.setenv("AGENTGYM_MAX_DROP", "1")
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}")
    assert says(refused, ["*AGENTGYM_MAX_DROP*[0, 1)*got 1*"]), refused
    monkeypatch.delenv("AGENTGYM_MAX_DROP")
    settings = resolve(option_values(node=str(node), max_drop="0.999"), rootdir=pytester.path, command="pytest")
    assert settings.max_drop == 0.999
