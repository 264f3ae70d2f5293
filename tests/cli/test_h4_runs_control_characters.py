"""`pytest-agentgym runs` prints no escape sequence from a run directory (issue 39, finding 5).

A reports directory, written as the plugin writes runs, with a run whose directory name sets
the window title and clears the screen, and whose run.json model, checkpoint and node hold
an OSC 8 hyperlink, a C1 control (CSI, U+009B) and a bell. ``pytest-agentgym runs`` runs in a
subprocess. Before, each reached the terminal raw; now each control character is shown as
its escape (``\\x1b``) and the table keeps one line per run.
"""

from __future__ import annotations

import pytest

import re

from helpers.report_fixtures import make_episode, make_info, write_run
from helpers.small_project import agentgym
from pytest_agentgym.results.shown import shown

pytestmark = pytest.mark.faults  # issue 39's findings are in the fault tier

NAME = "evil\x1b]0;pwned\x07\x1b[2J"
MODEL = "\x1b]8;;http://127.0.0.1:1/x\x1b\\qwen\x1b]8;;\x1b\\"


def test_runs_shows_control_characters_of_names_and_run_json_strings(tmp_path):
    reports = tmp_path / "reports"
    write_run(reports, make_info(NAME, model=MODEL, checkpoint="ckpt\x9b2J", node="node\x07\n1"),
              [make_episode("Maze", 0, run_id=NAME)])
    write_run(reports, make_info("plain"), [make_episode("Maze", 0, run_id="plain")])
    result = agentgym(tmp_path, "runs", str(reports))
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.stdout), repr(result.stdout)
    assert r"evil\x1b]0;pwned\x07\x1b[2J" in result.stdout
    assert r"\x1b]8;;http://127.0.0.1:1/x\x1b\qwen\x1b]8;;\x1b\ " in result.stdout
    assert r"ckpt\x9b2J" in result.stdout and r"node\x07\x0a1" in result.stdout
    rows = [line for line in result.stdout.splitlines() if not line.startswith("    ! ")]  # (notes: no figures)
    assert len(rows) == 3  # the header and one line per run


def test_shown_escapes_c0_del_and_c1_and_keeps_the_rest():
    assert shown("a\x1b[31mb\x7f\x85\u200bé\t") == r"a\x1b[31mb\x7f\x85" + "\u200bé" + r"\x09"
    assert shown("tab\tkept", tab=True) == "tab\tkept"


def test_compare_and_trend_show_control_characters_of_run_json_strings(tmp_path):
    """compare's and trend's text (their lines quote run ids, models and notes) goes through the
    same escaping: a run id that sets the window title is printed as its escapes."""
    reports = tmp_path / "reports"
    for run_id in (NAME, "plain"):
        write_run(reports, make_info(run_id, model=MODEL), [make_episode("Maze", t, run_id=run_id) for t in range(3)])
    for command in (("compare", NAME, "plain"), ("trend", NAME, "plain")):
        result = agentgym(tmp_path, *command, "--reports", str(reports), "--allow-mismatch")
        assert result.returncode in (0, 1), result.stdout + result.stderr
        output = result.stdout + result.stderr
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", output), (command, output)
        assert r"evil\x1b]0;pwned\x07\x1b[2J" in output, (command, output)
