"""The report's own reader of episodes.jsonl (payload.read_for_report) against the results reader.

The report reads the file its own way for speed (orjson, turns taken as lists
in one pass, trajectories gzipped on a thread while the next lines are read).
These tests pin that it keeps, skips and shows exactly what
store.RunDir.read_episodes_report does, on the lines the harness writes and on
the odd ones a file can hold. Expected trajectories are worked out from the
results reader's records, not taken from the code under test.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import math
import re
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from pytest_agentgym.report import payload
from pytest_agentgym.report.payload import TURN_FIELDS, read_for_report, trajectory_json
from pytest_agentgym.report.render import render_run_dir

from helpers.report_fixtures import make_episode, make_info, make_turn, write_run

SURROGATE_REPLY = "Thought: half an emoji \ud83d then é ✓ 😀\nAction:\nturn left"


def _line(data: dict) -> bytes:
    # allow_nan and ensure_ascii as Python's defaults: NaN tokens, and "\ud83d" escapes
    return (json.dumps(data) + "\n").encode("ascii")


def _odd_run(tmp_path: Path):
    """A run whose episodes.jsonl holds the harness's lines and odd ones; returns the run."""
    run = write_run(tmp_path, make_info(), [make_episode("Maze", 0), make_episode("Wordle", 1, outcome="failed")])
    turns = (make_turn(0, observation="start", feedback="after 0"),
             make_turn(1, observation="after 0", reply=SURROGATE_REPLY, feedback="end", done=True))
    full = make_episode("Maze", 2, turns=turns).to_dict()
    short = make_episode("Maze", 3).to_dict()
    for turn in short["turns"]:  # an older writer: the fields with defaults left out
        for name in ("prompt_tokens", "completion_tokens", "score", "token_data"):
            del turn[name]
    nan = make_episode("Maze", 4).to_dict()
    nan["reward"] = float("nan")
    nan["turns"][1]["reward"] = float("inf")
    stray = make_episode("Maze", 5).to_dict()
    stray["turns"][0]["mood"] = "odd"  # a key Turn does not have
    listed = make_episode("Maze", 6).to_dict()
    listed["turns"] = [["not", "a", "turn"]]
    nothing = make_episode("Maze", 7).to_dict()
    nothing["turns"] = None
    with run.episodes_file.open("ab") as handle:
        for data in (full, short, nan, stray, listed, nothing):
            handle.write(_line(data))
        handle.write(b"\xff\xfe not utf-8\n")
        handle.write(b"   \n")
        handle.write(_line(make_episode("Maze", 8).to_dict())[:40])  # torn: its writer was killed
    return run


def _expected_turns(record) -> list[list]:
    """The page's form of a trajectory: lists in TURN_FIELDS order, non-finite numbers as
    null, an observation that repeats the previous feedback stored as null."""
    rows, previous = [], None
    for turn in record.turns:
        row = [getattr(turn, name) for name in TURN_FIELDS]
        row = [None if isinstance(v, float) and not math.isfinite(v) else v for v in row]
        if turn.observation == previous:
            row[TURN_FIELDS.index("observation")] = None
        previous = turn.feedback
        rows.append(row)
    return rows


def _unpack(chunk) -> list[dict]:
    text = str(chunk.text)
    if chunk.encoding == "gzip-base64":
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return json.loads(text)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_the_report_keeps_and_skips_what_the_results_reader_does(tmp_path, compress):
    run = _odd_run(tmp_path)
    with pytest.warns(UserWarning):
        expected, expected_skipped = run.read_episodes_report()
    packed = read_for_report(run.episodes_file, compress)

    assert [(s.line, s.torn) for s in packed.skipped] == [(s.line, s.torn) for s in expected_skipped]
    # NaN reward (no record: check_record_data), stray key, list, null, bytes, torn
    assert [s.line for s in expected_skipped] == [5, 6, 7, 8, 9, 11]
    assert expected_skipped[-1].torn
    assert [repr(r) for r in packed.records] == [repr(dataclasses.replace(r, turns=())) for r in expected]

    chunks = packed.packer.finish(["Maze", "Wordle"])
    assert {c.encoding for c in chunks} == {"gzip-base64" if compress else "json"}
    for record, slot in zip(expected, packed.slots):
        number, position = packed.packer.placement[slot]
        shown = _unpack(chunks[number])[position]
        assert shown["turns"] == _expected_turns(record), record.task_index
        assert shown["nodeid"] == record.nodeid and shown["started_at"] == record.started_at
    surrogate = next(r for r in expected if r.task_index == 2)
    assert surrogate.turns[1].reply == SURROGATE_REPLY  # the results reader's answer, held by the page too


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_reply_with_half_a_surrogate_pair_renders(tmp_path, compress):
    run = _odd_run(tmp_path)
    with pytest.warns(UserWarning):
        page = render_run_dir(run.path, output=tmp_path / "report.html", compress=compress)
    text = page.read_bytes().decode("utf-8")  # valid UTF-8: the lone half is written as an escape
    chunks = re.findall(r'class="trajectory-chunk" id="chunk-\d+" data-encoding="([^"]+)">([^<]*)</script>', text)
    replies = [turn[TURN_FIELDS.index("reply")] for encoding, body in chunks
               for shown in _unpack(payload.Chunk(0, encoding, body)) for turn in shown["turns"]]
    assert SURROGATE_REPLY in replies


