"""--agentgym-resume: a killed, interrupted or errored run continues in its own directory
with exactly the episodes it is missing (and the errored ones again, as the next
generation), and refuses settings that would change what an episode means. Every run
is a real pytest process with the real reference agent and embedded servers; kills are
real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.projects import episodes, make_project, run, run_json, suite
from helpers.run_dirs import written_lines
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

#: 25 Maze episodes + 15 Wordle episodes = 40.
FORTY = {"maze": "environment: Maze\ntasks: 0-24\n", "wordle": "environment: Wordle\ntasks: 0-14\n"}


def forty_episode_project(pytester: pytest.Pytester, latency_ms: int = 40) -> Path:
    node = make_project(pytester, latency_ms=latency_ms)
    for name, body in FORTY.items():
        suite(pytester, name, body)
    return node


def start(pytester: pytest.Pytester, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def keys(records: list[dict]) -> list[tuple]:
    return [(r["env"], r["task_index"], r["repeat"]) for r in records]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_run_resumes_with_exactly_the_missing_episodes(pytester, sig):
    node = forty_episode_project(pytester)
    results = pytester.path / "reports" / "killed" / "episodes.jsonl"
    proc = start(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=killed")
    wait_until(lambda: written_lines(results) >= 15, 180, "15 episodes recorded", procs=(proc,))
    proc.send_signal(sig)
    output = proc.communicate(timeout=120)[0].decode()
    first = episodes(pytester, "killed")
    assert 15 <= len(first) < 40
    info = run_json(pytester, "killed")
    if sig == signal.SIGTERM:
        assert proc.returncode == 2, output  # pytest's "interrupted"
        assert info["status"] == "interrupted" and info["ended_at"], info
        assert "agentgym: run killed interrupted" in output
    else:
        assert info["status"] == "running" and info["ended_at"] is None
        # The next reader finds it crashed: its process is gone.
        shown = subprocess.run([sys.executable, "-m", "pytest_agentgym", "report", "reports/killed"],
                               cwd=pytester.path, capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert run_json(pytester, "killed")["status"] == "crashed"

    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=reports/killed", "-q")
    assert resumed.ret == 0, resumed.stdout.str()
    records = episodes(pytester, "killed")
    generation_2 = [r for r in records if r["generation"] == 2]
    kept = {k for k, r in zip(keys(first), first) if r["error"] is None}
    everything = {("Maze", t, 1) for t in range(25)} | {("Wordle", t, 1) for t in range(15)}
    assert sorted(keys(generation_2)) == sorted(everything - kept)  # exactly the missing ones, once each
    assert set(keys(records)) == everything and len(records) == 40
    resumed.stdout.fnmatch_lines(["Maze * 25 *", "Wordle * 15 *", "*40 passed*",
                                  "agentgym: run killed finished (40 episodes, *kept)"])
    info = run_json(pytester, "killed")
    assert info["status"] == "finished" and info["generation"] == 2 and len(info["resumed_at"]) == 1
    assert info["counts"]["episodes"] == 40 and info["counts"]["kept"] == len(kept)


def test_resume_refuses_settings_that_change_what_an_episode_means(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=base")
    assert first.ret == 0
    before = (pytester.path / "reports" / "base" / "run.json").read_bytes()
    refused = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=base",
                  "--agentgym-max-rounds=3", "--agentgym-model=random", "--agentgym-sampling=temperature=0.5")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*cannot resume run base*",
                                  "*- model: 'reference' then, 'random' now",
                                  "*- Maze max_rounds: 15 then, 3 now",
                                  "*- Maze sampling: {} then, {temperature: 0.5} now",
                                  "*restore them*"])
    assert (pytester.path / "reports" / "base" / "run.json").read_bytes() == before
    assert len(episodes(pytester, "base")) == 2


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_resume_reruns_errored_episodes_and_counts_each_once(pytester, xdist):
    node = make_project(pytester)
    # Games 25 and 26 exist in the node's view but the server refuses them: errors.
    node.write_text(node.read_text().replace("envs: {servers: spawn}",
                                             "envs: {servers: spawn, overrides: {Maze: {tasks: '0-26'}}}"))
    suite(pytester, "maze", "environment: Maze\ntasks: 23-26\n")
    first = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=errs", "--agentgym-retries=0",
                *xdist)
    assert first.ret == 1
    assert run_json(pytester, "errs")["status"] == "finished-with-errors"
    second = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=latest", "--agentgym-retries=0",
                 *xdist)
    assert second.ret == 1
    records = episodes(pytester, "errs")
    assert sorted((r["task_index"], r["generation"]) for r in records) == [
        (23, 1), (24, 1), (25, 1), (25, 2), (26, 1), (26, 2)]  # the errored ones again, as generation 2
    second.stdout.fnmatch_lines(["Maze * 4 *"])  # four episodes counted, not six
    assert run_json(pytester, "errs")["counts"]["episodes"] == 4


@pytest.fixture
def small_disk(pytester):
    """``reports/`` on a 512 KiB tmpfs (needs root, as in CI); unmounted afterwards."""
    reports = pytester.path / "reports"
    reports.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(reports)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()}); this fault needs root")
    yield reports
    subprocess.run(["umount", "-l", str(reports)], check=False)


def test_a_full_disk_stops_the_run_cleanly_and_it_resumes_once_there_is_room(pytester, small_disk):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-24\nrepeat: 4\ngates: [success_rate >= 0.5]\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=full")
    assert result.ret == 2, result.stdout.str()  # interrupted
    result.stdout.fnmatch_lines(["agentgym: RUN STOPPED: could not write *episodes.jsonl: "
                                 "No space left on device*--agentgym-resume=*full*"])
    info = run_json(pytester, "full")
    assert info["status"] == "interrupted" and info["ended_at"]
    assert [g["outcome"] for g in info["gates"]] == ["not-judged"], info["gates"]  # a partial run is not judged
    assert "GATE PASSED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["GATE NOT JUDGED: Maze success_rate >= 0.5: run stopped after * of 100 episodes*"])
    results = small_disk / "full" / "episodes.jsonl"
    text = results.read_text()
    assert text.endswith("\n")
    kept = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert 0 < len(kept) < 100

    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    resumed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-resume=full")
    assert resumed.ret == 0, resumed.stdout.str()
    records = episodes(pytester, "full")
    assert len({(r["task_index"], r["repeat"]) for r in records}) == 100 == len(records)
    assert run_json(pytester, "full")["status"] == "finished"
