"""The light index of episodes.jsonl (results/light_index.py) is used only while it tells the truth.

A finished run's report leaves episodes.light.json beside episodes.jsonl; readers without
trajectories (compare, trend, merge) take it instead of parsing every line. These tests
change the file under the index in the ways a user or a harness can (append a record,
edit a line in place with its size and time kept, a torn write while the report reads),
break the index (corrupt, another reader's rules, a place it cannot be written) and check
that the reader then reads the file, and says what the file says.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from pytest_agentgym.report.payload import read_for_report
from pytest_agentgym.results import light_index, reading
from pytest_agentgym.results.jsonl import encode_line
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo

from helpers.report_fixtures import make_episode, make_info, write_run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _run(tmp_path, tasks=range(6)):
    episodes = [make_episode("Maze", task, outcome="passed" if task % 2 else "failed") for task in tasks]
    return write_run(tmp_path, make_info("light", environments=("Maze",), status="finished"), episodes)


def _light(path):
    return reading.read_episodes_file(path, reading.record_without_turns)


def _same(found, expected):
    assert found.records == expected.records
    assert (found.lines, found.offsets, found.problems()) == (expected.lines, expected.offsets, expected.problems())


def _from_file(path):
    """What the file says, read line by line (the index out of the way)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(light_index, "load", lambda _: None)
        return _light(path)


def test_the_report_leaves_an_index_that_answers_as_the_file_does(tmp_path):
    run = _run(tmp_path)
    with run.episodes_file.open("ab") as handle:  # a line that is no record and a duplicate: both kept in the index
        handle.write(b"not json\n" + encode_line(make_episode("Maze", 1, outcome="passed").to_dict()))
    read_for_report(run.episodes_file)
    assert light_index.load(run.episodes_file) is not None
    indexed = _light(run.episodes_file)  # answered from the index
    _same(indexed, _from_file(run.episodes_file))
    assert [s.line for s in indexed.skipped] == [7] and [d.line for d in indexed.duplicates] == [8]
    assert not any(r.turns for r in indexed.records)
    whole = reading.read_episodes_file(run.episodes_file)  # a reader of whole records never takes it
    assert all(r.turns for r in whole.records)


def test_an_appended_record_makes_the_index_stale(tmp_path):
    run = _run(tmp_path)
    read_for_report(run.episodes_file)
    with run.episodes_file.open("ab") as handle:
        handle.write(encode_line(make_episode("Maze", 9, outcome="passed").to_dict()))
    assert light_index.load(run.episodes_file) is None
    found = _light(run.episodes_file)
    assert ("Maze", 9, 0) in {r.key for r in found.records}


def test_a_line_edited_in_place_with_its_size_and_time_kept_makes_the_index_stale(tmp_path):
    run = _run(tmp_path)
    read_for_report(run.episodes_file)
    before = os.stat(run.episodes_file)
    data = run.episodes_file.read_bytes()
    edited = data.replace(b'"reward": 0.0', b'"reward": 1.0', 1)
    assert edited != data and len(edited) == len(data)
    run.episodes_file.write_bytes(edited)
    os.utime(run.episodes_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert light_index.load(run.episodes_file) is None
    _same(_light(run.episodes_file), _from_file(run.episodes_file))


@pytest.mark.parametrize("index", [b"{not json", b"[]", b'{"format": 1}', b"\xff\xfe"])
def test_an_index_that_cannot_be_read_is_passed_over(tmp_path, index):
    run = _run(tmp_path)
    light_index.index_path(run.episodes_file).write_bytes(index)
    _same(_light(run.episodes_file), _from_file(run.episodes_file))


def test_an_index_made_by_other_reader_rules_is_passed_over(tmp_path, monkeypatch):
    run = _run(tmp_path)
    read_for_report(run.episodes_file)
    assert light_index.load(run.episodes_file) is not None
    monkeypatch.setattr(light_index, "rules", lambda: "another version")
    assert light_index.load(run.episodes_file) is None


def test_an_index_that_cannot_be_written_costs_nothing(tmp_path):
    run = _run(tmp_path)
    light_index.index_path(run.episodes_file).mkdir()  # a directory where the file would go
    packed = read_for_report(run.episodes_file)
    assert len(packed.records) == 6
    assert light_index.load(run.episodes_file) is None
    assert [p.name for p in run.path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_file_that_grows_while_the_report_reads_it_gets_no_index(tmp_path):
    run = _run(tmp_path)
    late = encode_line(make_episode("Maze", 7, outcome="passed").to_dict())
    appended = []

    def convert(data):
        if not appended:  # the harness writes a record while the report reads
            with run.episodes_file.open("ab") as handle:
                handle.write(late)
            appended.append(True)
        return reading.record_without_turns(data)

    reading.read_episodes_file(run.episodes_file, convert, keep_index=True)
    assert not light_index.index_path(run.episodes_file).exists()
    assert ("Maze", 7, 0) in {r.key for r in _light(run.episodes_file).records}


def test_a_torn_last_line_is_kept_as_torn_and_its_completion_makes_the_index_stale(tmp_path):
    run = _run(tmp_path)
    line = encode_line(make_episode("Maze", 8, outcome="passed").to_dict())
    with run.episodes_file.open("ab") as handle:
        handle.write(line[:40])
    read_for_report(run.episodes_file)
    indexed = light_index.load(run.episodes_file)
    assert indexed is not None and indexed.skipped[-1].torn
    with run.episodes_file.open("ab") as handle:
        handle.write(line[40:])
    assert light_index.load(run.episodes_file) is None
    found = _light(run.episodes_file)
    assert not found.skipped and ("Maze", 8, 0) in {r.key for r in found.records}


def test_light_records_from_the_index_equal_the_files_without_turns(tmp_path):
    run = _run(tmp_path)
    retried = (ErrorInfo("EnvTimeout", "POST /step took 60 s", "env"),)
    with run.episodes_file.open("ab") as handle:  # an error and a retried episode: their fields are converted
        handle.write(encode_line(make_episode("Maze", 10, outcome="error").to_dict()))
        handle.write(encode_line(make_episode("Maze", 11, outcome="passed", retried=retried).to_dict()))
    read_for_report(run.episodes_file)
    whole = reading.read_episodes_file(run.episodes_file, EpisodeRecord.from_line)
    assert light_index.load(run.episodes_file).records == [dataclasses.replace(r, turns=()) for r in whole.records]