def test_what_orjson_cannot_write_is_written_by_the_standard_library():
    turns = (make_turn(0), dataclasses.replace(make_turn(1), prompt_tokens=2**70, reply="a\ud800b"))
    shown = json.loads(trajectory_json(make_episode("Maze", 0, turns=turns)))
    assert shown["turns"][1][TURN_FIELDS.index("prompt_tokens")] == 2**70
    assert shown["turns"][1][TURN_FIELDS.index("reply")] == "a\ud800b"


class _LazyFuture(Future):
    """Runs its work only when its result is asked for: a gzip thread that never catches up."""

    def __init__(self, work):
        super().__init__()
        self._work = work

    def result(self, timeout=None):
        if not self.done():
            self.set_result(self._work())
        return super().result(timeout)


class _LazyExecutor:
    def __init__(self, *args, **kwargs):
        self.waiting: list[_LazyFuture] = []
        self.most_waiting = 0
        self.shut = False
        executors.append(self)

    def submit(self, fn, *args):
        future = _LazyFuture(lambda: fn(*args))
        self.waiting = [f for f in self.waiting if not f.done()] + [future]
        self.most_waiting = max(self.most_waiting, len(self.waiting))
        return future

    def shutdown(self, wait=True, cancel_futures=False):
        self.shut = True


executors: list[_LazyExecutor] = []


def test_a_slow_gzip_thread_holds_the_reader_back(tmp_path, monkeypatch):
    """At most ZIP_AHEAD closed chunks wait for the gzip thread, however slow it is,
    so the text waiting to be packed stays bounded (about ZIP_AHEAD x CHUNK_BYTES)."""
    monkeypatch.setattr(payload, "ThreadPoolExecutor", _LazyExecutor)
    monkeypatch.setattr(payload, "CHUNK_BYTES", 600)
    executors.clear()
    run = write_run(tmp_path, make_info(), [make_episode("Maze", n) for n in range(60)])
    packed = read_for_report(run.episodes_file, compress=True)
    chunks = packed.packer.finish()
    assert len(chunks) > 3 * payload.ZIP_AHEAD  # enough chunks for the bound to matter
    (executor,) = executors
    assert executor.most_waiting == payload.ZIP_AHEAD + 1 and executor.shut
    assert [c.number for c in chunks] == list(range(len(chunks)))
    assert sum(len(_unpack(c)) for c in chunks) == 60


def test_chunks_are_gzipped_off_the_reading_thread(tmp_path, monkeypatch):
    threads = set()
    real = payload.gzip_chunk

    def recording(number, raw):
        threads.add(threading.current_thread().name)
        return real(number, raw)

    monkeypatch.setattr(payload, "gzip_chunk", recording)
    monkeypatch.setattr(payload, "CHUNK_BYTES", 600)
    run = write_run(tmp_path, make_info(), [make_episode("Maze", n) for n in range(20)])
    packed = read_for_report(run.episodes_file, compress=True)
    chunks = packed.packer.finish()
    assert len(chunks) > 1 and threads and threading.current_thread().name not in threads
    assert sum(len(_unpack(c)) for c in chunks) == 20


def test_a_plain_report_escapes_each_block_as_it_closes(tmp_path, monkeypatch):
    """compress=False cannot switch to gzip later, so a closed block is escaped at once and its
    raw text dropped: the 10,000-episode plain page does not hold its 74 MB twice at the end."""
    monkeypatch.setattr(payload, "CHUNK_BYTES", 600)
    run = write_run(tmp_path, make_info(), [make_episode("Maze", n) for n in range(20)])
    packed = read_for_report(run.episodes_file, compress=False)
    closed = list(packed.packer.chunks)  # before finish: the blocks closed while reading
    assert len(closed) > 1 and {c.encoding for c in closed} == {"json"}
    chunks = packed.packer.finish()
    assert chunks[:len(closed)] == closed and sum(len(_unpack(c)) for c in chunks) == 20
