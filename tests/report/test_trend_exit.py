"""Which comparisons decide `pytest-agentgym trend`'s exit status: only the last run
against the previous run (one comparison, Holm across its environments). Earlier
steps and the best so far are shown and never decide it. Real run directories,
through the CLI. The false-alarm rate this buys is measured by
benchmarks/gates/trend_calibration.py."""

from __future__ import annotations

from pytest_agentgym.cli import main as cli
from pytest_agentgym.report.trend import build_trend

from helpers.compare_fixtures import paired_run

ALL = "P" * 90
WORSE = "P" * 60 + "F" * 30  # 30 of 90 tasks lost
MAZE = "PPFPPFPPFPPFPPFPPFPPFPPFP"


def trend_dirs(root, babyai: list[str], maze: list[str] | None = None):
    maze = maze or [MAZE] * len(babyai)
    return [paired_run(root, f"s{n}", {"BabyAI": b, "Maze": m}, checkpoint=f"ckpt/step-{n}").path
            for n, (b, m) in enumerate(zip(babyai, maze), start=1)]


def test_an_unchanged_trend_of_ten_checkpoints_exits_0(tmp_path, capsys):
    dirs = trend_dirs(tmp_path, [ALL] * 10)
    assert cli(["trend", *map(str, dirs)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "trend: OK (s10 did not regress against the previous run)"


def test_a_clear_drop_at_the_last_step_in_one_environment_exits_1(tmp_path, capsys):
    dirs = trend_dirs(tmp_path, [ALL] * 9 + [WORSE])
    assert cli(["trend", *map(str, dirs)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "trend: REGRESSED (s10 against s9, the previous run: regressed in 1 of 2 environments)")


def test_a_drop_at_an_earlier_step_does_not_decide(tmp_path, capsys):
    # s5 fell (regressed against s4, shown in its row) and the model recovered: exit 0
    dirs = trend_dirs(tmp_path, [ALL] * 4 + [WORSE] + [ALL] * 5)
    trend = build_trend(dirs)
    assert trend.envs["BabyAI"][4].vs_previous.verdict == "regressed"
    assert cli(["trend", *map(str, dirs)]) == 0
    capsys.readouterr()


def test_the_best_so_far_alone_never_fails_the_trend(tmp_path, capsys):
    # s2 fell, s3 equals s2: ok against the previous run, regressed against the best so far (s1)
    dirs = trend_dirs(tmp_path, [ALL, WORSE, WORSE])
    trend = build_trend(dirs)
    last = trend.envs["BabyAI"][-1]
    assert (last.vs_previous.verdict, last.vs_best.verdict, last.best.run_id) == ("ok", "regressed", "s1")
    assert trend.exit_code() == 0
    assert cli(["trend", *map(str, dirs)]) == 0
    out = capsys.readouterr().out
    assert "BabyAI: regressed against s1 (the best so far; informational)" in out
    assert "does not decide the exit status" in out


def test_an_environment_new_in_the_last_run_is_not_judged(tmp_path, capsys):
    dirs = [paired_run(tmp_path, "s1", {"BabyAI": ALL}, checkpoint="ckpt/step-1").path,
            paired_run(tmp_path, "s2", {"BabyAI": ALL, "Maze": "F" * 25}, checkpoint="ckpt/step-2").path]
    trend = build_trend(dirs)
    assert trend.envs["Maze"][-1].vs_previous is None and trend.exit_code() == 0
