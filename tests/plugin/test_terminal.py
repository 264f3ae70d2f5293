"""What the terminal shows of a run: the header's endpoint line, and when the fallback
endpoint is the one in use."""

from __future__ import annotations

import json

from helpers.projects import make_project, run, suite


def test_the_header_says_when_the_fallback_endpoint_is_used(pytester):
    make_project(pytester)
    node = pytester.path / "fallback.yaml"
    node.write_text(
        "name: fallback\n"
        "model:\n  endpoints:\n"
        "    - {kind: openai, url: 'http://127.0.0.1:9/v1', model: primary-model}\n"
        "    - {kind: reference}\n"
        "envs: {servers: spawn}\n"
    )
    suite(pytester, "maze", "environment: Maze\ntasks: [18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=fallback")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "agentgym: model reference via reference at http://127.0.0.1:*",
        "agentgym: endpoint: primary openai at http://127.0.0.1:9/v1 unhealthy (*",
        "agentgym: endpoint: using fallback reference*",
    ])
    info = json.loads((pytester.path / "reports" / "fallback" / "run.json").read_text())
    assert any("using fallback" in note for note in info["notes"])
