"""A resume continues its run, the whole of it (issue 39): it never narrows the run's
selection (-k, --agentgym-envs, --agentgym-tasks are refused unless they keep every episode
left to play), never rewrites the run's fingerprint, and checks that fingerprint for every
environment of the run, those it does not play included. A run that ends without playing
all it selected is ``partial``, its gates NOT JUDGED, the gates of environments it never
reached too. Real pytest processes with the reference agent and the embedded servers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.projects import episodes, make_project, run, run_json, suite

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

WORDLE = "environment: Wordle\ntasks: 0-2\ngates: [mean_reward >= 0]\n"


@pytest.fixture
def errored_run(pytester):
    """A run of Maze 23-26 (25 and 26 are errors: the node lets the run ask for games the
    server refuses) and Wordle 0-2: Maze 25-26 are what a resume has left to play."""
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-26'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 23-26\ngates: [mean_reward >= 0]\n")
    suite(pytester, "wordle", WORDLE)
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=errs", "--agentgym-retries=0")
    assert first.ret == 1, first.stdout.str()
    return node


def test_a_narrowing_resume_is_refused_before_any_episode_naming_what_it_leaves_out(pytester, errored_run):
    node = errored_run
    run_file = pytester.path / "reports" / "errs" / "run.json"
    before, lines = run_file.read_bytes(), len(episodes(pytester, "errs"))
    for narrowing in (["--agentgym-envs=Wordle"], ["-k", "Maze and 25"], ["--agentgym-tasks=0-25"]):
        refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=errs", "--agentgym-retries=0",
                      *narrowing)
        assert refused.ret == 4, (narrowing, refused.stdout.str(), refused.stderr.str())
        refused.stderr.fnmatch_lines(["*cannot resume run errs*a resume plays the run's whole selection "
                                      "(7 episodes, 5 of them scored and kept)*",
                                      "*this resume would leave out * episode(s) it has to play:",
                                      "*- Maze: * episode(s) (tasks *26)",
                                      "*resume the whole run with: pytest * suites --agentgym-node=* "
                                      "--agentgym-retries=0 --agentgym-resume=*errs"])
        assert run_file.read_bytes() == before and len(episodes(pytester, "errs")) == lines  # nothing played


def test_a_larger_selection_is_refused_too(pytester, errored_run):
    suite(pytester, "wordle", WORDLE.replace("0-2", "0-4"))
    refused = run(pytester, "suites", f"--agentgym-node={errored_run}", "--agentgym-resume=errs")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*this resume would add 2 episode(s) the run did not select*",
                                  "*- Wordle: 2 episode(s) (tasks 3-4)"])


def test_the_fingerprint_is_checked_for_environments_the_resume_does_not_play(pytester, errored_run):
    """Wordle is all kept and --agentgym-envs=Maze leaves it out (allowed: Maze is all that is
    left to play), but its suite now asks for 5 rounds: the run's Wordle episodes were played
    with 15, so the resume is refused."""
    node = errored_run
    suite(pytester, "wordle", WORDLE + "max_rounds: 5\n")
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=errs", "--agentgym-envs=Maze")
    assert refused.ret == 4, refused.stdout.str()
    refused.stderr.fnmatch_lines(["*cannot resume run errs*", "*- Wordle max_rounds: 8 then, 5 now"])


def test_a_resume_that_keeps_all_that_is_left_is_judged_on_the_whole_run(pytester, errored_run):
    node = errored_run
    fingerprint = run_json(pytester, "errs")["fingerprint"]
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=errs", "--agentgym-retries=0",
                  "--agentgym-envs=Maze")
    assert resumed.ret == 1, resumed.stdout.str()  # Maze 25-26 err again
    info = run_json(pytester, "errs")
    assert info["fingerprint"] == fingerprint and set(info["fingerprint"]["envs"]) == {"Maze", "Wordle"}
    assert info["environments"] == ["Maze", "Wordle"]
    assert info["counts"]["planned"] == 7 and info["counts"]["episodes"] == 7
    assert sorted(g["env"] for g in info["gates"]) == ["Maze", "Wordle"]  # Wordle's gate too, from kept records
    resumed.stdout.fnmatch_lines(["GATE PASSED: Wordle mean_reward >= 0*"])
    # a second resume with other rounds is refused: the fingerprint was not rewritten by the first
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=errs", "--agentgym-max-rounds=5")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*- Maze max_rounds: 15 then, 5 now", "*- Wordle max_rounds: 8 then, 5 now"])


def test_a_run_that_never_reached_an_environment_is_partial_with_its_gates_not_judged(pytester):
    """-x stops at the first failing Maze episode: Wordle, later in the run, has no record."""
    node = make_project(pytester, latency_ms=20)
    suite(pytester, "a_maze", "environment: Maze\ntasks: 0-9\nmin_reward: 2\ngates: [mean_reward >= 0]\n")
    suite(pytester, "b_wordle", "environment: Wordle\ntasks: 0-9\ngates: [success_rate >= 0.5]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=cut", "-x")
    assert result.ret == 1, result.stdout.str()
    info = run_json(pytester, "cut")
    played = info["counts"]["episodes"]
    assert info["status"] == "partial" and played < 20 and info["counts"]["planned"] == 20
    assert {(g["env"], g["outcome"]) for g in info["gates"]} == {("Maze", "not-judged"), ("Wordle", "not-judged")}
    result.stdout.fnmatch_lines([f"GATE NOT JUDGED: Wordle success_rate >= 0.5: run ended early after {played} "
                                 f"of 20 episodes", f"agentgym: run cut partial ({played} episodes)"])
    shown = subprocess.run([sys.executable, "-m", "pytest_agentgym", "runs", "reports", "--json"],
                           cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)[0]
    assert row["status"] == "partial" and row["gates"] == {"not-judged": 2}, row


def test_a_single_errored_episode_reaches_the_final_status_and_the_exit(pytester):
    """One error among three episodes, and again after a resume that plays it (and errs)
    again beside two kept records: never ``finished``, always exit 1."""
    node = make_project(pytester)
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-25'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 23-25\n")
    for args in (["--agentgym-run-id=one"], ["--agentgym-resume=one"]):
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-retries=0", *args)
        assert result.ret == 1, result.stdout.str()
        info = run_json(pytester, "one")
        assert info["status"] == "finished-with-errors" and info["counts"]["errors"] == 1, info["counts"]
        result.stdout.fnmatch_lines(["agentgym: run one finished-with-errors (3 episodes, 1 errors*"])


def test_an_xdist_worker_keeps_only_earlier_generations_scored_records(tmp_path):
    """What an xdist worker of a resume (generation 2) reports without playing: the scored
    records of generation 1, never one of its own generation (a record a crashed worker wrote
    ahead of its item: the replacement worker plays that item), nor an error."""
    from pytest_agentgym.results.ledger import RunLedger
    from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo
    from pytest_agentgym.results.store import RunDir

    run_dir = RunDir(tmp_path / "run")
    run_dir.path.mkdir()

    def scored(task: int, generation: int) -> EpisodeRecord:
        return EpisodeRecord(run_id="run", env="Maze", task_index=task, repeat=1, reward=1.0, success=True,
                             rounds=3, stop_reason="done", started_at="2026-01-01T00:00:00+00:00", duration_s=1.0,
                             model="reference", outcome="passed", generation=generation)

    errored = EpisodeRecord.errored("run", "Maze", 2, 1, ErrorInfo("EnvError", "refused", "env"),
                                    started_at="2026-01-01T00:00:00+00:00", model="reference")
    for record in (scored(0, 1), errored, scored(1, 2), scored(3, 1), scored(3, 2)):
        run_dir.append_episode(record)
    kept = RunLedger.for_worker(run_dir, 2).kept
    assert sorted(kept) == [("Maze", 0, 1)], sorted(kept)
    assert RunLedger.for_worker(run_dir, 1).kept == {}
    assert sorted(RunLedger.for_worker(run_dir, 3).kept) == [("Maze", 0, 1), ("Maze", 1, 1), ("Maze", 3, 1)]
