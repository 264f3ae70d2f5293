"""Every data file of the package ships in the wheel: each file under ``pytest_agentgym/`` that
git tracks and that is not Python matches a pattern of pyproject.toml's
``[tool.setuptools.package-data]`` (a clone has it, a pip user would not otherwise).
The wheel itself is built and run in tests/plugin/test_pip_user.py."""

from __future__ import annotations

import subprocess
import tomllib

from helpers import REPO as ROOT

PACKAGE = ROOT / "pytest_agentgym"


def test_every_data_file_of_the_package_is_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {path for pattern in patterns["pytest_agentgym"] for path in PACKAGE.glob(pattern)}
    tracked = subprocess.run(["git", "ls-files", "-z", "pytest_agentgym"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode().split("\0")
    data = {ROOT / name for name in tracked if name and not name.endswith(".py")}
    left_out = sorted(path.relative_to(ROOT).as_posix() for path in data - shipped)
    assert left_out == [], f"add a pattern for these to [tool.setuptools.package-data] in pyproject.toml: {left_out}"
