"""compare, trend and merge read runs with the fast reader and say what the standard library's would.

Every reader of episodes.jsonl goes through results/reading.read_episodes_file, which parses
with orjson (results/jsonl.parse_fast) and keeps compare's, trend's and merge's records
without their turns (reading.record_without_turns). These tests run the commands on runs
whose episodes.jsonl holds odd lines (not JSON, not UTF-8, NaN, half a surrogate pair,
integers beyond 64 bits, a duplicate, a record of the wrong type, a turn with a key Turn
does not have, a torn last line) twice: as they are, and with the run directory read the
way it was read before, by the standard library's parser into whole records
(:func:`standard_library`). Verdicts, figures, the notes on skipped lines and the merged
episodes.jsonl must be the same. Trend must read each run once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

from pytest_agentgym import cli
from pytest_agentgym.compare import compare_runs
from pytest_agentgym.compare import runs as compare_loading
from pytest_agentgym.report.compare_view import build_view
from pytest_agentgym.report.trend import build_trend
from pytest_agentgym.results import reading, store
from pytest_agentgym.results.jsonl import encode_line, parse_line
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run import merge as merging
from pytest_agentgym.run import merge_checks
from pytest_agentgym.run import shards
from pytest_agentgym.run.merge import merge
from pytest_agentgym.run.plans import EnvPlan, plan_record

from helpers.report_fixtures import make_episode, make_info, write_run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # each odd line warns; the notes are checked

BIG = 2**64  # beyond 64 bits: orjson reads it as a float (equal to it), the standard library as this integer


def _data(env: str, task: int, **changes) -> dict:
    return {**make_episode(env, task, outcome="passed" if task % 3 else "failed").to_dict(), **changes}


def _json(data) -> bytes:
    """Python's json with its defaults: NaN tokens, \\u escapes (half a surrogate pair too)."""
    return (json.dumps(data) + "\n").encode("ascii")


def odd_lines() -> list[bytes]:
    """Lines of the harness and odd ones, each odd line next to records it must not disturb."""
    stray_turn = _data("Maze", 6)
    stray_turn["turns"][0]["mood"] = "odd"
    surrogate = _data("Maze", 3)
    surrogate["turns"][0]["reply"] = "cut inside an emoji \ud83d"
    nan_tokens = _data("Wordle", 4)
    nan_tokens["turns"][0]["token_data"] = {"logprobs": [-0.25, float("nan")]}
    return [
        encode_line(_data("Maze", 0)),
        encode_line(_data("Maze", 1)),
        b"this is not JSON\n",
        encode_line(_data("Wordle", 0)),
        b"\xff\xfe not UTF-8\n",
        _json(_data("Maze", 2, reward=float("nan"))),  # NaN: no record
        _json(surrogate),  # orjson refuses half a surrogate pair; the standard library reads it
        _json(_data("Maze", 4, reward=BIG, success=True)),  # a reward beyond 64 bits: a record
        _json(_data("Maze", 5, task_index=BIG)),  # a task index beyond 64 bits: no record
        _json(_data("Wordle", 1, sampling={"seed": BIG, "temperature": 0.7})),  # kept, written back
        encode_line(_data("Maze", 1)),  # a duplicate, byte for byte
        b"[1, 2, 3]\n",  # a record of the wrong type
        _json(stray_turn),  # a turn with a key Turn does not have
        encode_line(_data("Wordle", 2)),
        _json(nan_tokens),  # NaN where the record check does not look: no strict JSON, no record
        encode_line(_data("Wordle", 3))[:50],  # torn: its writer was killed
    ]


def _run(root: Path, lines: list[bytes], run_id: str = "20261121-120000-abcd", **info) -> RunDir:
    """A finished run whose episodes.jsonl is ``lines``."""
    run = write_run(root, make_info(run_id, environments=("Maze", "Wordle"), status="finished", **info), [])
    run.episodes_file.write_bytes(b"".join(lines))
    return run


def _clean(root: Path, run_id: str, step: int, flip: int = 0) -> RunDir:
    """A run of every key the odd run uses, ``flip`` of them failed where the odd run passed."""
    episodes = [make_episode(env, task, run_id=run_id, outcome="failed" if task < flip else "passed")
                for env in ("Maze", "Wordle") for task in range(8)]
    return write_run(root, make_info(run_id, environments=("Maze", "Wordle"), status="finished",
                                     checkpoint=f"ckpt/step-{step}"), episodes)


