"""`pytest-agentgym trend`: runs ordered by checkpoint step or start time, each judged
against the previous run and the best so far (compare_runs), the terminal table,
the exit status (the last run against the previous run alone decides it; the best so
far is informational) and the HTML page; on run directories written through RunDir."""

from __future__ import annotations

import re

import pytest

from pytest_agentgym.cli import main as cli
from pytest_agentgym.compare import CompareError
from pytest_agentgym.report.trend import build_trend, checkpoint_step
from pytest_agentgym.report.trend_page import write_trend_html

from helpers.compare_fixtures import paired_run
from helpers.page_icon import without_the_icon
from helpers.report_pages import parse

ALL = "P" * 90
WORSE = "P" * 60 + "F" * 30  # 30 of 90 tasks lost


def runs(root, *specs):
    """``(run_id, checkpoint, started hour, BabyAI marks)`` each; returns the directories."""
    return [paired_run(root, run_id, {"BabyAI": marks, "Maze": "PPPPP"}, checkpoint=checkpoint,
                       started_at=f"2026-11-2{hour // 24 + 1}T{hour % 24:02d}:00:00+00:00").path
            for run_id, checkpoint, hour, marks in specs]


def row_of(lines: list[str], run_id: str, env: str = "BabyAI") -> list[str]:
    """The cells of ``run_id``'s row in ``env``'s table (split on runs of 2+ spaces)."""
    start = lines.index(env)
    for line in lines[start + 2:]:
        if not line:
            break
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == run_id:
            return cells
    raise AssertionError(f"no row {run_id} in {env}'s table")


@pytest.mark.parametrize("checkpoint, step", [
    ("ckpt/step-1200", 1200), ("ckpt/step-1200/", 1200), ("runs/7/checkpoint-40", 40), ("ckpt/final", None),
    ("Qwen/Qwen3-0.6B", None), (None, None), ("", None)])
def test_the_step_is_the_number_a_checkpoint_path_ends_in(checkpoint, step):
    assert checkpoint_step(checkpoint) == step


def test_runs_are_ordered_by_checkpoint_step_as_numbers_not_by_time_or_as_given(tmp_path):
    paths = runs(tmp_path, ("late", "ckpt/step-3000", 10, ALL), ("early", "ckpt/step-200", 12, ALL),
                 ("middle", "ckpt/step-1000", 11, ALL))
    trend = build_trend(paths)
    assert [r.run_id for r in trend.runs] == ["early", "middle", "late"]  # 200 < 1000 < 3000
    assert trend.order == "checkpoint step"
    lines = trend.lines()
    assert lines[0].startswith("trend: 3 run(s) ordered by checkpoint step")
    table = lines[lines.index("BabyAI") + 1:lines.index("BabyAI") + 5]
    assert [re.split(r"\s{2,}", line.strip())[0] for line in table] == ["run", "early", "middle", "late"]


def test_without_a_step_in_every_checkpoint_runs_are_ordered_by_start_time(tmp_path):
    paths = runs(tmp_path, ("b", "ckpt/step-100", 11, ALL), ("c", "Qwen/Qwen3-0.6B", 12, ALL),
                 ("a", "ckpt/step-900", 10, ALL))
    trend = build_trend(paths)
    assert [r.run_id for r in trend.runs] == ["a", "b", "c"]
    assert trend.order == "start time" and trend.order_note == "no step number in the checkpoint of c (Qwen/Qwen3-0.6B)"


def test_each_run_is_judged_against_the_previous_and_the_best_so_far(tmp_path):
    paths = runs(tmp_path, ("s1", "ckpt/step-1", 1, ALL), ("s2", "ckpt/step-2", 2, WORSE),
                 ("s3", "ckpt/step-3", 3, WORSE))
    trend = build_trend(paths)
    lines = trend.lines()
    assert row_of(lines, "s1")[:3] == ["s1", "qwen3.5-9b", "ckpt/step-1"]  # run, model, checkpoint
    assert row_of(lines, "s1")[5:] == ["—", "—"]
    # Clopper-Pearson 95% of 60/90 (beta quantiles 0.025 of B(60, 31), 0.975 of B(61, 30)):
    # [0.5595, 0.7626], for the success rate and for the rewards (all 0 or 1) alike.
    assert row_of(lines, "s2")[3:] == ["66.7% [55.9%, 76.3%]", "0.667 [0.559, 0.763]", "regressed Δ-0.33",
                                       "regressed Δ-0.33 vs s1"]
    # s3 equals s2 (ok against the previous run) but is still 33 points below the best so far, s1.
    assert row_of(lines, "s3")[5:] == ["ok Δ+0.00", "regressed Δ-0.33 vs s1"]
    assert row_of(lines, "s3", "Maze")[5:] == ["inconclusive Δ+0.00", "inconclusive Δ+0.00 vs s2"]
    # The best so far is shown, never deciding: only the last run against the previous one does.
    assert trend.last_failures() == []
    assert trend.best_notes() == ["BabyAI: regressed against s1 (the best so far; informational)"]
    assert "  BabyAI: regressed against s1 (the best so far; informational)" in lines
    assert trend.exit_code() == 0 and lines[-1] == "trend: OK (s3 did not regress against the previous run)"

    # A fourth checkpoint back at s1's level: ok against both, exit 0.
    paths += runs(tmp_path, ("s4", "ckpt/step-4", 4, ALL))
    recovered = build_trend(paths)
    assert row_of(recovered.lines(), "s4")[5:] == ["ok Δ+0.33", "ok Δ+0.00 vs s1"]
    assert recovered.exit_code() == 0 and recovered.verdict_line().startswith("trend: OK (s4 did not regress")

    # Of equal bests the latest is taken, and one comparison serves both columns.
    again = build_trend(runs(tmp_path / "again", ("t1", "ckpt/1", 1, ALL), ("t2", "ckpt/2", 2, ALL),
                             ("t3", "ckpt/3", 3, WORSE)))
    assert row_of(again.lines(), "t3")[5:] == ["regressed Δ-0.33", "regressed Δ-0.33 vs t2"]
    assert again.envs["BabyAI"][-1].vs_best is again.envs["BabyAI"][-1].vs_previous


