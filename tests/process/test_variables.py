"""Environment variables as the plugin reads them (process/variables.py): a variable set to
nothing but blanks is not set, wherever it is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.process import variables
from pytest_agentgym.config.suites import load_suite
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.servers.embedded import alfworld_tasks

ALFWORLD_SUITE = Path(__file__).resolve().parents[2] / "pytest_agentgym" / "suites" / "moderate" / "alfworld.yaml"


@pytest.mark.parametrize("environ, expected", [
    ({}, None),
    ({"X": ""}, None),
    ({"X": " \t\n"}, None),
    ({"X": "0"}, "0"),
    ({"X": "  /data/alfworld \n"}, "/data/alfworld"),
])
def test_value_is_none_for_unset_and_blank_and_stripped_otherwise(environ, expected):
    assert variables.value("X", environ) == expected


def test_value_reads_this_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("AGENTGYM_TEST_VARIABLE", " set ")
    assert variables.value("AGENTGYM_TEST_VARIABLE") == "set"
    monkeypatch.setenv("AGENTGYM_TEST_VARIABLE", "")
    assert variables.value("AGENTGYM_TEST_VARIABLE") is None


def test_set_only_drops_the_blank_ones():
    assert variables.set_only({"A": "", "B": " 1 ", "C": "  "}) == {"B": "1"}


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_alfworld_data_is_unset_for_the_suite_and_the_server_alike(monkeypatch, blank):
    # the suite's when_set and the server it starts must agree: generated games on both sides
    monkeypatch.setenv("ALFWORLD_DATA", blank)
    assert load_suite(ALFWORLD_SUITE, "local", list(load_default_specs())).tasks == tuple(range(2420, 2428))
    assert alfworld_tasks.data_dir() == (alfworld_tasks.SHIPPED_DATA, True)
