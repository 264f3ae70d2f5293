"""Readers never crash on a line of episodes.jsonl that is not a record.

A line of the wrong JSON type (``[1,2,3]``, ``null``, a string) or with a field of
the wrong type (``task_index: "1"``, ``reward: "abc"``) is skipped, with its line
number and the reason, by every reader: the run directory, the report, compare,
merge and resume. Found by trying the run directory as an adversary would.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from pytest_agentgym.compare.runs import load_run
from pytest_agentgym.report.payload import read_for_report
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.jsonl import encode_line
from pytest_agentgym.results.ledger import RunLedger
from pytest_agentgym.results.record_checks import check_record_data
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.store import RunDir

from helpers.report_fixtures import make_episode, make_info, write_run


def _field(name: str, value) -> bytes:
    data = make_episode("Maze", 9).to_dict()
    data[name] = value
    return (json.dumps(data) + "\n").encode()


NOT_RECORDS = {
    "a list": (b"[1, 2, 3]\n", "is a JSON object, this line holds a list"),
    "null": (b"null\n", "this line holds null"),
    "a string": (b'"episode"\n', "this line holds a string"),
    "a number": (b"7\n", "this line holds a number"),
    "task index as text": (_field("task_index", "1"), "'task_index' must be a whole number, got a string '1'"),
    "reward as text": (_field("reward", "abc"), "'reward' must be a number or null, got a string 'abc'"),
    "success as a number": (_field("success", 1), "'success' must be true or false, got a number 1"),
    "env as a number": (_field("env", 3), "'env' must be a string, got a number 3"),
    "repeat as a boolean": (_field("repeat", True), "'repeat' must be a whole number, got a boolean True"),
    "turns as an object": (_field("turns", {"a": 1}), "'turns' must be a list, got an object"),
    "error as a list": (_field("error", ["x"]), "'error' must be an object or null, got a list"),
    # Python's json reads NaN and Infinity; a NaN reward used to be counted as an episode
    # without a reward by some readers and crash others (an infinite duration crashed the report)
    "reward NaN": (_field("reward", float("nan")), "'reward' must be a finite number or null, got NaN"),
    "reward Infinity": (_field("reward", float("inf")), "'reward' must be a finite number or null, got Infinity"),
    "duration -Infinity": (_field("duration_s", float("-inf")),
                           "'duration_s' must be a finite number or null, got -Infinity"),
    "reward beyond any sum": (_field("reward", 1e308), "'reward' must be a number from -1e+100 to 1e+100"),
    "task index beyond 2**53": (_field("task_index", 2**60), "'task_index' must be a whole number from 0 to 2**53 - 1"),
    "generation 0": (_field("generation", 0),
                     "'generation' must be a whole number from 1 to 2**53 - 1, got a number 0"),
    "error message a list": (_field("error", {"type": "X", "message": [1], "where": "env"}),
                             "'error.message' must be a string, got a list"),
    "retried item a number": (_field("retried", [5]), "'retried[0]' must be an object {type, message, where}"),
    "turn reply a number": (_field("turns", [{**make_episode("Maze", 9).to_dict()["turns"][0], "reply": 5}]),
                            "'turns[0].reply' must be a string, got a number 5"),
    "turn reward NaN": (_field("turns", [{**make_episode("Maze", 9).to_dict()["turns"][0], "reward": float("nan")}]),
                        "'turns[0].reward' must be a finite number or null, got NaN"),
    "turn with a key Turn has not": (_field("turns", [{**make_episode("Maze", 9).to_dict()["turns"][0], "mood": 1}]),
                                     "unexpected keyword argument 'mood'"),
    "nested too deep": (b"[" * 200_000 + b"]" * 200_000 + b"\n", "JSON nested too deeply to read"),
}
#: The lines that are a record but for their numbers: each names its episode (Maze task 9),
#: which compare counts as errored (tests/compare/test_compare_unreadable_lines.py)
NAMED = {"reward NaN", "reward Infinity", "duration -Infinity", "reward beyond any sum", "turn reward NaN"}


def _run_with(tmp_path: Path, line: bytes) -> RunDir:
    """A finished run of three Maze episodes and ``line`` between the second and third."""
    run = write_run(tmp_path, make_info(environments=("Maze",), status="finished"),
                    [make_episode("Maze", 0), make_episode("Maze", 1, outcome="failed")])
    with run.episodes_file.open("ab") as handle:
        handle.write(line)
    run.append_episode(make_episode("Maze", 2))
    return run


@pytest.mark.parametrize("case", list(NOT_RECORDS))
def test_every_reader_skips_a_line_that_is_no_record(tmp_path, case):
    line, reason = NOT_RECORDS[case]
    run = _run_with(tmp_path, line)

    records, skipped = RunDir(run.path).read_episodes_report()
    assert [r.task_index for r in records] == [0, 1, 2]
    assert len(skipped) == 1 and skipped[0].line == 3 and reason in skipped[0].reason, skipped

    report = read_for_report(run.episodes_file)  # the report's own reader
    assert [r.task_index for r in report.records] == [0, 1, 2]
    assert [(s.line, s.reason) for s in report.skipped] == [(s.line, s.reason) for s in skipped]
    page = render_run_dir(run.path)
    assert page.is_file()

    assert skipped[0].key == (("Maze", 9, 0) if case in NAMED else None)
    loaded = load_run(run.path, "candidate")  # compare and trend: the named episode as errored
    assert sorted(k[1] for k in loaded.keys) == ([0, 1, 2, 9] if case in NAMED else [0, 1, 2])
    assert [r.error.type for r in loaded.records if r.task_index == 9] == (["UnreadableRecord"] if case in NAMED else [])

    ledger = RunLedger.resume(run.path)  # resume keeps the scored episodes
    assert sorted(key[1] for key in ledger.kept) == [0, 1, 2]

    from pytest_agentgym.report.run_rows import EpisodeTally

    tally = EpisodeTally(run.episodes_file).update()  # the runs index's live tally
    assert tally.figures()[2] == 3 and tally.skipped == 1


@pytest.mark.parametrize("case", list(NOT_RECORDS))
def test_merge_skips_a_line_that_is_no_record(tmp_path, case):
    from pytest_agentgym.run.merge_checks import load

    line, reason = NOT_RECORDS[case]
    run = _run_with(tmp_path, line)
    info = json.loads(run.run_file.read_text())
    info["shard"] = {"index": 1, "count": 1}
    run.run_file.write_text(json.dumps(info))
    shard = load(run.path)
    assert [r.task_index for r in shard.records] == [0, 1, 2]
    assert len(shard.skipped) == 1 and reason in shard.skipped[0]


def test_a_record_of_the_harness_passes_the_check_and_a_non_finite_reward_is_no_record():
    data = make_episode("Maze", 0).to_dict()
    check_record_data(data)
    # what the harness writes for a non-finite number: null, named in non_finite
    check_record_data({**data, "reward": None, "min_reward": None, "max_rounds": None, "sampling": None,
                       "non_finite": {"reward": "NaN"}})
    for value in (float("nan"), float("inf"), float("-inf")):  # only a hand-written line holds one
        with pytest.raises(TypeError, match="'reward' must be a finite number or null"):
            check_record_data({**data, "reward": value})
    with pytest.raises(TypeError, match="'max_rounds' must be a whole number or null, got a number 2.5"):
        check_record_data({**data, "max_rounds": 2.5})


def test_a_record_in_memory_may_hold_a_non_finite_number_its_line_may_not():
    """A record passed between processes (an xdist worker's report, a queue worker's result)
    is what the engine made, NaN included (a verifiers rubric can give one); its line in
    episodes.jsonl holds null. Only a line with a NaN token is no record."""
    record = dataclasses.replace(make_episode("Maze", 0), reward=float("nan"))
    again = EpisodeRecord.from_dict(record.to_dict())
    assert math.isnan(again.reward)
    with pytest.raises(TypeError, match="'reward' must be a finite number or null, got NaN"):
        EpisodeRecord.from_line(record.to_dict())
    written = json.loads(encode_line(record.to_dict()))  # what the harness writes
    assert written["reward"] is None and written["non_finite"] == {"reward": "NaN"}
    assert EpisodeRecord.from_line(written).reward is None
    huge = dataclasses.replace(make_episode("Maze", 0), reward=1e200)  # a server's number, in memory
    assert EpisodeRecord.from_dict(huge.to_dict()).reward == 1e200
    with pytest.raises(TypeError, match="'reward' must be a number from -1e\\+100 to 1e\\+100"):
        EpisodeRecord.from_line(huge.to_dict())


def test_a_token_count_is_the_endpoints_to_say():
    """Token counts come from the endpoint's usage: a negative one is odd, not a line to skip."""
    data = make_episode("Maze", 0).to_dict()
    data["turns"][0]["prompt_tokens"] = -3
    assert EpisodeRecord.from_line({**data, "prompt_tokens": -3}).prompt_tokens == -3
    with pytest.raises(TypeError, match="'task_index' must be a whole number from 0 to 2\\*\\*53 - 1, got a number -1"):
        EpisodeRecord.from_line({**data, "task_index": -1})
