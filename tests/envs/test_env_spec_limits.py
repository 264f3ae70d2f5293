"""The per-environment limits in configs/envs.yaml and node overrides: the server's
per-request timeout and its start attempts and back-off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.envs.protocol import DEFAULT_REQUEST_TIMEOUT
from pytest_agentgym.envs.spec import EnvConfigError, load_default_specs, spec_from_mapping
from pytest_agentgym.config.profile import ProfileError, load_env_specs

BASE = {"category": "lightweight", "port": 36003}


def test_shipped_envs_have_a_request_timeout_separate_from_the_episode_budget():
    specs = load_default_specs()
    assert DEFAULT_REQUEST_TIMEOUT == 60.0
    assert specs["Maze"].request_timeout == 60.0
    assert specs["WebShop"].request_timeout == 120 and specs["SciWorld"].request_timeout == 120
    assert (specs["Maze"].start_attempts, specs["Maze"].start_backoff) == (3, 1.0)


def test_envs_yaml_keys_set_the_limits():
    spec = spec_from_mapping("Maze", {**BASE, "request_timeout": 2.5, "start_attempts": 5,
                                      "start_backoff": 0.5}, "envs.yaml")
    assert (spec.request_timeout, spec.start_attempts, spec.start_backoff) == (2.5, 5, 0.5)


@pytest.mark.parametrize("key, value, kind", [
    ("request_timeout", 0, "positive number of seconds"),
    ("request_timeout", "fast", "positive number of seconds"),
    ("request_timeout", True, "positive number of seconds"),
    ("start_backoff", -1, "positive number of seconds"),
    ("startup_timeout", "1m", "positive number of seconds"),
    ("start_attempts", 0, "positive integer"),
    ("start_attempts", 1.5, "positive integer"),
])
def test_bad_limits_name_the_key_and_what_it_must_be(key, value, kind):
    with pytest.raises(EnvConfigError) as caught:
        spec_from_mapping("Maze", {**BASE, key: value}, "envs.yaml")
    assert f"environments.Maze.{key} must be a {kind}, got {value!r}" in str(caught.value)


def test_a_node_profile_overrides_the_request_timeout(tmp_path):
    profile = {"envs": {"overrides": {"Maze": {"request_timeout": 5, "start_attempts": 1}}}}
    specs = load_env_specs(tmp_path, profile, Path("node.yaml"))
    assert (specs["Maze"].request_timeout, specs["Maze"].start_attempts) == (5, 1)
    assert specs["Wordle"].request_timeout == 60.0
    with pytest.raises(ProfileError, match="request_timeout must be a positive number"):
        load_env_specs(tmp_path, {"envs": {"overrides": {"Maze": {"request_timeout": 0}}}},
                       Path("node.yaml"))
