"""A threshold gate that its errors decide names the command that resumes the run (issue 40):
a real run whose Maze episodes 25 and 26 error (the node lets the suite ask for games the
server does not have), every scored episode passed. Scored alone, the success rate is 1.0 and
meets `>= 0.97`; the error beyond the share the 5% budget expects (1 of 27) counted as a
failure gives 25/26 = 0.962, which misses it, so the gate is a GATE ERROR that says the errors
decide it and how to play them again."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, run, run_json, suite

pytestmark = [pytest.mark.heavy]


def test_a_gate_its_errors_decide_names_the_resume_command(pytester):
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-26'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 0-26\ngates: [success_rate >= 0.97]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=dec", "--agentgym-retries=0")
    output = result.stdout.str() + result.stderr.str()
    info = run_json(pytester, "dec")
    assert info["counts"]["errors"] == 2, info["counts"]
    (gate,) = [g for g in info["gates"] if g["gate"] == "success_rate >= 0.97"]
    assert gate["outcome"] == "error", gate
    assert gate["detail"].startswith("the errors decide this gate"), gate["detail"]
    assert "--agentgym-resume=" in gate["detail"] and str(pytester.path / "reports" / "dec") in gate["detail"], \
        gate["detail"]
    assert "the errors decide this gate" in output
    assert result.ret != 0
