"""A line of episodes.jsonl that is a record but for its numbers (a NaN or infinite reward,
written by another tool) names its episode: the skipped line carries (env, task, repeat),
its generation and model, through the light index too; any other line that is no record
names nothing (issue 40). What compare does with it: tests/compare/test_compare_unreadable_lines.py."""

from __future__ import annotations

import json

import pytest

from pytest_agentgym.results import light_index, reading
from pytest_agentgym.results.records import EpisodeRecord

from helpers.report_fixtures import make_episode, make_info, write_run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _line(record: EpisodeRecord, **fields) -> bytes:
    """``record``'s line with ``fields`` as Python's json writes them (NaN and Infinity as tokens)."""
    return (json.dumps({**record.to_dict(), **fields}) + "\n").encode()


def _run_with(tmp_path, *lines: bytes, generation: int = 1):
    """A Maze run of tasks 0 and 1, then ``lines``."""
    info = make_info("named", environments=("Maze",), status="finished")
    run = write_run(tmp_path, info, [make_episode("Maze", 0), make_episode("Maze", 1)])
    if generation != 1:
        data = json.loads(run.run_file.read_text())
        run.run_file.write_text(json.dumps({**data, "generation": generation}))
    with run.episodes_file.open("ab") as handle:
        handle.write(b"".join(lines))
    return run


def test_a_nan_reward_names_its_episode_and_a_line_that_is_no_record_names_none(tmp_path):
    episode = make_episode("Maze", 7, repeat=2)
    run = _run_with(tmp_path,
                    _line(episode, reward=float("nan"), model="other", generation=1),  # line 3
                    _line(episode, task_index=8, turns=[{**episode.to_dict()["turns"][0], "reward": float("inf")}]),
                    _line(episode, task_index=9, reward=1e300),  # beyond the ranges: a number still
                    _line(episode, task_index=10, reward="abc"),  # a field of the wrong type
                    _line(episode, task_index=2**60, reward=float("nan")),  # an index beyond 2**53 - 1
                    _line(episode, generation=0, reward=float("nan")),  # a generation below 1
                    b'{"env": "Maze", "task_index": 11, "repeat": 0, "reward": NaN}\n',  # fields missing
                    b"not json\n",
                    b'{"env": "Maze", "task_index": 12, "repeat": 0, "reward": NaN')  # torn
    for convert in (EpisodeRecord.from_line, reading.record_without_turns):
        found = reading.read_episodes_file(run.episodes_file, convert)
        assert [r.task_index for r in found.records] == [0, 1]
        assert [(s.line, s.key, s.generation, s.model) for s in found.skipped] == [
            (3, ("Maze", 7, 2), 1, "other"), (4, ("Maze", 8, 2), 1, episode.model),
            (5, ("Maze", 9, 2), 1, episode.model), (6, None, None, None), (7, None, None, None),
            (8, None, None, None), (9, None, None, None), (10, None, None, None), (11, None, None, None)]
        assert "'reward' must be a finite number or null, got NaN" in found.skipped[0].reason
        assert found.skipped[-1].torn


def test_the_light_index_keeps_the_episode_a_line_names(tmp_path):
    run = _run_with(tmp_path, _line(make_episode("Maze", 5), reward=float("-inf"), model="m"))
    whole = reading.read_episodes_file(run.episodes_file, reading.record_without_turns, keep_index=True)
    assert light_index.load(run.episodes_file) is not None  # the next reading is the index's
    indexed = reading.read_episodes_file(run.episodes_file, reading.record_without_turns)
    assert indexed.skipped == whole.skipped
    assert [(s.key, s.generation, s.model) for s in indexed.skipped] == [(("Maze", 5, 0), 1, "m")]


def test_an_errored_record_stands_for_the_line_it_names(tmp_path):
    run = _run_with(tmp_path, _line(make_episode("Maze", 5, repeat=1), reward=float("nan"), model="m"))
    (line,) = reading.read_episodes_file(run.episodes_file).skipped
    record = reading.unreadable_episode(line, "named")
    assert (record.key, record.generation, record.model, record.reward, record.outcome) == (
        ("Maze", 5, 1), 1, "m", None, "error")
    assert record.error.type == reading.UNREADABLE_RECORD and record.error.message == str(line)
    assert record.error.message.startswith(f"{run.episodes_file}:3: skipped an unreadable line (")


def test_a_line_of_a_later_generation_than_the_runs_names_no_episode_of_it(tmp_path):
    episode = make_episode("Maze", 5)
    run = _run_with(tmp_path, _line(episode, reward=float("nan"), generation=2),
                    _line(episode, task_index=6, reward=float("nan"), generation=3), generation=2)
    found = reading.read_episodes_file(run.episodes_file)
    assert [(s.line, s.key, s.generation) for s in found.skipped] == [(3, ("Maze", 5, 0), 2), (4, None, None)]
    assert "'reward' must be a finite number" in found.skipped[1].reason  # still said why it is no record
