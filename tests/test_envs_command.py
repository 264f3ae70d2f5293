"""`pytest-agentgym envs` run as a real subprocess, with one real server up.

Each environment in the test's envs.yaml is built to be in a known state: one
served by a running process (up), one whose command is installed (spawnable),
one whose command is not (down), one pinned to a URL where nothing runs (down),
and one behind a socket that accepts but never answers (down, within the probe
timeout).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from env_idx_server import command as env_idx_command

from pytest_agentgym.servers.lifecycle import ManagedServer, free_port

ROOT = Path(__file__).resolve().parents[1]


def run_envs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentgym", "envs", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )


def table(stdout: str) -> dict[str, list[str]]:
    """ENVIRONMENT -> [category, url, health, detail...] from the printed table."""
    rows = {}
    for line in stdout.splitlines()[1:]:
        cells = line.split()
        if len(cells) >= 4 and not line.startswith(" "):
            rows[cells[0]] = cells[1:]
    return rows


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    log = tmp_path_factory.mktemp("logs") / "shop.log"
    with ManagedServer("ShopUp", command=env_idx_command("webshop"), log_path=log) as server:
        yield server


def test_envs_lists_health_of_each_environment(running, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    unused = free_port()
    config = {"environments": {
        "ShopUp": {"category": "moderate", "port": running.port, "dialect": "env_idx"},
        "MazeUp": {"category": "lightweight", "port": running.port, "path_prefix": "/maze"},
        "CanSpawn": {"category": "lightweight", "port": unused,
                     "command": "{python} -m http.server {port} --bind {host}"},
        "NotInstalled": {"category": "heavy", "port": unused,
                         "command": "no-such-sciworld --host {host} --port {port}"},
        "PinnedUrl": {"category": "moderate", "port": 36005,
                      "url": f"http://127.0.0.1:{unused}"},
        "Silent": {"category": "moderate", "port": silent.getsockname()[1]},
    }}
    path = tmp_path / "envs.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        result = run_envs("--config", str(path), "--timeout", "0.5")
    finally:
        silent.close()
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    up_url = f"http://127.0.0.1:{running.port}"
    assert rows["ShopUp"][:3] == ["moderate", up_url, "up"]
    assert rows["MazeUp"][:3] == ["lightweight", f"{up_url}/maze", "up"]
    assert rows["CanSpawn"][2] == "spawnable"
    assert rows["NotInstalled"][2] == "down"
    assert "install agentenv-no-such-sciworld" in result.stdout
    assert rows["PinnedUrl"][1:3] == [f"http://127.0.0.1:{unused}", "down"]
    assert "check envs.PinnedUrl.url" in result.stdout
    assert rows["Silent"][2] == "down" and "nothing answered within 0.5 s" in result.stdout
    assert "2 up, 1 spawnable, 3 down" in result.stdout


def test_envs_with_a_bad_config_names_the_file_and_exits_2(tmp_path):
    path = tmp_path / "envs.yaml"
    path.write_text("environments:\n  X:\n    category: tiny\n    port: 1\n")
    result = run_envs("--config", str(path))
    assert result.returncode == 2
    assert str(path) in result.stderr and "category" in result.stderr


def test_envs_lists_the_shipped_environments():
    result = run_envs("--timeout", "0.3")
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    shipped = {"BabyAI", "TextCraft", "Maze", "Wordle", "ALFWorld", "SQLGym", "WebShop", "SciWorld"}
    assert shipped <= rows.keys()
    assert rows["SciWorld"][0] == "heavy" and rows["ALFWorld"][0] == "moderate"
    assert all(rows[name][2] in ("up", "spawnable", "down") for name in shipped)
