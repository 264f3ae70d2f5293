"""How the report names and colours what happened, as the terminal and run.json do: the
task grid's unsolved episodes, the gate verdicts' outcomes, and the episode table's
order. Pages are rendered from run directories written through RunDir and read as
files; the browser side is in test_report_browser.py."""

from __future__ import annotations

import json
import re

from pytest_agentgym.report import charts
from pytest_agentgym.report.render import render_run_dir

from helpers.report_fixtures import make_episode, make_info, write_run
from helpers.report_pages import index_of, parse

AMBER, RED, GREEN, PURPLE = "#d4a72c", "#cf222e", "#2da44e", "#8250df"


def grid_fills(html: str) -> dict[int, str]:
    """Task index -> the fill of its square in the (one) outcome grid."""
    grid = re.search(r'<svg[^>]*class="chart outcome-grid".*?</svg>', html, re.S).group(0)
    return {int(attrs["data-t"]): attrs["fill"] for tag, attrs in parse(grid).tags if tag == "rect"}


def test_an_unsolved_task_is_amber_in_the_grid_and_a_failed_one_red(tmp_path):
    # no min_reward: a task the model did not solve is "unsolved" (amber in the terminal and
    # the table), never a failure; with a min_reward a reward below it is a failure (red)
    episodes = [make_episode("BabyAI", 0, outcome="passed"), make_episode("BabyAI", 1, outcome="unsolved"),
                make_episode("BabyAI", 2, outcome="failed"), make_episode("BabyAI", 3, outcome="error"),
                make_episode("BabyAI", 4, outcome="unsolved"), make_episode("BabyAI", 4, repeat=1, outcome="passed")]
    html = render_run_dir(write_run(tmp_path, make_info(environments=("BabyAI",)), episodes).path
                          ).read_text(encoding="utf-8")
    fills = grid_fills(html)
    assert fills[0] == GREEN and fills[1] == AMBER and fills[2] == RED and fills[3] == PURPLE
    assert fills[4] not in (GREEN, AMBER, RED, PURPLE)  # repeats that differ: a colour of their own
    assert "task 1: 1 unsolved" in html and "task 4: 1 passed, 1 unsolved" in html

    legend = dict(re.findall(r'<span class="swatch" style="background:(#[0-9a-f]{6})"></span>([^<]+)</span>',
                             str(charts.outcome_legend())))
    assert legend[AMBER] == "unsolved" and legend[RED] == "failed" and legend[GREEN] == "passed"
    assert legend[PURPLE] == "error" and legend[fills[4]] == "repeats differ"


GATES = (
    {"env": "BabyAI", "gate": "success_rate >= 0.5", "value": 0.8, "passed": True,
     "detail": "success_rate = 0.800 (meets >= 0.5)", "outcome": "passed"},
    {"env": "BabyAI", "gate": "mean_reward >= 0.9", "value": 0.8, "passed": False,
     "detail": "mean_reward = 0.800 (misses >= 0.9)", "outcome": "failed"},
    {"env": "Maze", "gate": "success_rate >= 0.5", "value": 0.4, "passed": False,
     "detail": "only 3 of 5 episodes scored (2 error(s), 40.0% > error budget 5.0%)", "outcome": "error"},
    {"env": "Maze", "gate": "baseline success, margin 0.05", "value": 0.0, "passed": True,
     "detail": "needs about 300 tasks", "outcome": "inconclusive"},
)


def gate_table(html: str) -> list[tuple[str, str, str, str]]:
    """(row class, verdict class, verdict word, gate) per row of the gate verdicts table."""
    body = re.search(r'<table class="gates">.*?</table>', html, re.S).group(0)
    return re.findall(r'<tr class="([^"]*)">\s*<td><span class="verdict ([^"]*)">([^<]*)</span></td>\s*'
                      r'<td>[^<]*</td><td class="mono">([^<]*)</td>', body)


