"""A run that cannot play its episodes says so once, up front, and exits 3
(infrastructure), instead of one error paragraph per episode: no usable model
endpoint at all, or an environment whose server cannot be had (its extra is not
installed). Real pytest processes; the endpoints are real closed loopback ports."""

from __future__ import annotations

import socket

import pytest

from helpers.projects import run, run_json, suite

pytestmark = pytest.mark.faults

NO_ENDPOINT = """\
name: nowhere
model:
  endpoints:
    - {{kind: tensorzero, url: "http://127.0.0.1:{first}", model_name: qwen35_9b}}
    - {{kind: ollama, url: "http://127.0.0.1:{second}", model: "qwen3:8b"}}
  retries: 0
limits: {{max_rounds: 15, episode_timeout: 60, concurrency: 1}}
envs: {{servers: spawn}}
"""


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_endpoint_stops_the_run_up_front_with_one_message(pytester):
    node = pytester.path / "nowhere.yaml"
    node.write_text(NO_ENDPOINT.format(first=_closed_port(), second=_closed_port()))
    (pytester.path / "suites").mkdir()
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\ngates: [success_rate >= 0.5]\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-24\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=nowhere", "-q")
    output = result.stdout.str()
    assert result.ret == 3, output
    assert output.count("agentgym: NOT PLAYED:") == 1
    result.stdout.fnmatch_lines([
        "agentgym: NOT PLAYED: Maze, Wordle: no model endpoint: *primary tensorzero at http://127.0.0.1:* "
        "unhealthy (connection refused); fallback 1 ollama at *",
        "*exits 3 (infrastructure) (50 episodes planned)*--agentgym-resume=*nowhere*",
        "*52 skipped*"])  # 50 episodes, a gate each
    assert "ERROR at setup" not in output and len(result.outlines) < 40, len(result.outlines)
    info = run_json(pytester, "nowhere")
    assert info["status"] == "no-episode-scored" and info["counts"]["errors"] == 50
    assert [g["outcome"] for g in info["gates"]] == ["not-judged", "not-judged"]


def test_an_environment_whose_extra_is_missing_is_named_once_with_its_pip_install(pytester):
    """ALFWorld's embedded server needs the alfworld extra: hidden from this run, its
    episodes are not played; the SQLGym episodes beside them are."""
    from helpers.projects import make_project

    node = make_project(pytester)
    pytester.makeconftest("import sys\nfor name in ('alfworld', 'textworld'):\n    sys.modules[name] = None\n")
    suite(pytester, "alfworld", "environment: ALFWorld\ntasks: 0-3\n")
    suite(pytester, "sqlgym", "environment: SQLGym\ntasks: 0-3\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=extra", "-q")
    output = result.stdout.str()
    assert result.ret == 3, output
    line = next(line for line in result.outlines if "NOT PLAYED" in line)
    assert line.startswith("agentgym: NOT PLAYED: ALFWorld: the server of ALFWorld could not be had: ")
    assert "pip install 'pytest-agentgym[alfworld]'" in line
    assert output.count("agentgym: NOT PLAYED:") == 1 and "ERROR at setup" not in output
    info = run_json(pytester, "extra")
    assert info["status"] == "finished-with-errors" and info["counts"]["errors"] == 4
    played = [g for g in info["gates"] if g["env"] == "SQLGym"]
    assert all(g["outcome"] != "not-judged" for g in played)
