"""A process is its pid *and* its start: a reused pid is not the run's writer (issue 39, finding 2).

Real processes: a ``sleep`` started here stands for an unrelated process that got the pid a
dead run's writer had (after a reboot or a pid wrap); a Python child that takes a run
directory's lock and is killed with SIGKILL stands for a writer that died holding it.
Before, the lock was taken over without a word (the file kept naming the dead holder, and a
clean release left its name too, so nothing could tell the two apart), and whether a
recorded writer still ran was judged by its start time within a second (psutil's, which
moves with the clock). Now the lock file and run.json record the boot id and the start in
clock ticks since boot, a clean release empties the file, and a lock taken from a holder
that died says so, in ``RunLock.taken_over`` and in run.json's notes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.report_fixtures import make_info
from helpers.waiting import wait_until
from pytest_agentgym.results.ledger import RunLedger
from pytest_agentgym.results.lock import RunLock, process_alive, start_ticks, this_process

pytestmark = pytest.mark.faults


@pytest.fixture
def unrelated():
    """A live process that is no run's writer (its pid stands for a reused one)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def _stale(pid: int) -> dict:
    """What a lock file or run.json of a writer with ``pid`` recorded, before a reboot."""
    return {"pid": pid, "host": socket.gethostname(), "started": 1.0, "boot_id": "0" * 8 + "-dead-boot",
            "start_ticks": 12345, "command": "pytest suites --agentgym-run-id=r1"}


def test_a_live_process_with_the_recorded_pid_is_not_the_recorded_process(unrelated):
    me = this_process()
    assert me["pid"] == os.getpid() and isinstance(me.get("start_ticks"), int) and me.get("boot_id")
    assert process_alive(me) is True
    here = {"pid": unrelated.pid, "host": socket.gethostname(), "boot_id": me["boot_id"],
            "start_ticks": start_ticks(unrelated.pid)}
    assert process_alive(here) is True  # the process itself, as recorded
    assert process_alive({**here, "start_ticks": here["start_ticks"] - 1}) is False  # the pid, another start
    assert process_alive(_stale(unrelated.pid)) is False  # recorded before a reboot
    # a record without boot id and ticks (an older run.json) is judged by its start time
    assert process_alive({"pid": unrelated.pid, "host": socket.gethostname(), "started": 1.0}) is False
    assert process_alive({**_stale(unrelated.pid), "host": "elsewhere"}) is None


def test_a_stale_lock_naming_a_reused_pid_is_taken_over_with_a_message(unrelated, tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    (run_dir / ".lock").write_text(json.dumps(_stale(unrelated.pid)))
    lock = RunLock(run_dir).acquire()
    assert lock.held
    assert lock.taken_over == (
        f"took over the lock of {run_dir / '.lock'} that a process which died left: process {unrelated.pid} "
        f"(pytest suites --agentgym-run-id=r1) held it and is gone: pid {unrelated.pid} now belongs to another "
        f"process (started at another time, or before a reboot)")
    assert json.loads((run_dir / ".lock").read_text())["pid"] == os.getpid()
    lock.release()
    assert (run_dir / ".lock").read_text() == ""  # a clean release leaves no name behind
    again = RunLock(run_dir).acquire()
    assert again.taken_over is None
    again.release()


def test_a_run_that_takes_the_lock_of_a_killed_writer_says_so_in_run_json(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pytest_agentgym.results.lock import RunLock; "
        f"RunLock({str(tmp_path / 'r1')!r}).acquire(); print('held', flush=True); time.sleep(300)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = RunLock(tmp_path / "r1")
        with pytest.raises(ValueError, match=f"in use by process {holder.pid} on host"):
            refused.acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    wait_until(lambda: start_ticks(holder.pid) is None, timeout=10, what="the killed holder to be gone")
    ledger = RunLedger.new(tmp_path, "r1")
    try:
        said = ledger.lock.taken_over
        assert said is not None and f"process {holder.pid} (" in said and "held it and is gone" in said
        ledger.begin(make_info("r1"))
        assert said in json.loads((tmp_path / "r1" / "run.json").read_text())["notes"]
    finally:
        ledger.release()
