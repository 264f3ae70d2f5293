"""Merge refuses shards of different selections, naming the episodes (issue 39, finding 3).

Real shard runs (the plugin in pytest subprocesses: the embedded Maze server, the reference
agent over HTTP): shard 1/2 of Maze tasks 0-3, and shard 2/2 of the same run id and settings
run with ``-k "not 3"`` (a selection without task 3: -k is no run.json setting, so the
settings check cannot see it). The selection check of run/merge_checks.py is what refuses
them; with it disabled the merge went on to the coverage check, which judged both shards
by shard 1's selection and named no difference of selections (mutation
``merge-selection-check`` in /work/briefs/out/h4-mutations.md).
"""

from __future__ import annotations

import pytest

from helpers.small_project import agentgym, make_project, pytest_run

pytestmark = pytest.mark.faults


def test_merge_refuses_shards_whose_selections_differ_and_names_the_episodes(tmp_path):
    root = make_project(tmp_path / "p", {"maze": "environment: Maze\ntasks: 0-3\n"})
    for shard, extra in (("1/2", ()), ("2/2", ("-k", "not 3"))):
        result = pytest_run(root, f"--agentgym-shard={shard}", "--agentgym-run-id=split", "--agentgym-no-nats", *extra)
        assert result.returncode == 0, result.stdout + result.stderr
    merged = agentgym(root, "merge", "reports/split", "--out", "merged", "--no-report")
    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert "cannot merge these shards" in merged.stderr
    assert "the selections differ (only shard 1/2 selected: Maze 3)" in merged.stderr, merged.stderr
    assert "run every shard with the same suites, --agentgym-envs/-tasks/-repeat and -k" in merged.stderr
    assert not (root / "merged" / "run.json").exists()