def test_the_command_exits_0_1_and_2(tmp_path, capsys):
    reports = tmp_path / "reports"
    runs(reports, ("s1", "ckpt/step-1", 1, ALL), ("s2", "ckpt/step-2", 2, WORSE), ("s3", "ckpt/step-3", 3, ALL),
         ("short", "ckpt/step-9", 9, ALL[:80]), ("s2b", "ckpt/step-2b", 5, WORSE))
    r = ["--reports", str(reports)]
    assert cli(["trend", "s1", "s3", *r]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("trend: OK (s3 did not regress")
    assert cli(["trend", "s3", "s2", "s1", *r]) == 0  # by step s3 is the last, back at s1's level
    assert "trend: OK (s3" in capsys.readouterr().out
    assert cli(["trend", "s1", "s2", *r]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "trend: REGRESSED (s2 against s1, the previous run: regressed in 1 of 2 environments)"
    assert "informational" not in out  # the best so far is the previous run: said once
    assert cli(["trend", "s1", "s2", "s2b", *r]) == 0  # s2b = s2: ok against s2, below s1 only by the best
    assert "BabyAI: regressed against s1 (the best so far; informational)" in capsys.readouterr().out
    assert cli(["trend", "s1", *r]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "trend: OK (s1 is the only run)"

    for args, says in ((["nowhere"], "'nowhere' is not a run directory"),
                       (["s1", str(reports / "s1")], "is given twice"),
                       (["s1", "s2", "--margin", "-1"], "margin must be a number in [0, 1), not -1.0"),
                       (["s1", "s2", "--margin", "1"], "margin must be a number in [0, 1), not 1.0"),
                       (["s1", "s2", "--alpha", "1"], "alpha must be a number in (0, 1), not 1.0"),
                       (["s1", "short"], "BabyAI tasks: only in the baseline: 80-89")):
        assert cli(["trend", *args, *r]) == 2, args
        assert says in capsys.readouterr().err, args
    assert cli(["trend", "s1", "short", "--allow-mismatch", *r]) == 0
    assert "settings differ (allowed): s1 -> short: BabyAI tasks: only in the baseline: 80-89" in capsys.readouterr().out


def test_the_page_draws_each_metric_with_its_band_and_the_table(tmp_path, capsys):
    hostile = 'ckpt/<img src=x onerror="alert(1)">/step-'
    paths = runs(tmp_path, ("s1", hostile + "1", 1, ALL), ("s2", hostile + "2", 2, WORSE),
                 ("s3", hostile + "3", 3, ALL))
    target = tmp_path / "trend.html"
    assert cli(["trend", *map(str, paths), "--html", str(target)]) == 0
    assert f"trend page: {target}" in capsys.readouterr().out
    html = target.read_text(encoding="utf-8")
    page = parse(html)
    charts = [attrs["aria-label"] for tag, attrs in page.tags if tag == "svg"]
    assert charts == ["BabyAI: success rate across 3 run(s)", "BabyAI: mean reward across 3 run(s)",
                      "Maze: success rate across 3 run(s)", "Maze: mean reward across 3 run(s)"]
    # s2 regressed in BabyAI: its point is a triangle in both BabyAI charts, nowhere else.
    assert html.count('class="point regressed"') == 2 and html.count('class="point"') == 10
    assert html.count('class="band"') == 4 and "s2 (ckpt/&lt;img src=x" in html
    assert "<td>regressed Δ-0.33 vs s1</td>" not in html and 'class="verdict-regressed">regressed Δ-0.33 vs s1' in html
    assert not [tag for tag, _ in without_the_icon(page.tags) if tag in ("img", "script", "link", "iframe")]
    assert not [(tag, name) for tag, attrs in page.tags for name in attrs if name.startswith("on")]
    assert "trend: OK (s3" in html

    with pytest.raises(CompareError, match="give at least one run directory"):
        build_trend([])
    assert write_trend_html(build_trend(paths[:1]), tmp_path / "one.html").read_text().count("<svg") == 4


def test_the_verdict_is_one_short_line_after_one_line_per_environment(tmp_path, capsys):
    envs = ("BabyAI", "TextCraft", "Maze", "Wordle", "SciWorld", "ALFWorld", "WebShop", "SQLGym")
    paths = [paired_run(tmp_path, run_id, {env: marks for env in envs}, checkpoint=f"ckpt/step-{n}").path
             for n, (run_id, marks) in enumerate((("step-1000", ALL), ("step-1200", WORSE)), start=1)]
    assert cli(["trend", *map(str, paths)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "trend: REGRESSED (step-1200 against step-1000, the previous run: regressed in 8 of 8 environments)"
    assert len(lines[-1]) < 120  # it was one sentence naming every environment (about 700 characters)
    head = lines.index("step-1200 against step-1000, the previous run (this decides the exit status):")
    per_env = lines[head + 1:-1]
    assert [line.split()[0] for line in per_env] == list(envs)  # one line each, in the run's order
    for line in per_env:
        assert line.startswith("  ") and "1.00 -> 0.67, Δ -0.33" in line and line.endswith("-> REGRESSED (margin 0.05)")

    # an environment the previous run lacks gets a line saying it is not judged
    more = paired_run(tmp_path, "step-1400", {env: WORSE for env in (*envs, "Extra")}, checkpoint="ckpt/step-1400")
    trend = build_trend([*paths, more.path], allow_mismatch=True)
    assert "  Extra: not in step-1200; not judged" in trend.last_run_lines()
    assert trend.verdict_line() == "trend: OK (step-1400 did not regress against the previous run)"
    assert build_trend(paths[:1]).last_run_lines() == []


def test_the_tables_name_each_runs_model_and_checkpoint(tmp_path):
    paths = [paired_run(tmp_path, "a", {"BabyAI": ALL}, checkpoint="ckpt/step-1", model="qwen3-0.6b").path,
             paired_run(tmp_path, "b", {"BabyAI": ALL}, checkpoint=None, model="llama-3.2-1b",
                        started_at="2026-11-21T13:00:00+00:00").path]
    trend = build_trend(paths, allow_mismatch=True)
    lines = trend.lines()
    assert re.split(r"\s{2,}", lines[lines.index("BabyAI") + 1].strip())[:3] == ["run", "model", "checkpoint"]
    assert row_of(lines, "a")[:3] == ["a", "qwen3-0.6b", "ckpt/step-1"]
    assert row_of(lines, "b")[:3] == ["b", "llama-3.2-1b", "—"]
    html = write_trend_html(trend, tmp_path / "trend.html").read_text(encoding="utf-8").replace(' class=""', "")
    assert "<th>model</th><th>checkpoint</th>" in html
    assert "<td>a</td><td>qwen3-0.6b</td><td>ckpt/step-1</td>" in html and "<td>b</td><td>llama-3.2-1b</td><td>—</td>" in html


def x_labels(svg: str) -> list[tuple[str, str]]:
    """(tooltip, text) of each x label of a trend chart."""
    return re.findall(r'<g class="x-label"><title>([^<]*)</title><text [^>]*>([^<]*)</text></g>', svg)


def test_x_labels_are_steps_or_short_run_ids_with_the_whole_id_in_their_tooltip(tmp_path):
    by_step = runs(tmp_path / "steps", ("first", "ckpt/step-200", 1, ALL), ("second", "ckpt/step-1000", 2, ALL))
    html = write_trend_html(build_trend(by_step), tmp_path / "steps.html").read_text(encoding="utf-8")
    assert x_labels(html)[:2] == [("first (ckpt/step-200; model qwen3.5-9b)", "200"),
                                  ("second (ckpt/step-1000; model qwen3.5-9b)", "1000")]

    long_ids = ["20261121-120000-eval-qwen3-0.6b-lightweight-a1b2", "20261121-130000-eval-qwen3-0.6b-lightweight-c3d4"]
    by_time = [paired_run(tmp_path / "time", run_id, {"BabyAI": ALL}, checkpoint="Qwen/Qwen3-0.6B",
                          started_at=f"2026-11-21T1{n}:00:00+00:00").path for n, run_id in enumerate(long_ids, start=2)]
    html = write_trend_html(build_trend(by_time), tmp_path / "time.html").read_text(encoding="utf-8")
    labels = x_labels(html)[:2]
    assert [title.split(" ")[0] for title, _ in labels] == long_ids
    assert [text for _, text in labels] == ["20261121-1…ight-a1b2", "20261121-1…ight-c3d4"]
    assert all(len(text) <= 20 for _, text in labels)
