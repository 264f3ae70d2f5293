"""results/lock.py: one writer per run directory, between real processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentgym.results.ledger import LedgerError, RunLedger
from pytest_agentgym.results.lock import RunDirBusy, RunLock

HOLD = """
import sys
from pytest_agentgym.results.lock import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path):
    """A separate process holding the lock of tmp_path/run until it is killed."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield run_dir, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def test_a_second_process_is_refused_with_the_holders_pid_and_host(holder):
    run_dir, proc = holder
    with pytest.raises(RunDirBusy) as refused:
        RunLock(run_dir).acquire()
    assert refused.value.holder["pid"] == proc.pid
    assert f"in use by process {proc.pid} on host {socket.gethostname()}" in str(refused.value)


def test_the_lock_of_a_killed_holder_is_taken_over(holder):
    run_dir, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    lock = RunLock(run_dir).acquire()
    assert lock.held
    lock.release()


def test_a_new_run_and_a_resume_refuse_a_held_directory(holder):
    run_dir, proc = holder
    with pytest.raises(LedgerError, match=f"in use by process {proc.pid}") as refused:
        RunLedger.new(run_dir.parent, run_dir.name)
    assert f"--agentgym-resume={run_dir}" in str(refused.value)
    (run_dir / "run.json").write_text("{}")  # whatever it holds: the lock is asked first
    with pytest.raises(LedgerError, match=f"in use by process {proc.pid}"):
        RunLedger.resume(run_dir)


def test_a_run_that_writes_nothing_leaves_no_directory_behind(tmp_path):
    ledger = RunLedger.new(tmp_path, "quiet")
    assert (tmp_path / "quiet" / ".lock").is_file()
    ledger.release()
    assert not (tmp_path / "quiet").exists()


def test_a_directory_that_existed_is_kept_and_its_lock_can_be_taken_again(tmp_path):
    (tmp_path / "kept").mkdir()
    lock = RunLock(tmp_path / "kept").acquire()
    lock.release()
    assert (tmp_path / "kept").is_dir()
    assert RunLock(tmp_path / "kept").acquire().held


def test_the_holder_may_ask_again(tmp_path):
    lock = RunLock(tmp_path / "again")
    assert lock.acquire() is lock.acquire()
    lock.release()
    lock.release()
    assert os.listdir(tmp_path) == []


def test_a_merge_into_a_directory_a_run_writes_is_refused(holder):
    from pytest_agentgym.run.merge import merge
    from pytest_agentgym.run.merge_checks import MergeError

    run_dir, proc = holder
    shard = run_dir.parent / "shard"
    shard.mkdir()
    (shard / "run.json").write_text("{}")
    with pytest.raises(MergeError, match=f"--out {run_dir} is in use by process {proc.pid}"):
        merge([shard], run_dir)
