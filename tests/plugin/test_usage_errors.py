"""How a usage error reaches the user of pytest: exit status 4 and the message on stderr,
before any episode, once for each kind of loader that refuses (the settings, the node
profile, a suite file, the baseline). The messages themselves are tested in-process,
where the loaders raise them: tests/config/ (settings, node profiles, suites),
tests/plugin/test_options.py (option values) and tests/run/test_baseline_gate.py."""

from __future__ import annotations

import pytest

from helpers.projects import make_project, run, suite


def test_a_settings_error_exits_4_with_its_message(pytester):
    node = make_project(pytester)
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-envs=Chess")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --agentgym-envs: unknown environment(s) Chess; known: *BabyAI*"])


def test_a_node_profile_error_exits_4_with_its_message(pytester):
    make_project(pytester)
    result = run(pytester, "suites", "--agentgym-node=laptop")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --agentgym-node=laptop: unknown node; known nodes: *4090*gpu*local*"])


def test_a_suite_error_exits_4_with_its_message(pytester):
    node = make_project(pytester)
    suite(pytester, "bad", "environment: Maze\ntasks: [0, 1\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*suites/bad.yaml: not valid YAML*"])


def test_a_baseline_error_exits_4_before_any_episode(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-baseline=base",
                 "--agentgym-run-id=cand")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --agentgym-baseline=base:*baseline base does not exist*"])
    assert not (pytester.path / "reports" / "cand" / "episodes.jsonl").exists()
