"""A pip user's first run, with no clone: a wheel built from this checkout, installed in a
fresh virtual environment that cannot see the checkout, runs ``pytest-agentgym init`` and the
packaged lightweight battery from an empty directory.

The fresh environment gets the wheel with pip (``--no-deps --no-index``) and its
dependencies from the test environment without copying them: a folder of links to each
entry of the test environment's site-packages except this project's own (its editable
finder, its ``.pth`` and its dist-info), named in a ``.pth`` file. A path a ``.pth`` file
names is put on ``sys.path`` but its own ``.pth`` files are not run, so the editable finder
is never installed; the test checks that ``pytest_agentgym`` comes from the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import REPO

pytestmark = pytest.mark.heavy

OWN = ("__editable__", "pytest_agentgym", "__pycache__")


def _sh(*command: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "pytest_agentgym", source / "pytest_agentgym",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist",
        source, cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("pytest_agentgym-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "fresh"
    _sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN):
            (deps / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = _sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout
    Path(purelib.strip(), "deps.pth").write_text(f"{deps}\n")
    _sh(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel,
        cwd=tmp_path)
    return venv


def test_a_wheel_in_a_fresh_venv_runs_init_and_the_lightweight_battery(tmp_path):
    venv = _fresh_venv(tmp_path, _wheel(tmp_path))
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    python = venv / "bin" / "python"
    where = _sh(python, "-c", "import sys, pytest_agentgym; print(pytest_agentgym.__file__); "
                "print(any('editable' in type(f).__module__ for f in sys.meta_path))", cwd=project, env=env)
    module, editable = where.stdout.split()
    assert Path(module).is_relative_to(venv) and editable == "False", where.stdout

    battery = _sh(python, "-m", "pytest", "-p", "no:cacheprovider", "--agentgym-battery=lightweight",
                  "--agentgym-tasks=0-1", cwd=project, env=env)  # the directory is empty: the wheel's suites
    assert "12 passed" in battery.stdout, battery.stdout  # 8 episodes and each environment's gate

    init = _sh(venv / "bin" / "pytest-agentgym", "init", cwd=project, env=env)
    assert "wrote suites/lightweight/babyai.yaml" in init.stdout, init.stdout
    assert {p.name for p in (project / "suites" / "lightweight").iterdir()} == {
        "babyai.yaml", "maze.yaml", "textcraft.yaml", "wordle.yaml"}
    assert (project / ".github" / "workflows" / "agentgym.yml").is_file() and (project / ".gitlab-ci.yml").is_file()

    copies = _sh(python, "-m", "pytest", "-p", "no:cacheprovider", "suites/lightweight", "--agentgym-envs=Maze",
                 "--agentgym-tasks=0", cwd=project, env=env)
    assert "2 passed" in copies.stdout, copies.stdout
