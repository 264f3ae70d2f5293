"""compare_runs and `pytest-agentgym compare`: paired, three-way verdicts on real run
directories (written with the project's own RunDir, RunInfo and EpisodeRecord, or
left by real pytest runs of the reference agent)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.marked_runs import SETTINGS, write_run
from helpers.projects import NODE, make_project, run, suite
from pytest_agentgym.results import fingerprint
from pytest_agentgym.cli import main as cli
from pytest_agentgym.compare import CompareError, compare_runs, settings_differences
from pytest_agentgym.results.store import RunDir, point_latest

pytestmark = pytest.mark.heavy


# -- what is not a run directory ----------------------------------------------------------------------


def _nonexistent(tmp_path: Path) -> Path:
    return tmp_path / "no-such-run"


def _empty(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def _a_file(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello\n")
    return tmp_path / "notes.txt"


def _corrupt_run_json(tmp_path: Path) -> Path:
    path = write_run(tmp_path, "corrupt", {"Maze": "PPP"})
    (path / "run.json").write_text('{"run_id": "corrupt", "started_at": ')
    return path


def _run_json_list(tmp_path: Path) -> Path:
    path = write_run(tmp_path, "listed", {"Maze": "PPP"})
    (path / "run.json").write_text("[1, 2]\n")
    return path


def _no_episodes(tmp_path: Path) -> Path:
    path = write_run(tmp_path, "quiet", {"Maze": "PPP"})
    (path / "episodes.jsonl").unlink()
    return path


def _unreadable_episodes(tmp_path: Path) -> Path:
    path = write_run(tmp_path, "garbled", {"Maze": "PPP"})
    (path / "episodes.jsonl").write_text("not json\n{also not\n")
    return path


@pytest.mark.parametrize("make, says", [
    (_nonexistent, "baseline */no-such-run does not exist; give a run directory"),
    (_empty, "baseline */empty is an empty directory: it is not a pytest-agentgym run directory"),
    (_a_file, "baseline */notes.txt is a file, not a run directory"),
    (_corrupt_run_json, "baseline */corrupt/run.json is not valid JSON (*line 1*): the file is corrupt"),
    (_run_json_list, "baseline */listed/run.json holds a JSON list, not a run's settings object*"),
    (_no_episodes, "baseline */quiet has no episodes.jsonl: the run recorded no episode*"),
    (_unreadable_episodes, "baseline */garbled/episodes.jsonl holds no readable episode (2 unreadable*"),
])
def test_a_baseline_that_is_not_a_readable_run_with_results_is_refused_by_name(tmp_path, make, says):
    import fnmatch
    import warnings

    candidate = write_run(tmp_path, "cand", {"Maze": "PPP"})
    baseline = make(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader warns about each unreadable line
        with pytest.raises(CompareError) as raised:
            compare_runs(baseline, candidate)
    assert fnmatch.fnmatch(str(raised.value), says + "*"), str(raised.value)


@pytest.mark.parametrize("options, says", [
    ({"metric": "accuracy"}, "metric 'accuracy' is not one of success, reward"),
    ({"margin": -5}, "margin must be a number in [0, 1), not -5"),
    ({"margin": 1.5}, "margin must be a number in [0, 1), not 1.5; no change is a drop larger than 1 of a success "
                      "rate or of a [0, 1] reward, so at margin 1 nothing could be regressed (and ok would say "
                      "nothing)"),
    ({"margin": math.nan}, "margin must be a number in [0, 1), not nan"),
    ({"margin": "0.05"}, "margin must be a number in [0, 1), not '0.05'"),
    ({"alpha": 0}, "alpha must be a number in (0, 1), not 0"),
    ({"alpha": 1}, "alpha must be a number in (0, 1), not 1"),
])
def test_bad_options_are_refused_with_the_accepted_range(tmp_path, options, says):
    base = write_run(tmp_path, "base", {"Maze": "PPP"})
    cand = write_run(tmp_path, "cand", {"Maze": "PPP"})
    with pytest.raises(CompareError, match=None) as raised:
        compare_runs(base, cand, **options)
    assert str(raised.value) == says


def test_a_run_is_not_compared_with_itself(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPP"})
    with pytest.raises(CompareError, match="are the same run directory"):
        compare_runs(base, RunDir(base))


# -- settings that change what an episode means ------------------------------------------------------------


def test_different_task_sets_are_refused_with_the_list_and_compared_when_allowed(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPPPPPPP", "Wordle": "PP"})
    cand = write_run(tmp_path, "cand", {"Maze": "---PPPPPPP"})
    with pytest.raises(CompareError) as raised:
        compare_runs(base, cand)
    message = str(raised.value)
    assert "  - Maze tasks: only in the baseline: 0-2; only in the candidate: 8-9\n" in message
    assert "  - Wordle: only in the baseline (2 episode(s)), not in the candidate\n" in message
    assert "--allow-mismatch" in message

    comparison = compare_runs(base, cand, allow_mismatch=True)
    assert comparison.mismatches == ("Maze tasks: only in the baseline: 0-2; only in the candidate: 8-9",
                                     "Wordle: only in the baseline (2 episode(s)), not in the candidate")
    maze = comparison.environments["Maze"]
    assert (maze.n_matched, maze.n_only_base, maze.n_only_cand) == (5, 3, 2)
    assert "5 episode(s) in one run only were left out" in maze.detail
    assert comparison.environments["Wordle"].verdict == "error"
    assert "not in the candidate run" in comparison.environments["Wordle"].detail
    assert comparison.to_json()["mismatches"] == list(comparison.mismatches)


def test_different_rounds_sampling_prompt_server_and_version_are_each_listed(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPP", "Wordle": "PPP"})
    cand = write_run(tmp_path, "cand", {"Maze": "PPP", "Wordle": "PPP"}, version="0.2.0", env_settings={
        "Maze": {"max_rounds": 10, "sampling": {"temperature": 0.7}},
        "Wordle": {"prompt_sha256": "cd" * 32, "server": "attached: wordle 2.0 [ba9876543210]"}})
    with pytest.raises(CompareError) as raised:
        compare_runs(base, cand)
    lines = str(raised.value).splitlines()
    assert "  - Maze max_rounds: 15 in the baseline, 10 in the candidate" in lines
    assert "  - Maze sampling: {temperature: 0.0} in the baseline, {temperature: 0.7} in the candidate" in lines
    assert "  - Wordle prompt_sha256: abababababab in the baseline, cdcdcdcdcdcd in the candidate" in lines
    assert ("  - Wordle server: 'embedded: maze 1.0 [0123456789ab]' in the baseline, "
            "'attached: wordle 2.0 [ba9876543210]' in the candidate") in lines
    assert "  - pytest-agentgym version: 0.1.0 in the baseline, 0.2.0 in the candidate" in lines
    assert not any("model" in line for line in lines)  # the model differs on purpose
    assert len(compare_runs(base, cand, allow_mismatch=True).mismatches) == 5


def test_a_baseline_without_a_fingerprint_says_its_settings_cannot_be_checked(tmp_path):
    base = write_run(tmp_path, "old", {"Maze": "PPP"}, with_fingerprint=False)
    cand = write_run(tmp_path, "cand", {"Maze": "PPP"})
    with pytest.raises(CompareError, match="baseline has no fingerprint .*cannot be checked"):
        compare_runs(base, cand)
    assert compare_runs(base, cand, allow_mismatch=True).mismatches[0].startswith("baseline has no fingerprint")


def test_settings_differences_checks_a_run_that_has_not_started(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPP"})
    info = RunDir(base).read_info()
    keys = {("Maze", t, 1) for t in range(3)}
    same = fingerprint.build(model="other", endpoint_kind="vllm", checkpoint="ckpt/9", envs={"Maze": SETTINGS})
    assert settings_differences(info, keys, same, keys, "0.1.0") == []
    fewer = fingerprint.build(model="other", endpoint_kind="vllm", checkpoint=None,
                              envs={"Maze": {**SETTINGS, "max_rounds": 5}})
    assert settings_differences(info, keys, fewer, {("Maze", 0, 1)}, "0.1.0") == [
        "Maze tasks: only in the baseline: 1-2", "Maze max_rounds: 15 in the baseline, 5 in the candidate"]


# -- verdicts ---------------------------------------------------------------------------------------------------

BABYAI_LIKE = "PPFPFFPPFP" * 9  # 90 tasks, 54 passed


def test_identical_runs_are_ok(tmp_path):
    base = write_run(tmp_path, "base", {"BabyAI": BABYAI_LIKE, "TextCraft": "P" * 100})
    cand = write_run(tmp_path, "cand", {"BabyAI": BABYAI_LIKE, "TextCraft": "P" * 100})
    comparison = compare_runs(base, cand)
    assert comparison.verdict == "ok" and comparison.exit_code() == 0
    babyai = comparison.environments["BabyAI"]
    assert (babyai.base_value, babyai.cand_value, babyai.delta, babyai.n_matched) == (0.6, 0.6, 0.0, 90)
    assert babyai.ci[0] > -0.05 and babyai.p_value == 1.0
    assert comparison.lines()[0] == ("BabyAI success: 0.60 -> 0.60, Δ +0.00 [-0.04, 0.04], n=90 paired, "
                                     "p=1 (Holm) -> OK (margin 0.05)")


def test_a_clearly_worse_candidate_is_regressed_with_delta_interval_and_n_on_its_line(tmp_path):
    worse = "".join("F" if i % 10 in (0, 3) else c for i, c in enumerate(BABYAI_LIKE))  # 18 pass->fail
    base = write_run(tmp_path, "base", {"BabyAI": BABYAI_LIKE})
    cand = write_run(tmp_path, "cand", {"BabyAI": worse})
    comparison = compare_runs(base, cand)
    babyai = comparison.environments["BabyAI"]
    assert babyai.verdict == comparison.verdict == "regressed" and comparison.exit_code() == 1
    assert babyai.delta == pytest.approx(-0.2) and babyai.ci[0] < -0.2 < babyai.ci[1] < -0.05
    assert babyai.p_value == pytest.approx(0.5 ** 18)
    assert comparison.lines() == [f"BabyAI success: 0.60 -> 0.40, Δ -0.20 [{babyai.ci[0]:.2f}, "
                                  f"{babyai.ci[1]:.2f}], n=90 paired, p=3.8e-06 (Holm) -> REGRESSED (margin 0.05)"]
    assert "fell by 0.200 over 90 paired tasks" in babyai.detail
    flips = {(f.task_index, f.base, f.cand) for f in babyai.flips}
    assert (0, "pass", "fail") in flips and (1, "pass", "pass") in flips and len(babyai.flips) == 90


def test_five_tasks_are_inconclusive_and_say_how_many_would_do(tmp_path):
    base = write_run(tmp_path, "base", {"Maze": "PPFPF"})
    cand = write_run(tmp_path, "cand", {"Maze": "PPFPF"})
    comparison = compare_runs(base, cand)
    maze = comparison.environments["Maze"]
    assert maze.verdict == comparison.verdict == "inconclusive"
    # One repeat: the advice takes the variance the paired differences show (identical runs:
    # 0), so it is the score interval's floor for success, z^2 (1 - margin) / margin =
    # 1.95996^2 * 0.95 / 0.05 = 72.99 -> 73 tasks, or ceil(73 / 5) = 15 repeats of the 5 tasks
    # (the baseline's pooled 0.6 * 0.4 gave 2018 tasks / 714 repeats before issue 40).
    assert maze.needed_for_margin == 73 and maze.repeats_for_margin == 15
    assert comparison.lines()[0].endswith(
        "-> INCONCLUSIVE (margin 0.05) (needs about 73 tasks, or 15 repeats of the 5 tasks)")
    assert comparison.exit_code() == 0 and comparison.exit_code(strict=True) == 1


def test_twenty_five_unchanged_passes_cannot_rule_out_a_five_point_drop(tmp_path):
    """25 of 25 passed twice: a drop up to 13 points is still possible (rule of three);
    about 73 unchanged episodes rule out 5 points."""
    base = write_run(tmp_path, "base", {"Maze": "P" * 25, "Wordle": "P" * 73})
    cand = write_run(tmp_path, "cand", {"Maze": "P" * 25, "Wordle": "P" * 73})
    comparison = compare_runs(base, cand)
    maze, wordle = comparison.environments["Maze"], comparison.environments["Wordle"]
    assert maze.verdict == "inconclusive" and maze.ci[0] == pytest.approx(-0.1332, abs=1e-4)
    assert maze.needed_for_margin == 73
    assert wordle.verdict == "ok" and wordle.ci[0] > -0.05


def test_errors_above_the_budget_make_an_error_verdict_and_below_it_are_named(tmp_path):
    base = write_run(tmp_path, "base", {"BabyAI": BABYAI_LIKE, "Maze": "P" * 100})
    cand = write_run(tmp_path, "cand", {"BabyAI": "EEEEEEEEEE" + BABYAI_LIKE[10:],
                                        "Maze": "PPPEPPPPPN" + "P" * 90})
    comparison = compare_runs(base, cand)
    babyai, maze = comparison.environments["BabyAI"], comparison.environments["Maze"]
    assert babyai.verdict == comparison.verdict == "error" and comparison.exit_code() == 1
    assert babyai.n_errors == 10 and babyai.n_matched == 80
    # 10 of 90 are within the budget (16 allowed); scored as failures they decide the verdict
    assert babyai.detail.startswith("the errors decide the verdict: 10 episode(s) errored in one run and scored "
                                    "in the other (10 in the candidate; tasks 0-9)")
    assert comparison.lines()[0].startswith("BabyAI success: ")
    assert "-> ERROR (margin 0.05): the errors decide the verdict: 10 " in comparison.lines()[0]
    # within the budget, but on two tasks the baseline solved: counted as failures of the
    # candidate they leave a drop of more than the margin possible, so they decide the verdict
    assert maze.verdict == "inconclusive" and (maze.n_errors, maze.n_matched) == (2, 98)
    assert ("the errors leave it open: 2 episode(s) errored in one run and scored in the other "
            "(2 in the candidate; tasks 3, 9); left out, the verdict is ok, counted against the "
            "candidate it is inconclusive") in maze.detail
    wide = compare_runs(base, cand, margin=0.1).environments["Maze"]
    assert wide.verdict == "ok" and (wide.n_errors, wide.n_matched) == (2, 98)
    assert "2 episode(s) errored in either run and were left out (tasks 3, 9)" in wide.detail
    # inside a 12% budget the ten errors are not too many, but they are what the verdict hangs on
    within = compare_runs(base, cand, max_error_rate=0.12).environments["BabyAI"]
    # (counted as failures, the ten would be a significant drop beyond the margin)
    assert within.verdict == "error" and within.detail.startswith("the errors decide the verdict: 10 ")
    # 17 of 90 are over the budget: more than 5% per run leaves in 99% of runs
    over = write_run(tmp_path, "over", {"BabyAI": "E" * 17 + BABYAI_LIKE[17:], "Maze": "P" * 100})
    assert compare_runs(base, over).environments["BabyAI"].detail.startswith(
        "17 of 90 episodes errored in either run (18.9%; tasks 0-16): more than an error rate of 5.0% per run "
        "(the error budget) leaves in 99% of runs (at most 16 of 90)")


@pytest.mark.parametrize("passed", [(7, 2), (17, 12)])
def test_a_drop_equal_to_the_margin_is_not_a_drop_beyond_it(tmp_path, passed):
    """0.07 -> 0.02 (the old gate's "0.020 vs baseline 0.070 (floor 0.020): REGRESSION")
    and 0.17 -> 0.12 (in floating point 0.12 - 0.17 < -0.05) drop by exactly the margin."""
    before, after = passed
    base = write_run(tmp_path, "base", {"Maze": "P" * before + "F" * (100 - before)})
    cand = write_run(tmp_path, "cand", {"Maze": "F" * (before - after) + "P" * after + "F" * (100 - before)})
    maze = compare_runs(base, cand).environments["Maze"]
    assert maze.delta == after / 100 - before / 100
    assert (maze.delta < -0.05) == (before == 17)  # representation noise past the margin
    assert maze.p_value == pytest.approx(1 / 32) and maze.p_value < 0.05
    assert maze.verdict == "inconclusive"
    assert compare_runs(base, cand, margin=0.0499).environments["Maze"].verdict == "regressed"


def test_repeats_are_averaged_per_task_before_pairing(tmp_path):
    # task 0: 1 matched repeat (pass, pass); task 1: 3 matched (fail each in base, pass in cand)
    base = write_run(tmp_path, "base", {"Wordle": ["PF", "EF", "EF"]})
    cand = write_run(tmp_path, "cand", {"Wordle": ["PP", "PP", "PP"]})
    wordle = compare_runs(base, cand, max_error_rate=0.5).environments["Wordle"]
    assert (wordle.n_tasks, wordle.n_matched, wordle.n_errors) == (2, 4, 2)
    assert (wordle.base_value, wordle.cand_value) == (0.5, 1.0)  # per key it would be 0.25 -> 1.0
    assert "sign-flip test over tasks" in wordle.method
    assert "n=2 paired tasks (4 episodes)" in wordle.line()


def test_the_sign_flip_test_over_tasks_is_exact_with_repeats(tmp_path):
    # 6 tasks x 2 repeats; 5 tasks lose one repeat (-0.5 each), one is unchanged
    base = write_run(tmp_path, "base", {"Maze": ["PPPPPP", "PPPPPP"]})
    cand = write_run(tmp_path, "cand", {"Maze": ["FFFFFP", "PPPPPP"]})
    maze = compare_runs(base, cand).environments["Maze"]
    assert maze.p_raw == pytest.approx(1 / 32)  # all five nonzero differences negative
    assert maze.delta == pytest.approx(-5 / 12)


def test_holm_adjusts_across_environments(tmp_path):
    """Four environments, each 6 pass->fail of 100 (raw p = 1/64 = 0.016): alone each
    is a regression; with Holm over four, 4/64 = 0.0625 is not significant."""
    envs = ("A", "B", "C", "D")
    base = write_run(tmp_path, "base", {env: "P" * 50 + "F" * 50 for env in envs})
    cand = write_run(tmp_path, "cand", {env: "F" * 6 + "P" * 44 + "F" * 50 for env in envs})
    comparison = compare_runs(base, cand)
    for env in envs:
        judged = comparison.environments[env]
        assert judged.p_raw == pytest.approx(1 / 64) and judged.p_value == pytest.approx(4 / 64)
        assert judged.delta == pytest.approx(-0.06) and judged.verdict == "inconclusive"
    alone = compare_runs(base, cand, envs=["A"])
    assert list(alone.environments) == ["A"] and alone.verdict == "regressed"


def test_the_reward_metric_compares_mean_rewards(tmp_path):
    rewards = [0.5, 0.25, 0.75, 1.0, 0.5, 0.0, 0.5, 0.75] * 5
    lower = [r - 0.25 if i % 2 == 0 else r for i, r in enumerate(rewards)]
    base = write_run(tmp_path, "base", {"BabyAI": "F" * 40}, rewards={"BabyAI": rewards})
    cand = write_run(tmp_path, "cand", {"BabyAI": "F" * 40}, rewards={"BabyAI": lower})
    success = compare_runs(base, cand).environments["BabyAI"]
    reward = compare_runs(base, cand, metric="reward").environments["BabyAI"]
    assert success.delta == 0.0 and success.verdict != "regressed"
    assert reward.metric == "reward" and reward.delta == pytest.approx(-0.125)
    assert reward.verdict == "regressed" and reward.p_raw < 1e-4
    assert "Monte Carlo" in reward.method  # 20 nonzero differences: more than enumeration takes
    assert reward.line().startswith("BabyAI reward: 0.53 -> 0.41, Δ -0.12 [")


# -- the command ---------------------------------------------------------------------------------------------


def test_the_command_exits_0_1_2_and_prints_json(tmp_path, capsys):
    reports = tmp_path / "reports"
    write_run(reports, "base", {"BabyAI": BABYAI_LIKE})
    write_run(reports, "same", {"BabyAI": BABYAI_LIKE})
    write_run(reports, "worse", {"BabyAI": BABYAI_LIKE.replace("P", "F", 20)})
    write_run(reports, "few", {"BabyAI": BABYAI_LIKE[:5]})
    point_latest(reports, "worse")
    r = ["--reports", str(reports)]

    assert cli(["compare", "base", "same", *r]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("-> OK (margin 0.05)")
    assert cli(["compare", str(reports / "base"), "latest", *r]) == 1
    out = capsys.readouterr().out
    assert "-> REGRESSED (margin 0.05)" in out and out.splitlines()[-1] == "compare: REGRESSED (worse against base)"

    assert cli(["compare", "base", "worse", "--json", *r]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {"verdict", "base", "candidate", "metric", "margin", "alpha", "mismatches", "environments"} <= set(data)
    env = data["environments"]["BabyAI"]
    assert {"verdict", "metric", "delta", "ci", "p_value", "n_matched", "n_errors", "needed_for_margin",
            "base_value", "cand_value", "detail"} <= set(env)
    assert data["verdict"] == env["verdict"] == "regressed" and len(env["ci"]) == 2

    assert cli(["compare", "few", "few", *r]) == 2  # the same run twice
    assert "same run directory" in capsys.readouterr().err
    write_run(reports, "few2", {"BabyAI": BABYAI_LIKE[:5]})
    assert cli(["compare", "few", "few2", *r]) == 0
    assert cli(["compare", "few", "few2", "--strict", *r]) == 1
    capsys.readouterr()

    assert cli(["compare", "nowhere", "base", *r]) == 2
    assert "'nowhere' is not a run directory" in capsys.readouterr().err
    assert cli(["compare", "base", "same", "--margin", "-5", *r]) == 2
    assert "margin must be a number in [0, 1), not -5.0" in capsys.readouterr().err
    assert cli(["compare", "base", "same", "--html", str(tmp_path / "c.html"), *r]) == 0
    assert f"compare view: {tmp_path / 'c.html'}" in capsys.readouterr().out  # tests/report/test_compare_view.py
    assert (tmp_path / "c.html").is_file()


# -- real runs of the reference agent ---------------------------------------------------------------------------

MAZE_WORDLE = {"maze": "environment: Maze\ntasks: 0-24\n", "wordle": "environment: Wordle\ntasks: 0-24\n"}


def _real_run(pytester, node: Path, run_id: str, *extra: str) -> None:
    result = run(pytester, "suites", f"--agentgym-node={node}", f"--agentgym-run-id={run_id}",
                 "--agentgym-no-nats", "--agentgym-no-report", *extra)
    assert result.ret == 0, result.stdout.str()


def test_a_random_policy_regresses_against_the_reference_agent_and_the_reference_is_ok_against_itself(pytester):
    reference = make_project(pytester)
    random_policy = pytester.path / "nodes" / "random.yaml"
    random_policy.write_text(NODE.format(policy="random", latency_ms=0))
    for name, body in MAZE_WORDLE.items():
        suite(pytester, name, body)
    _real_run(pytester, reference, "ref")
    _real_run(pytester, random_policy, "rand")
    _real_run(pytester, reference, "ref3a", "--agentgym-repeat=3")
    _real_run(pytester, reference, "ref3b", "--agentgym-repeat=3")
    reports = pytester.path / "reports"

    worse = compare_runs(reports / "ref", reports / "rand")
    assert worse.verdict == "regressed", worse.lines()
    for env in ("Maze", "Wordle"):
        judged = worse.environments[env]
        assert judged.verdict == "regressed" and judged.n_matched == 25 and judged.delta < -0.5, judged.line()
    assert cli(["compare", "ref", "rand", "--reports", str(reports)]) == 1

    # 75 unchanged episodes per environment (3 repeats of 25 tasks) rule out a 5-point drop
    same = compare_runs(reports / "ref3a", reports / "ref3b")
    assert same.verdict == "ok", same.lines()
    assert all(e.n_matched == 75 and e.delta == 0.0 for e in same.environments.values())
    assert cli(["compare", "ref3a", "ref3b", "--reports", str(reports)]) == 0


def test_a_key_missing_in_one_run_and_errored_in_the_other_is_not_charged_to_the_error_budget(tmp_path):
    """Only keys present in both runs can be errored pairs; a key the baseline lacks is
    'only in the candidate', whatever the candidate made of it (a mutation that counted
    it as errored survived every other test)."""
    base = write_run(tmp_path, "base", {"Maze": "PPPPPPPPPPPPPPPPPPPP---"})
    cand = write_run(tmp_path, "cand", {"Maze": "PPPPPPPPPPPPPPPPPPPPEEE"})
    maze = compare_runs(base, cand, allow_mismatch=True).environments["Maze"]
    assert (maze.n_errors, maze.n_only_cand, maze.n_matched) == (0, 3, 20)
    assert maze.verdict != "error", maze.detail
    both = write_run(tmp_path, "both", {"Maze": "PPPPPPPPPPPPPPPPPPPPPPP"})
    errored = compare_runs(both, cand).environments["Maze"]  # the same keys present in both: now charged
    # (3 of 23 are within the binomial budget, 6 allowed; at a budget of 0 they are over it)
    assert errored.n_errors == 3 and compare_runs(both, cand, max_error_rate=0.0).environments[
        "Maze"].detail.startswith("3 of 23 episodes errored")


def test_errors_at_exactly_the_error_budget_are_within_it(tmp_path):
    """The budget is a count (issue 40): 6 errored of 25 paired keys is the most that two runs
    erring at 5% each leave in 99% of runs: judged, not an error; 7 are over it."""
    base = write_run(tmp_path, "base", {"Maze": "P" * 25})
    cand = write_run(tmp_path, "cand", {"Maze": "E" * 6 + "P" * 19})
    maze = compare_runs(base, cand).environments["Maze"]
    assert maze.n_errors == 6 and not maze.detail.startswith("6 of 25"), maze.detail
    over = write_run(tmp_path, "over", {"Maze": "E" * 7 + "P" * 18})
    judged = compare_runs(base, over).environments["Maze"]
    assert judged.verdict == "error" and judged.detail.startswith("7 of 25 episodes errored in either run")
