"""Shards and merge, end to end: real pytest runs (embedded servers, the reference agent
over HTTP) split with --agentgym-shard, joined with `pytest-agentgym merge`, and read
back by report, compare, trend and --agentgym-baseline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.projects import NODE
from helpers.run_dirs import read_episodes

pytestmark = pytest.mark.heavy

SUITES = {
    # the reference agent's BabyAI rewards average about 0.9: this gate fails on the whole run
    "babyai": "environment: BabyAI\ntasks: 0-3\ngates: [mean_reward >= 0.95]\n",
    "maze": "environment: Maze\ntasks: 0-3\ngates: [success_rate >= 0.85]\n",
    "wordle": "environment: Wordle\ntasks: 0-2\nrepeat: 2\ngates: [success_rate >= 0.85]\n",
}
EPISODES = 4 + 4 + 3 * 2


#: Variables that --agentgym-shard=auto reads: a test sets its own, never inherits a CI's.
_SCHEDULER = ("JOB_COMPLETION_INDEX", "AGENTGYM_SHARD", "SLURM_ARRAY_", "CI_NODE_")


def _run(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(_SCHEDULER)}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**inherited, **(env or {})})


def pytest_run(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return _run(cwd, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=nodes/testnode.yaml",
                *args, env=env)


def agentgym(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _run(cwd, "-m", "pytest_agentgym", *args)


def records(run_dir: Path) -> dict[tuple, dict]:
    """The run's records by episode key (env, task index, repeat)."""
    return {(data["env"], data["task_index"], data["repeat"]): data for data in read_episodes(run_dir)}


def run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """One run as one process (``reports/one``) and the same selection in 3 shards
    (``reports/sharded/shard-I-of-3``) compared with it as their baseline."""
    root = tmp_path_factory.mktemp("sharded")
    (root / "nodes").mkdir()
    (root / "nodes" / "testnode.yaml").write_text(NODE.format(policy="reference", latency_ms=0))
    (root / "suites").mkdir()
    for name, body in SUITES.items():
        (root / "suites" / f"{name}.yaml").write_text(body)
    single = pytest_run(root, "--agentgym-run-id=one")
    assert single.returncode == 1, single.stdout + single.stderr  # the BabyAI gate fails
    shards = [pytest_run(root, f"--agentgym-shard={i}/3", "--agentgym-run-id=sharded",
                         "--agentgym-baseline=reports/one") for i in (1, 2, 3)]
    return root, single, shards


def test_each_shard_runs_its_slice_and_leaves_the_gates_to_the_merge(project):
    root, single, shards = project
    held = []
    for i, result in enumerate(shards, 1):
        out = result.stdout + result.stderr
        assert result.returncode == 0, out  # the failing BabyAI gate is not judged on a slice
        assert "GATE" not in out and f"shard {i}/3 of run sharded" in out
        info = run_json(root / "reports" / "sharded" / f"shard-{i}-of-3")
        assert info["shard"]["index"] == i and info["shard"]["selection_episodes"] == EPISODES
        assert info["gates"] == [] and info["run_id"] == "sharded"
        mine = records(root / "reports" / "sharded" / f"shard-{i}-of-3")
        assert len(mine) == info["shard"]["episodes"]
        assert f"{EPISODES - len(mine)} deselected" in result.stdout
        held.append(set(mine))
    assert sum(len(h) for h in held) == EPISODES and set().union(*held) == set(records(root / "reports" / "one"))
    assert os.readlink(root / "reports" / "latest") == "one"  # a shard is not the run: latest stays