def test_gate_outcomes_are_shown_as_the_terminal_names_them(tmp_path):
    episodes = [make_episode("BabyAI", 0), make_episode("Maze", 0)]
    run = write_run(tmp_path, make_info(environments=("BabyAI", "Maze"), gates=GATES), episodes)
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    assert gate_table(html) == [
        ("passed", "pass", "PASSED", "success_rate &gt;= 0.5"),
        ("failed", "fail", "FAILED", "mean_reward &gt;= 0.9"),
        ("error", "error", "ERROR", "success_rate &gt;= 0.5"),  # the terminal's GATE ERROR, not a FAIL
        ("inconclusive", "warn", "INCONCLUSIVE", "baseline success, margin 0.05"),
    ]
    maze = re.search(r'<th scope="row">Maze</th>(.*?)</tr>', html, re.S).group(1)
    assert '<span class="verdict error">ERROR</span> <span class="mono">success_rate' in maze
    assert '<span class="verdict warn">INCONCLUSIVE</span>' in maze and "FAIL" not in maze
    assert re.search(r'class="badge fail" id="gate-badge">GATES FAILED: 1, ERROR: 1 of 4<', html)
    css = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    assert ".verdict.error { background: var(--error)" in css  # the report's colour of errors

    only_error = write_run(tmp_path / "e", make_info(environments=("Maze",), gates=GATES[2:3]),
                           [make_episode("Maze", 0)])
    html = render_run_dir(only_error.path).read_text(encoding="utf-8")
    assert re.search(r'class="badge error" id="gate-badge">GATES ERROR: 1 of 1<', html)
    assert "GATES FAILED" not in html

    # a run.json written before outcomes were recorded: passed alone says it
    old = [{k: v for k, v in g.items() if k != "outcome"} for g in GATES[:2]]
    older = write_run(tmp_path / "o", make_info(environments=("BabyAI",), gates=tuple(old)),
                      [make_episode("BabyAI", 0)])
    words = [row[2] for row in gate_table(render_run_dir(older.path).read_text(encoding="utf-8"))]
    assert words == ["PASSED", "FAILED"]


def test_a_gate_left_open_by_an_early_stop_is_not_judged_and_not_a_pass(tmp_path):
    gate = {"env": "Maze", "gate": "success_rate >= 0.5", "value": None, "passed": False,
            "detail": "stopped early: decided by the baseline comparison", "outcome": "not-judged"}
    run = write_run(tmp_path, make_info(environments=("Maze",), gates=(gate, GATES[0])), [make_episode("Maze", 0)])
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    assert [row[2] for row in gate_table(html)] == ["NOT JUDGED", "PASSED"]
    assert re.search(r'class="badge warn" id="gate-badge">GATES NOT JUDGED: 1 of 2<', html)


def test_the_episode_table_is_in_task_order_not_finish_order(tmp_path):
    # written as they finished: Maze before BabyAI, task 10 before task 2, repeat 1 before 0
    finished = [("Maze", 3, 0), ("BabyAI", 10, 0), ("BabyAI", 2, 1), ("Maze", 0, 0), ("BabyAI", 2, 0),
                ("BabyAI", 0, 0)]
    episodes = [make_episode(env, task, repeat=repeat) for env, task, repeat in finished]
    run = write_run(tmp_path, make_info(environments=("BabyAI", "Maze")), episodes)
    html = render_run_dir(run.path).read_text(encoding="utf-8")
    envs = json.loads(re.search(r'<script type="application/json" id="report-meta">(.*?)</script>', html).group(1))["envs"]
    shown = [(envs[row["e"]], row["t"], row["r"]) for row in index_of(html)]
    assert shown == [("BabyAI", 0, 0), ("BabyAI", 2, 0), ("BabyAI", 2, 1), ("BabyAI", 10, 0), ("Maze", 0, 0),
                     ("Maze", 3, 0)]
    # the table shown without scripts too
    noscript = re.search(r"<noscript>.*?</noscript>", html, re.S).group(0)
    cells = re.findall(r'<tr class="o-[a-z]+"><td>([^<]*)</td><td>(\d+)</td><td>(\d+)</td>', noscript)
    assert [(env, int(t), int(r)) for env, t, r in cells] == shown
