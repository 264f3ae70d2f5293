"""Mutation-pass test for compare's lines (cli/reading.py through results/shown.py;
benchmarks/gates/mutations_resume.py): an environment's line quotes the environment's name
as the records wrote it, so a name that sets the window title is printed as its escapes.
``pytest-agentgym compare`` in a subprocess on run directories written as the plugin does."""

from __future__ import annotations

import re

from helpers.report_fixtures import make_episode, make_info, write_run
from helpers.small_project import agentgym

ENV = "Maze\x1b]0;pwned\x07"


def test_compare_shows_an_environments_name_as_its_escapes(tmp_path):
    reports = tmp_path / "reports"
    for run_id in ("base", "cand"):
        write_run(reports, make_info(run_id, environments=(ENV,)),
                  [make_episode(ENV, t, run_id=run_id) for t in range(3)])
    result = agentgym(tmp_path, "compare", "base", "cand", "--reports", str(reports), "--allow-mismatch")
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1), output
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", output), output
    assert r"Maze\x1b]0;pwned\x07 " in result.stdout, output
