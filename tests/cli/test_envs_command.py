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
from helpers import REPO as ROOT
from helpers.env_idx_server import command as env_idx_command

from pytest_agentgym.servers.lifecycle import ManagedServer, free_port
from pytest_agentgym.servers.status import HEALTHS


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


def envs_command(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "envs", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def rows(stdout: str) -> dict[str, list[str]]:
    """ENVIRONMENT -> [category, url, health] from the table."""
    found = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[3] in HEALTHS:
            found[cells[0]] = cells[1:4]
    return found


@pytest.mark.parametrize("mode, wordle, textcraft", [
    ("auto", "up", "spawnable"),        # attach to what answers, spawn the rest
    ("attach", "up", "down"),           # everything must answer on its port
    ("spawn", "spawnable", "spawnable"),  # always fresh servers; the running one is not used
])
def test_envs_node_lists_what_that_node_would_attach_to_spawn_or_skip(tmp_path, embedded_server, mode, wordle,
                                                                       textcraft):
    lmrlgym = embedded_server("lmrlgym")
    unused = free_port()
    nodes = tmp_path / "configs" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "field.yaml").write_text(
        "name: field\nmodel: {endpoints: [{kind: reference}]}\n"
        f"envs:\n  servers: {mode}\n  skip: [BabyAI, ALFWorld]\n"
        f"  overrides:\n    Maze: {{url: 'http://127.0.0.1:{lmrlgym.port}'}}\n"
        f"    Wordle: {{port: {lmrlgym.port}}}\n    TextCraft: {{port: {unused}}}\n")
    result = envs_command(tmp_path, "--node", "field", "--timeout", "2")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"node field ({nodes / 'field.yaml'}): servers {mode} (")
    table = rows(result.stdout)
    assert table["Maze"] == ["lightweight", f"http://127.0.0.1:{lmrlgym.port}/maze", "up"]  # its envs url
    assert table["Wordle"][2] == wordle
    assert table["TextCraft"][2] == textcraft
    assert table["BabyAI"][2] == table["ALFWorld"][2] == "skipped"
    if mode == "spawn":
        assert table["Wordle"][1] == "http://127.0.0.1:<free-port>/wordle"
    else:
        assert table["Wordle"][1] == f"http://127.0.0.1:{lmrlgym.port}/wordle"
        assert table["TextCraft"][1] == f"http://127.0.0.1:{unused}"
    if mode == "attach":
        assert f"servers mode attach: start it on port {unused}" in result.stdout
    assert "2 skipped" in result.stdout.splitlines()[-1]


def test_envs_node_accepts_a_path_and_the_shipped_names(tmp_path):
    shipped = envs_command(tmp_path, "--node", "4090", "--timeout", "0.3")
    assert shipped.returncode == 0, shipped.stderr
    assert "servers auto" in shipped.stdout.splitlines()[0]
    assert rows(shipped.stdout)["SciWorld"][2] == "skipped"
    profile = tmp_path / "mine.yml"
    profile.write_text("name: mine\nmodel: {endpoints: [{kind: reference}]}\nenvs: {servers: spawn, skip: [Maze]}\n")
    by_path = envs_command(tmp_path, "--node", str(profile), "--timeout", "0.3")
    assert by_path.returncode == 0, by_path.stderr
    assert rows(by_path.stdout)["Maze"][2] == "skipped" and rows(by_path.stdout)["AgentBench-WebShop"][2] == "down"


def test_envs_with_an_unknown_node_lists_the_known_ones_and_exits_2(tmp_path):
    (tmp_path / "configs" / "nodes").mkdir(parents=True)
    (tmp_path / "configs" / "nodes" / "bench.yaml").write_text("name: bench\nmodel: {endpoints: [{kind: reference}]}\n")
    result = envs_command(tmp_path, "--node", "4080")
    assert result.returncode == 2
    assert result.stderr.startswith("pytest-agentgym envs --node 4080: unknown node; known nodes: 4090, bench, cpu, gpu, local")
    bad_mode = tmp_path / "bad.yaml"
    bad_mode.write_text("name: bad\nmodel: {endpoints: [{kind: reference}]}\nenvs: {servers: sometimes}\n")
    result = envs_command(tmp_path, "--node", str(bad_mode))
    assert result.returncode == 2 and "envs.servers is 'sometimes'" in result.stderr and "'auto'" in result.stderr
    both = envs_command(tmp_path, "--node", "4090", "--config", str(bad_mode))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
