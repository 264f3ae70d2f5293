"""A suite's ``when_set``: keys taken where an environment variable is set, such as the
moderate ALFWorld suite's 200 real games on the local node when ``ALFWORLD_DATA`` names
them (config/suites.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.config.suites import SuiteError, load_suite
from pytest_agentgym.envs.spec import load_default_specs

ALFWORLD_SUITE = Path(__file__).resolve().parents[2] / "pytest_agentgym" / "suites" / "moderate" / "alfworld.yaml"
ENVS = list(load_default_specs())


def load(path: Path, node: str = "local"):
    return load_suite(path, node, ENVS)


@pytest.mark.parametrize("value", [None, "", "  "])
def test_without_alfworld_data_the_local_node_plays_the_eight_generated_games(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    else:
        monkeypatch.setenv("ALFWORLD_DATA", value)  # an empty variable is not given
    suite = load(ALFWORLD_SUITE)
    assert suite.tasks == tuple(range(2420, 2428))
    assert [str(gate) for gate in suite.gates] == ["success_rate >= 0.8"]


def test_with_alfworld_data_the_local_node_plays_the_200_test_games(monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", "../shared/alfworld")
    suite = load(ALFWORLD_SUITE)
    assert suite.tasks == tuple(range(2420, 2620))
    assert [str(gate) for gate in suite.gates] == ["success_rate >= 0.4"]


def test_other_nodes_play_the_200_test_games_either_way(monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    assert load(ALFWORLD_SUITE, "4090").tasks == tuple(range(2420, 2620))


@pytest.mark.parametrize("body, message", [
    ("when_set: [ALFWORLD_DATA]", "when_set must map environment variables to suite keys, e.g. "
                                  "'when_set: {ALFWORLD_DATA: {tasks: 2420-2619}}'"),
    ("when_set: {ALFWORLD_DATA: 2420-2619}", "when_set.ALFWORLD_DATA must be a mapping of suite keys"),
    ("when_set: {ALFWORLD_DATA: {environment: Maze}}", "when_set.ALFWORLD_DATA cannot set environment"),
    ("when_set: {ALFWORLD_DATA: {taks: 0-1}}", "when_set.ALFWORLD_DATA cannot set taks"),
])
def test_a_bad_when_set_is_refused_naming_the_file_and_the_form(tmp_path, monkeypatch, body, message):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)  # refused whether or not the variable is set
    path = tmp_path / "bad.yaml"
    path.write_text(f"environment: Maze\ntasks: 0-1\n{body}\n")
    with pytest.raises(SuiteError, match=f"^{path}: ") as refused:
        load(path)
    assert message in str(refused.value)
