"""What a machine without the SciWorld simulator's requirements sees: the server
refuses to start saying what to install, the pool plans no embedded server for it,
and a bad JVM-reuse setting is named. Runs everywhere (no simulator needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.servers.embedded.sciworld_jvms import SPARES_ENV, spares_from_env
from pytest_agentgym.servers.pool import plan_server


@pytest.fixture
def no_java_path(tmp_path, monkeypatch):
    """A PATH with nothing on it: no `java` (and no agentenv `sciworld` command)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return str(empty)


def test_serve_sciworld_without_java_exits_at_once_saying_what_to_install(no_java_path):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_agentgym", "serve", "sciworld", "--port", "9"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": no_java_path},
    )
    assert result.returncode != 0
    assert "pytest-agentgym serve sciworld: the SciWorld server needs" in result.stderr
    assert "a Java runtime (`java` on PATH)" in result.stderr
    assert "pip install 'pytest-agentgym[sciworld]'" in result.stderr
    assert "default-jre-headless" in result.stderr
    assert "Traceback" not in result.stderr


def test_without_java_the_plan_is_unavailable_and_says_how_to_get_the_embedded_server(no_java_path):
    plan = plan_server(load_default_specs()["SciWorld"])
    assert plan.how == "unavailable"
    assert "a Java runtime (`java` on PATH)" in plan.detail
    assert "pytest-agentgym[sciworld]" in plan.detail and "envs.SciWorld.url" in plan.detail


@pytest.mark.parametrize("raw", ["-1", "two", "1.5"])
def test_a_bad_spare_jvm_count_is_named_with_the_fix(raw):
    with pytest.raises(ValueError, match=f"{SPARES_ENV}='{raw}': expected a whole number >= 0"):
        spares_from_env({SPARES_ENV: raw})


def test_spare_jvm_count_defaults_to_two_and_reads_the_environment():
    assert spares_from_env({}) == 2
    assert spares_from_env({SPARES_ENV: " 0 "}) == 0