def test_three_shards_merged_give_the_keys_rewards_and_gates_of_one_run(project):
    root, single, _ = project
    merged = agentgym(root, "merge", "reports/sharded", "--out", "reports/sharded")
    assert merged.returncode == 1, merged.stdout + merged.stderr  # BabyAI's gate fails, as in the single run
    assert "merged 3 shards of run sharded: 14 episodes" in merged.stdout
    assert "GATE FAILED: BabyAI mean_reward >= 0.95" in merged.stdout
    one, joined = records(root / "reports" / "one"), records(root / "reports" / "sharded")
    assert set(joined) == set(one)
    assert {k: (r["reward"], r["success"]) for k, r in joined.items()} == \
        {k: (r["reward"], r["success"]) for k, r in one.items()}
    info = run_json(root / "reports" / "sharded")
    suite_gates = {(g["env"], g["gate"], g["outcome"]) for g in info["gates"] if "baseline" not in g["gate"]}
    assert suite_gates == {(g["env"], g["gate"], g["outcome"]) for g in run_json(root / "reports" / "one")["gates"]}
    baseline_gates = [g for g in info["gates"] if "baseline" in g["gate"]]
    assert {g["env"] for g in baseline_gates} == {"BabyAI", "Maze", "Wordle"}
    assert all(g["outcome"] in ("passed", "inconclusive") for g in baseline_gates), baseline_gates
    assert [m["index"] for m in info["merged_from"]] == [1, 2, 3] and info["shard"] is None
    assert info["counts"]["episodes"] == 14 and info["counts"]["gates_failed"] == 1
    assert "--agentgym-shard" not in info["command"] and (root / "reports" / "sharded" / "report.html").is_file()
    assert os.readlink(root / "reports" / "latest") == "sharded"  # merged into reports/<run_id>: the run


def test_the_merged_run_is_read_like_any_other(project):
    root, _, _ = project
    merged_dir = root / "reports" / "sharded"
    if not (merged_dir / "run.json").is_file():
        assert agentgym(root, "merge", "reports/sharded", "--out", "reports/sharded").returncode == 1
    report = agentgym(root, "report", "reports/sharded", "--output", "again.html")
    assert report.returncode == 0 and "sharded" in (root / "again.html").read_text()
    compare = agentgym(root, "compare", "reports/one", "reports/sharded")
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "settings differ" not in compare.stdout
    trend = agentgym(root, "trend", "reports/one", "reports/sharded")
    assert trend.returncode == 0, trend.stdout + trend.stderr
    later = pytest_run(root, "--agentgym-envs=Maze,Wordle", "--agentgym-run-id=later",
                       "--agentgym-baseline=reports/sharded")
    assert later.returncode == 0, later.stdout + later.stderr
    assert "GATE PASSED: Maze baseline success" in later.stdout or "GATE INCONCLUSIVE: Maze" in later.stdout


def test_merge_names_a_missing_shard_and_how_to_run_it(project):
    root, _, _ = project
    base = root / "reports" / "sharded"
    result = agentgym(root, "merge", str(base / "shard-1-of-3"), str(base / "shard-3-of-3"), "--out", "partial")
    assert result.returncode == 2
    assert "shard 2/3 is missing" in result.stderr and "--agentgym-shard=2/3 --agentgym-run-id=sharded" in result.stderr
    assert not (root / "partial" / "run.json").exists()


def test_merge_names_overlapping_shards(project, tmp_path):
    root, _, _ = project
    base = root / "reports" / "sharded"
    twice = agentgym(root, "merge", str(base / "shard-1-of-3"), str(base / "shard-1-of-3"),
                     str(base / "shard-2-of-3"), str(base / "shard-3-of-3"), "--out", str(tmp_path / "a"))
    assert twice.returncode == 2 and "shard 1/3 is given 2 times" in twice.stderr
    doctored = tmp_path / "shard-1-of-3"  # shard 1 that also played one of shard 2's episodes
    shutil.copytree(base / "shard-1-of-3", doctored)
    stray = (base / "shard-2-of-3" / "episodes.jsonl").read_text().splitlines()[0]
    with open(doctored / "episodes.jsonl", "a") as handle:
        handle.write(stray + "\n")
    key = json.loads(stray)
    overlap = agentgym(root, "merge", str(doctored), str(base / "shard-2-of-3"), str(base / "shard-3-of-3"),
                       "--out", str(tmp_path / "b"))
    assert overlap.returncode == 2
    assert "shard 1/3" in overlap.stderr and "overlaps: it holds 1 of shard 2/3's episodes" in overlap.stderr
    assert f"{key['env']} {key['task_index']}" in overlap.stderr