@pytest.fixture
def standard_library(monkeypatch):
    """Read run directories as before the fast reader: the standard library's parser, whole
    records (compare's loader, merge's loader and RunDir.read all go through these names)."""
    def enter() -> None:
        slow = functools.partial(reading.read_episodes_file, parse=parse_line)
        monkeypatch.setattr(store, "read_episodes_file", slow)
        monkeypatch.setattr(merge_checks, "read_episodes_file", slow)
        monkeypatch.setattr(compare_loading, "record_without_turns", EpisodeRecord.from_line)
        monkeypatch.setattr(merge_checks, "record_without_turns", EpisodeRecord.from_line)

    return enter


def _both(standard_library, produce):
    """``produce()`` with the fast reader, then with the standard library's."""
    fast = produce()
    standard_library()
    return fast, produce()


def test_the_fast_parse_keeps_and_skips_what_the_standard_library_does(tmp_path):
    run = _run(tmp_path, odd_lines())
    before = reading.read_episodes_file(run.episodes_file, EpisodeRecord.from_line, parse=parse_line)
    for convert in (EpisodeRecord.from_line, reading.record_without_turns):
        fast = reading.read_episodes_file(run.episodes_file, convert)
        slow = reading.read_episodes_file(run.episodes_file, convert, parse=parse_line)
        assert fast.problems() == slow.problems() == before.problems()  # the same lines, the same reasons
        assert [dataclasses.replace(r, turns=()) for r in fast.records] == [
            dataclasses.replace(r, turns=()) for r in before.records]
        assert [s.line for s in fast.skipped] == [3, 5, 6, 9, 12, 13, 15, 16]
        assert [d.line for d in fast.duplicates] == [11]
        assert fast.lines == slow.lines and fast.offsets == slow.offsets
        assert fast.records == slow.records
        assert [r.turns for r in fast.records] == [r.turns for r in slow.records]
        big = next(r for r in fast.records if r.key == ("Maze", 4, 0))
        assert isinstance(big.reward, float)  # orjson's reading, the difference parse_fast names
    assert "got a number 18446744073709551616" in fast.problems()[3]  # the standard library's reason
    assert not any(r.turns for r in fast.records)


def test_a_line_at_an_offset_reads_back_whole(tmp_path):
    run = _run(tmp_path, odd_lines())
    light = reading.read_episodes_file(run.episodes_file, reading.record_without_turns)
    whole = reading.read_episodes_file(run.episodes_file)
    again = [reading.read_record_at(run.episodes_file, offset) for offset in light.offsets]
    assert [r.to_dict() for r in again] == [r.to_dict() for r in whole.records]


def test_compare_gives_the_verdicts_and_notes_of_the_standard_library(tmp_path, standard_library, capsys):
    clean = _clean(tmp_path / "clean", "clean", 1, flip=3)
    odd = _run(tmp_path / "odd", odd_lines())

    def produce():
        comparison = compare_runs(clean.path, odd.path, allow_mismatch=True, metric="reward")
        code = cli.main(["compare", "--allow-mismatch", str(clean.path), str(odd.path)])
        out = capsys.readouterr()
        return comparison.to_json(), comparison.environments["Maze"].flips, code, out.out, out.err

    fast, slow = _both(standard_library, produce)
    assert fast == slow
    assert f"{odd.episodes_file}:9: skipped" in fast[4]  # the notes on the skipped lines
    assert fast[0]["environments"]["Maze"]["n_only_base"] > 0


def test_trend_gives_the_tables_and_verdicts_of_the_standard_library(tmp_path, standard_library, capsys):
    runs = [_clean(tmp_path / "one", "one", 1).path, _run(tmp_path / "two", odd_lines(), run_id="two",
                                                         checkpoint="ckpt/step-2").path,
            _clean(tmp_path / "three", "three", 3, flip=4).path]

    def produce():
        trend = build_trend(runs, allow_mismatch=True)
        code = cli.main(["trend", "--allow-mismatch", *map(str, runs)])
        out = capsys.readouterr()
        return trend.lines(), trend.exit_code(), code, out.out, out.err

    fast, slow = _both(standard_library, produce)
    assert fast == slow
    assert fast[1] == 0 and "three against two, the previous run (this decides the exit status):" in fast[0]


def _as_shard(run: RunDir, keys) -> RunDir:
    record = shards.shard_record(shards.Shard(1, 1, "test"), {key: 1.0 for key in keys},
                                 {env: plan_record(EnvPlan()) for env in ("Maze", "Wordle")})
    run.write_info(dataclasses.replace(run.read_info(), shard=record))
    return run


