"""A small project (a node file, suites) and the commands that run in it as users run them:
pytest with the plugin, and ``pytest-agentgym``, each in a subprocess with no scheduler or
``AGENTGYM_`` variable inherited from the shell that runs the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.projects import NODE


def python(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTGYM_", "JOB_COMPLETION_INDEX"))}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest over ``cwd/suites`` with the project's node file."""
    return python(cwd, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=nodes/testnode.yaml",
                  *args)


def agentgym(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``pytest-agentgym ARGS`` in ``cwd``."""
    return python(cwd, "-m", "pytest_agentgym", *args)


def make_project(root: Path, suites: dict[str, str]) -> Path:
    """``root`` with nodes/testnode.yaml (the reference agent, no latency) and ``suites`` (name -> YAML)."""
    (root / "nodes").mkdir(parents=True)
    (root / "nodes" / "testnode.yaml").write_text(NODE.format(policy="reference", latency_ms=0))
    (root / "suites").mkdir()
    for name, body in suites.items():
        (root / "suites" / f"{name}.yaml").write_text(body)
    return root