def test_merge_refuses_shards_run_with_different_settings(project):
    root, _, _ = project
    other = pytest_run(root, "--agentgym-shard=3/3", "--agentgym-run-id=sharded", "--agentgym-reports=other",
                       "--agentgym-sampling=temperature=0.5", "--agentgym-baseline=reports/one",
                       "--agentgym-allow-mismatch")
    assert other.returncode == 0, other.stdout + other.stderr
    base = root / "reports" / "sharded"
    result = agentgym(root, "merge", str(base / "shard-1-of-3"), str(base / "shard-2-of-3"),
                      "other/sharded/shard-3-of-3", "--out", "mixed")
    assert result.returncode == 2
    assert "cannot merge these shards" in result.stderr
    assert "sampling" in result.stderr and "in shard 1/3" in result.stderr and "in shard 3/3" in result.stderr
    assert "temperature: 0.5" in result.stderr


def test_merge_replaces_an_earlier_merge_but_no_other_run(project):
    root, _, _ = project
    refused = agentgym(root, "merge", "reports/sharded", "--out", "reports/one")
    assert refused.returncode == 2 and "holds run one, not an earlier merge of run sharded" in refused.stderr
    assert run_json(root / "reports" / "one")["run_id"] == "one" and not run_json(root / "reports" / "one")["merged_from"]
    for _ in range(2):
        again = agentgym(root, "merge", "reports/sharded", "--out", "merged-twice", "--no-report")
        assert again.returncode == 1 and len(records(root / "merged-twice")) == EPISODES


def test_a_resumed_shard_keeps_its_slice(project):
    root, _, _ = project
    resumed = pytest_run(root, "--agentgym-resume=reports/sharded/shard-2-of-3", "--agentgym-baseline=reports/one")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    mine = run_json(root / "reports" / "sharded" / "shard-2-of-3")["shard"]["episodes"]
    played = sum(int(n) for n in re.findall(r"(\d+) (?:passed|unsolved)", resumed.stdout.splitlines()[-2]))
    assert played == mine and "kept" in resumed.stdout
    assert f"{EPISODES - mine} deselected" in resumed.stdout
    refused = pytest_run(root, "--agentgym-resume=reports/sharded/shard-2-of-3", "--agentgym-shard=1/3")
    assert refused.returncode == 4 and "disagree" in refused.stderr


def test_auto_reads_the_scheduler_and_says_what_is_missing(project):
    root, _, _ = project
    k8s = {"JOB_COMPLETION_INDEX": "1", "AGENTGYM_SHARD_COUNT": "3"}
    listed = pytest_run(root, "--agentgym-shard=auto", "--agentgym-run-id=x", "--collect-only", "-q", env=k8s)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    shard2 = set(records(root / "reports" / "sharded" / "shard-2-of-3"))
    names = {line.split("::")[-1] for line in listed.stdout.splitlines() if "::" in line}
    assert len(names) == len(shard2) and f"{EPISODES - len(shard2)} deselected" in listed.stdout
    missing = pytest_run(root, "--agentgym-shard=auto", "--agentgym-run-id=x", "--collect-only",
                         env={"JOB_COMPLETION_INDEX": "1", "AGENTGYM_SHARD_COUNT": ""})
    # set to "" it is not given (process/variables.py): the count is missing, and the message says so
    assert missing.returncode == 4 and "but AGENTGYM_SHARD_COUNT is not; set AGENTGYM_SHARD_COUNT" in missing.stderr
    words = pytest_run(root, "--agentgym-shard=auto", "--agentgym-run-id=x", "--collect-only",
                       env={"JOB_COMPLETION_INDEX": "1", "AGENTGYM_SHARD_COUNT": "three"})
    assert words.returncode == 4 and "AGENTGYM_SHARD_COUNT='three' is not a whole number" in words.stderr
    no_id = pytest_run(root, "--agentgym-shard=2/3", "--collect-only")
    assert no_id.returncode == 4 and "same --agentgym-run-id" in no_id.stderr
    slurm = {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "2", "SLURM_ARRAY_TASK_COUNT": "3",
             "SLURM_ARRAY_JOB_ID": "42"}
    from_slurm = pytest_run(root, "--agentgym-shard=auto", "--collect-only", "-q", env=slurm)
    assert from_slurm.returncode == 0 and f"{EPISODES - len(shard2)} deselected" in from_slurm.stdout