def test_merge_writes_the_episodes_jsonl_of_the_standard_library(tmp_path, standard_library):
    lines = odd_lines()
    shard = _run(tmp_path / "shard", lines)
    read = reading.read_episodes_file(shard.episodes_file, parse=parse_line)
    _as_shard(shard, [r.key for r in read.current])
    outs = iter([tmp_path / "fast", tmp_path / "slow"])

    def produce():
        out = next(outs)
        merged = merge([shard.path], out, report=False)
        info = json.loads((out / "run.json").read_text())
        return ((out / "episodes.jsonl").read_bytes(), merged.info.counts, info["summaries"], info["gates"],
                info["notes"][:-1], merged.left_out)  # the last note says when

    fast, slow = _both(standard_library, produce)
    assert fast == slow
    # the records' lines, by environment and task, as the harness writes them
    records = sorted((json.loads(lines[number - 1]) for number in read.lines),
                     key=lambda data: (data["env"], data["task_index"]))
    assert fast[0] == b"".join(map(encode_line, records))
    assert b'"seed": 18446744073709551616' in fast[0]  # the integer beyond 64 bits, as the shard held it
    assert any("repeat an earlier line byte for byte" in note for note in fast[5])


def test_trend_reads_each_run_once_and_compare_html_reads_no_run_again(tmp_path, monkeypatch):
    runs = [_clean(tmp_path / f"r{n}", f"r{n}", n, flip=n).path for n in range(1, 6)]
    reads: dict[Path, int] = {}
    counted = store.read_episodes_file

    def counting(path, *args, **kwargs):
        reads[Path(path).parent] = reads.get(Path(path).parent, 0) + 1
        return counted(path, *args, **kwargs)

    monkeypatch.setattr(store, "read_episodes_file", counting)
    trend = build_trend(runs, allow_mismatch=True)
    assert len(trend.runs) == 5
    assert reads == {path: 1 for path in runs}

    reads.clear()
    view = build_view(compare_runs(runs[0], runs[4], allow_mismatch=True))
    assert reads == {runs[0]: 1, runs[4]: 1}
    changed = [row for env in view.envs for row in env.rows]
    assert len(changed) == 2 * 4 and view.chunks  # the changed episodes' trajectories, read by key


def _indexed(run: RunDir) -> None:
    """Give ``run`` the light index a finished run has (its report's reading writes it)."""
    from pytest_agentgym.report.payload import read_for_report

    read_for_report(run.episodes_file)
    assert (run.path / "episodes.light.json").is_file()


def test_compare_trend_and_merge_say_the_same_from_the_light_index(tmp_path, capsys):
    clean = _clean(tmp_path / "clean", "clean", 1, flip=3)
    odd = _run(tmp_path / "odd", odd_lines(), run_id="two", checkpoint="ckpt/step-2")
    shard = _run(tmp_path / "shard", odd_lines())
    read = reading.read_episodes_file(shard.episodes_file, parse=parse_line)
    _as_shard(shard, [r.key for r in read.current])
    outs = iter([tmp_path / "from-file", tmp_path / "from-index"])

    def produce():
        comparison = compare_runs(clean.path, odd.path, allow_mismatch=True, metric="reward")
        code = cli.main(["compare", "--allow-mismatch", str(clean.path), str(odd.path)])
        trend = build_trend([clean.path, odd.path], allow_mismatch=True)
        out = next(outs)
        merged = merge([shard.path], out, report=False)
        info = json.loads((out / "run.json").read_text())
        return (comparison.to_json(), code, capsys.readouterr(), trend.lines(), (out / "episodes.jsonl").read_bytes(),
                merged.info.counts, info["summaries"], info["notes"][:-1], merged.left_out)

    from_file = produce()
    for run in (clean, odd, shard):
        _indexed(run)
    loaded = []
    original = reading.light_index.load
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reading.light_index, "load", lambda path: loaded.append(path) or original(path))
        from_index = produce()
    assert from_index == from_file
    assert f"{odd.episodes_file}:9: skipped" in from_index[2].err
    assert {Path(p) for p in loaded} == {clean.episodes_file, odd.episodes_file, shard.episodes_file}
    assert all(reading.light_index.load(Path(p)) is not None for p in loaded)  # each answered from its index


def test_merge_copies_lines_longer_than_one_read_and_a_last_line_without_its_newline(tmp_path):
    long_reply = _data("Maze", 0)
    long_reply["turns"][0]["reply"] = "x" * (3 * merging.LINE_READ + 17)  # several reads long
    lines = [encode_line(long_reply), encode_line(_data("Maze", 1)), encode_line(_data("Wordle", 0)).rstrip(b"\n")]
    shard = _run(tmp_path / "shard", lines)
    _as_shard(shard, [r.key for r in reading.read_episodes_file(shard.episodes_file).current])
    merge([shard.path], tmp_path / "out", report=False)
    merged = (tmp_path / "out" / "episodes.jsonl").read_bytes()
    assert merged == lines[0] + lines[1] + lines[2] + b"\n"
