"""The run's ledger: which record of an episode counts, and when a run may be resumed.

Pins two behaviours that no test held (a mutation of either survived the whole suite):
the newest generation of an episode is the one counted, and a run whose process still
runs is not resumed.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.ledger import LedgerError, RunLedger, settle_crashed, this_process
from pytest_agentgym.results.records import ErrorInfo

from helpers.report_fixtures import make_episode, make_info, write_run


def _gen(record, generation: int):
    return dataclasses.replace(record, generation=generation)


def test_the_newest_generation_of_each_episode_counts():
    error = ErrorInfo("EnvServerError", "POST /step answered 500", "env")
    first = [_gen(make_episode("Maze", 0, outcome="error", error=error), 1),
             _gen(make_episode("Maze", 1, outcome="failed"), 1)]
    second = [_gen(make_episode("Maze", 0), 2)]  # the resumed run played the errored one again
    third = [_gen(make_episode("Maze", 1), 3), _gen(make_episode("Maze", 2), 3)]
    counted = current_records([*first, *second, *third])
    assert [(r.task_index, r.generation, r.outcome) for r in counted] == [
        (0, 2, "passed"), (1, 3, "passed"), (2, 3, "passed")]
    # written out of order (a late xdist worker): still the newest, in the order written
    assert [(r.task_index, r.generation) for r in current_records([*third, *first, *second])] == [
        (1, 3), (2, 3), (0, 2)]


def test_a_run_whose_process_still_runs_is_not_resumed(tmp_path):
    run = write_run(tmp_path, make_info(status="running", process=this_process()), [make_episode("Maze", 0)])
    with pytest.raises(LedgerError, match=r"is still running \(process \d+\); wait for it or stop it"):
        RunLedger.resume(run.path)
    assert run.read_info().status == "running"  # nothing written


def test_a_run_whose_process_is_gone_is_settled_as_crashed_and_resumed(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import json, os, socket, psutil; "
                           "print(json.dumps({'pid': os.getpid(), 'host': socket.gethostname(), "
                           "'started': round(psutil.Process().create_time(), 2)}))"],
                          capture_output=True, text=True, check=True).stdout
    import json

    run = write_run(tmp_path, make_info(status="running", process=json.loads(gone)), [make_episode("Maze", 0)])
    ledger = RunLedger.resume(run.path)
    assert ledger.generation == 2 and set(ledger.kept) == {("Maze", 0, 0)}
    assert settle_crashed(run).status == "crashed"


def test_a_run_written_on_another_host_is_not_settled_as_crashed(tmp_path):
    """Whether a process on another host lives cannot be told from here: its run stays
    'running' (a shared file system), rather than being called crashed under its feet."""
    elsewhere = {"pid": 1, "host": "another-host.invalid", "started": 1.0}
    run = write_run(tmp_path, make_info(status="running", process=elsewhere), [make_episode("Maze", 0)])
    assert settle_crashed(run).status == "running"
    assert run.read_info().status == "running"


def test_two_records_of_one_episode_and_generation_count_once_and_are_named():
    """Records in memory (an xdist report, a merge's pairs) go through the same rule as
    a file's lines: the first counts, the second is a duplicate."""
    first, again = make_episode("Maze", 0), make_episode("Maze", 0, outcome="failed")
    counted = current_records([first, make_episode("Maze", 1), again])
    assert [(r.task_index, r.outcome) for r in counted] == [(0, "passed"), (1, "passed")]
    assert [(d.key, d.generation) for d in counted.duplicates] == [(("Maze", 0, 0), 1)]


@pytest.mark.parametrize("text", ["{}", "[1, 2]", "not json", ""])
def test_a_run_json_that_cannot_be_read_is_refused_by_name_not_a_crash(tmp_path, text):
    """A new run on such a directory is told the id is taken; a resume is told why it cannot."""
    run_dir = tmp_path / "broken"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(text)
    with pytest.raises(LedgerError, match=r"run id 'broken' is taken: .*run.json unreadable"):
        RunLedger.new(tmp_path, "broken")
    with pytest.raises(LedgerError, match=r"run.json cannot be read .*cannot be resumed"):
        RunLedger.resume(run_dir)


def test_the_rollout_service_is_told_its_own_option(tmp_path):
    held = RunLedger.new(tmp_path, "busy", run_id_flag="--run-id")
    with pytest.raises(LedgerError) as refused:
        RunLedger.new(tmp_path, "busy", run_id_flag="--run-id")
    assert "give this run another --run-id" in str(refused.value) and "--agentgym" not in str(refused.value)
    held.release()
