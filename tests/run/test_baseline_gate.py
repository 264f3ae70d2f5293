"""--agentgym-baseline where CI meets it: the baseline is checked before any episode,
the comparison is paired and three-way, and the pytest path says exactly what
``pytest-agentgym compare`` says. Real pytest runs of the real reference agent
(its reference and random policies) against the embedded servers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.projects import episodes, make_project, run, suite
from helpers.usage_errors import says, settings_refusal

pytestmark = pytest.mark.heavy

MAZE_WORDLE = {"maze": "environment: Maze\ntasks: 0-24\n", "wordle": "environment: Wordle\ntasks: 0-24\n"}


def project(pytester: pytest.Pytester):
    node = make_project(pytester)
    for name, body in MAZE_WORDLE.items():
        suite(pytester, name, body)
    return node


def compare_cli(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "compare", *args], cwd=pytester.path,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("make_bad, why", [
    (lambda root: None, "baseline base does not exist"),
    (lambda root: (root / "reports" / "base").mkdir(parents=True), "is an empty directory"),
    (lambda root: ((root / "reports" / "base").mkdir(parents=True),
                   (root / "reports" / "base" / "run.json").write_text("{not json")),
     "run.json is not valid JSON*the file is corrupt"),
    (lambda root: ((root / "reports").mkdir(), (root / "reports" / "base").write_text("a file")),
     "is a file, not a run directory"),
], ids=["nonexistent", "empty", "corrupt", "a-file"])
def test_a_baseline_that_is_not_a_run_is_a_usage_error_before_any_episode(pytester, make_bad, why):
    """Refused while the settings are resolved, before anything is started (the exit
    status and stderr of such a run: tests/plugin/test_usage_errors.py)."""
    node = project(pytester)
    make_bad(pytester.path)
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}", "--agentgym-baseline=base",
                               "--agentgym-run-id=cand")
    assert says(refused, [f"--agentgym-baseline=base:*{why}*"]), refused
    assert not (pytester.path / "reports" / "cand" / "episodes.jsonl").exists()


def test_a_margin_outside_0_1_is_a_usage_error(pytester):
    node = project(pytester)
    refused = settings_refusal(pytester, "suites", f"--agentgym-node={node}", "--agentgym-max-drop=-5")
    assert says(refused, ["*--agentgym-max-drop: expected a number from 0 to 1*"]), refused


def test_a_worse_model_regresses_and_the_cli_agrees(pytester):
    node = project(pytester)
    base = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base")
    assert base.ret == 0
    # latest names the baseline until this run starts, then this run.
    cand = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=cand",
               "--agentgym-model=random", "--agentgym-baseline=latest")
    assert cand.ret == 1
    lines = [line for line in cand.outlines if line.startswith("GATE") and "baseline" in line]
    assert len(lines) == 2 and all("-> REGRESSED (margin 0.05)" in line for line in lines)
    cand.stdout.fnmatch_lines(["GATE FAILED: Maze baseline success, margin 0.05: Maze success: 1.00 -> 0.*, "
                               "Δ -0.*[[]-*, -*], n=25 paired, p=* (Holm) -> REGRESSED (margin 0.05)"])
    assert json.loads((pytester.path / "reports" / "cand" / "run.json").read_text())["baseline"].endswith(
        "reports/base")
    cli = compare_cli(pytester, "reports/base", "reports/cand")
    assert cli.returncode == 1
    for line in lines:  # the same words, after the gate's prefix
        assert line.split(": ", 2)[2] in cli.stdout.splitlines()


def test_an_unchanged_model_is_ok_with_enough_episodes_and_inconclusive_with_five(pytester):
    node = project(pytester)
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base",
               "--agentgym-repeat=3").ret == 0
    same = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=same", "--agentgym-repeat=3",
               "--agentgym-baseline=base")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["GATE PASSED: Maze baseline success*-> OK (margin 0.05)",
                               "GATE PASSED: Wordle baseline success*-> OK (margin 0.05)"])
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=few-base",
               "--agentgym-tasks=0-4").ret == 0
    few = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=few", "--agentgym-tasks=0-4",
              "--agentgym-baseline=few-base")
    assert few.ret == 0  # inconclusive warns
    few.stdout.fnmatch_lines(["GATE INCONCLUSIVE: Maze baseline success*n=5 paired*-> INCONCLUSIVE "
                              "(margin 0.05) (needs about * tasks)",
                              "agentgym: an inconclusive comparison does not fail the run*"])
    strict = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=few-strict",
                 "--agentgym-tasks=0-4", "--agentgym-baseline=few-base", "--agentgym-strict-gates")
    assert strict.ret == 1
    assert compare_cli(pytester, "few-base", "few", "--strict").returncode == 1
    assert compare_cli(pytester, "few-base", "few").returncode == 0


def test_a_baseline_run_differently_is_refused_with_the_list_unless_allowed(pytester):
    node = project(pytester)
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base").ret == 0
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=other",
                  "--agentgym-baseline=base", "--agentgym-tasks=0-9", "--agentgym-max-rounds=6")
    assert refused.ret == 4
    err = refused.stderr.str()
    assert "would not measure what the baseline measured" in err
    assert "Maze tasks:" in err and "Maze max_rounds: 15 " in err and "--agentgym-allow-mismatch" in err
    assert not (pytester.path / "reports" / "other" / "episodes.jsonl").exists()
    allowed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=other",
                  "--agentgym-baseline=base", "--agentgym-tasks=0-9", "--agentgym-max-rounds=6",
                  "--agentgym-allow-mismatch")
    assert allowed.ret in (0, 1)
    notes = json.loads((pytester.path / "reports" / "other" / "run.json").read_text())["notes"]
    assert any(n.startswith("compared with baseline") and "max_rounds" in n for n in notes)
    assert len(episodes(pytester, "other")) == 20


def test_a_crash_inside_the_comparison_exits_3_with_one_line_not_1(pytester):
    """A bug in the comparison (an exception no rule expected, here a ZeroDivisionError
    raised from inside compare_runs) must not read as a regression to CI: each baseline
    gate is an error that names it, run.json keeps it, and pytest exits 3 (internal error)."""
    node = project(pytester)
    assert run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base").ret == 0
    pytester.makeconftest("""
        import pytest_agentgym.compare.judgement as judgement

        def _broken(*args, **kwargs):
            raise ZeroDivisionError("float division by zero")

        judgement._estimate = _broken
    """)
    cand = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=cand",
               "--agentgym-baseline=base")
    assert cand.ret == pytest.ExitCode.INTERNAL_ERROR
    cand.stdout.fnmatch_lines(["GATE ERROR: Maze baseline success, margin 0.05: internal error in the baseline "
                               "comparison: ZeroDivisionError at conftest.py:*: float division by zero; this is a "
                               "bug in pytest-agentgym, not a verdict on the model*"])
    assert "Traceback" not in cand.stdout.str() + cand.stderr.str()
    gates = json.loads((pytester.path / "reports" / "cand" / "run.json").read_text())["gates"]
    assert {g["env"]: g["outcome"] for g in gates if g["gate"].startswith("baseline")} == {"Maze": "error",
                                                                                           "Wordle": "error"}