def _shards_with_a_repeated_line(base: Path, target: Path, change: dict | None) -> tuple[dict, int, int]:
    """The three shards copied to ``target``, shard 1's first line written again at its end:
    as it was (``change`` None: the same bytes) or with ``change`` applied. Returns the
    line's record and the two line numbers."""
    for shard in ("shard-1-of-3", "shard-2-of-3", "shard-3-of-3"):
        shutil.copytree(base / shard, target / shard)
    path = target / "shard-1-of-3" / "episodes.jsonl"
    lines = path.read_text().splitlines()
    again = lines[0] if change is None else json.dumps({**json.loads(lines[0]), **change})
    with open(path, "a") as handle:
        handle.write(again + "\n")
    return json.loads(lines[0]), 1, len(lines) + 1


@pytest.mark.faults
def test_merge_refuses_a_shard_that_records_an_episode_twice_with_lines_that_differ(project, tmp_path):
    # Before: merge exited with the gates' code and wrote the episode twice into the merged run
    # (counts one episode too many); now it cannot tell which record is right and refuses.
    root, _, _ = project
    first, kept_line, line = _shards_with_a_repeated_line(root / "reports" / "sharded", tmp_path / "sharded",
                                                          {"success": False, "reward": 0.0, "outcome": "unsolved"})
    result = agentgym(root, "merge", str(tmp_path / "sharded"), "--out", str(tmp_path / "merged"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot merge these shards" in result.stderr and "shard 1/3" in result.stderr
    assert (f"{first['env']} task {first['task_index']} repeat {first['repeat']} generation 1 at lines "
            f"{kept_line} and {line}") in result.stderr
    assert "delete the wrong line" in result.stderr
    assert not (tmp_path / "merged" / "run.json").exists()


@pytest.mark.faults
def test_merge_keeps_one_of_two_identical_lines_and_says_so(project, tmp_path):
    # Before: exit 1 (the BabyAI gate) with EPISODES + 1 episodes in the merged run.
    root, _, _ = project
    first, kept_line, line = _shards_with_a_repeated_line(root / "reports" / "sharded", tmp_path / "sharded", None)
    result = agentgym(root, "merge", str(tmp_path / "sharded"), "--out", str(tmp_path / "merged"), "--no-report")
    assert result.returncode == 1, result.stdout + result.stderr  # the BabyAI gate fails on the whole run
    assert f"merged 3 shards of run sharded: {EPISODES} episodes" in result.stdout
    said = (f"shard 1/3: 1 line(s) of its episodes.jsonl repeat an earlier line byte for byte and were kept "
            f"once: line {line} (= line {kept_line}: {first['env']} task {first['task_index']} repeat "
            f"{first['repeat']})")
    assert said in result.stderr
    merged = run_json(tmp_path / "merged")
    assert merged["counts"]["episodes"] == EPISODES and merged["counts"]["duplicates"] == 1
    assert said in merged["notes"]
    assert len(read_episodes(tmp_path / "merged")) == EPISODES  # each line once
