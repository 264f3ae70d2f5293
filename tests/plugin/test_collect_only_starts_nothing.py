"""``--collect-only`` lists the episodes and nothing more: no environment server or
model is started, no endpoint is contacted, no run directory is written."""

from __future__ import annotations

import pytest

from helpers.projects import ConnectionCounter, make_project, run, suite

pytestmark = pytest.mark.heavy


def test_collect_only_starts_no_server_and_contacts_no_endpoint(pytester):
    node = make_project(pytester)  # a launched reference agent, spawned servers
    suite(pytester, "maze", "environment: Maze\ntasks: [17, 18]\n")
    suite(pytester, "wordle", "environment: Wordle\ntasks: [1]\n")
    counter = ConnectionCounter()  # an attached endpoint: any health probe is a connection
    try:
        attached = node.with_name("attached.yaml")
        attached.write_text(f"name: attached\nmodel:\n  endpoints:\n    - kind: openai\n      url: "
                            f"http://127.0.0.1:{counter.port}/v1\n      model: m\nenvs: {{servers: spawn}}\n")
        for profile in (node, attached):
            result = run(pytester, "suites", f"--agentgym-node={profile}", "--collect-only", "-q")
            assert result.ret == 0, result.stdout.str() + result.stderr.str()
            result.stdout.fnmatch_lines(["suites/maze.yaml::Maze[[]17[]]", "suites/maze.yaml::Maze[[]18[]]",
                                         "suites/wordle.yaml::Wordle[[]1[]]", "3 tests collected*"])
        assert counter.count == 0
    finally:
        counter.close()
    assert not (pytester.path / "reports").exists()  # no run directory, so no server's or model's log
