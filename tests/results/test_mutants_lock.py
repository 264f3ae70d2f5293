"""Mutation-pass tests for results/lock.py and the lock of RunLedger.new (benchmarks/gates/
mutations_resume.py): which process a lock file or run.json names, and a new run's id
checked under its lock, not before it. Real processes: this one, as recorded now and as it
would have been recorded before a reboot; a second Python process writes a whole run under
the run's lock."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from pytest_agentgym.results import ledger as ledger_module
from pytest_agentgym.results.ledger import LedgerError, RunLedger
from pytest_agentgym.results.lock import RunLock, process_alive, start_ticks, this_process

pytestmark = pytest.mark.faults

TESTS = Path(__file__).resolve().parents[1]

#: another process: a whole run of id r1 under the run's lock, from its start to its release
WRITE_RUN = """
import sys
from pathlib import Path
from helpers.report_fixtures import make_episode, make_info
from pytest_agentgym.results.ledger import RunLedger
ledger = RunLedger.new(Path(sys.argv[1]), "r1")
ledger.begin(make_info("r1"))
ledger.append(make_episode("Maze", 0, run_id="r1"))
ledger.release()
"""


def test_a_process_recorded_before_a_reboot_is_another_even_with_the_same_start_ticks():
    """After a reboot a pid may come back with the very ticks since boot it had (early in a
    boot, ticks are small and alike): the boot id alone tells the two apart. The process
    asked about is this one, recorded as it is now, and as it would have been before a reboot."""
    here = this_process()
    assert here["start_ticks"] == start_ticks(os.getpid()) and process_alive(here) is True
    assert process_alive({**here, "boot_id": "0" * 8 + "-an-earlier-boot"}) is False


def test_without_ticks_a_process_is_the_one_recorded_only_within_a_second():
    """A record without boot id and ticks (an older run.json, no /proc) is judged by its start
    time: this process's pid with a start five seconds off is another process."""
    started = psutil.Process().create_time()
    old = {"pid": os.getpid(), "host": socket.gethostname()}
    assert process_alive({**old, "started": round(started, 2)}) is True
    assert process_alive({**old, "started": started - 5}) is False
    assert process_alive({**old, "started": started + 5}) is False


def test_a_run_written_while_a_new_run_waits_for_the_lock_takes_its_id(tmp_path, monkeypatch):
    """The race RunLedger.new closes by taking the lock before it looks for a run: another
    process writes run r1 (run.json and a record) and lets go of the lock at the moment this
    one asks for it. A new run that looked before it locked would find the directory empty,
    take the lock and write over run r1; looking under the lock, it finds r1 and is refused.
    The moment is chosen by wrapping RunLock.acquire (the lock itself is the real one); the
    other writer is a real process, done before the lock is asked for."""
    reports = tmp_path / "reports"
    reports.mkdir()
    raced = []

    class LockAfterAnotherRun(RunLock):
        def acquire(self) -> RunLock:
            if not raced:
                raced.append(True)
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(TESTS),
                                                                                os.environ.get("PYTHONPATH"))))}
                other = subprocess.run([sys.executable, "-c", WRITE_RUN, str(reports)], env=env,
                                       capture_output=True, text=True, timeout=60)
                assert other.returncode == 0, other.stderr
                assert (reports / "r1" / "run.json").is_file()
            return super().acquire()

    monkeypatch.setattr(ledger_module, "RunLock", LockAfterAnotherRun)
    written = (reports / "r1" / "run.json")
    with pytest.raises(LedgerError, match=r"run id 'r1' is taken: .* holds a run \(1 episode\(s\)"):
        RunLedger.new(reports, "r1")
    assert raced == [True]
    assert RunLock(reports / "r1").acquire().held  # refused, and its lock let go
    assert '"r1"' in written.read_text()
