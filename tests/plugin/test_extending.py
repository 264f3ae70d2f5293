"""Extending the plugin: a conftest adds an environment through the
pytest_agentgym_add_environments hook, and a node replaces an environment's prompt."""

from __future__ import annotations

import pytest
from helpers.projects import episodes, make_project, run, suite

pytestmark = pytest.mark.heavy


def test_a_conftest_adds_an_environment_through_the_hook(pytester):
    node = make_project(pytester)
    pytester.makeconftest("""
        from pytest_agentgym.envs import register
        from pytest_agentgym.envs.maze import MazeAdapter
        from pytest_agentgym.envs.spec import EnvSpec

        @register
        class MirrorMazeAdapter(MazeAdapter):
            name = "MirrorMaze"

        def pytest_agentgym_add_environments(config, specs):
            specs["MirrorMaze"] = EnvSpec(name="MirrorMaze", category="lightweight", port=36999,
                                          path_prefix="/maze", max_rounds=15, embedded="lmrlgym")
    """)
    suite(pytester, "mirror", "environment: MirrorMaze\ntasks: [17, 18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=hooked")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*MirrorMaze*2*1.000*100%*"])
    assert {(r["env"], r["success"]) for r in episodes(pytester, "hooked")} == {("MirrorMaze", True)}


def test_a_node_can_replace_an_environments_prompt(pytester):
    node = make_project(pytester)
    template = pytester.path / "maze-prompt.j2"
    template.write_text("HOUSE RULES: reach the goal. Answer with 'Action: move <direction>'.\n")
    node.write_text(node.read_text().replace(
        "envs: {servers: spawn}", f"envs: {{servers: spawn, overrides: {{Maze: {{prompt_template: '{template}'}}}}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: [18]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=prompted")
    assert result.ret == 0, result.stdout.str()
    (record,) = episodes(pytester, "prompted")
    assert record["turns"][0]["observation"].startswith("HOUSE RULES: reach the goal.")
