"""Every reader of a run directory, fed generated garbage: none raises, each counts every
valid record exactly once, and each reports the lines it left out with their numbers.

Hypothesis writes episodes.jsonl files that mix the harness's own lines (some of them
repeated byte for byte, some the same episode again with other contents, some of a newer
generation) with garbage: arbitrary JSON values, records with one field (or one field of
a turn or of the error) replaced by arbitrary JSON (NaN and Infinity included, which
Python's json reads), random bytes, torn lines, blank lines, and a last line without its
newline. Then every reader runs in-process on the file: the run directory
(``RunDir.read``), the report's reader and the report itself, compare's loader and a
comparison against a clean run, a trend over both runs, the resume view
(``RunLedger.resume(path).kept``), and merge of the run as a one-shard run.

What a line is, and what the run counts, is worked out here line by line from the
standard library's reading of each line and ``EpisodeRecord.from_line``: a record counts
when it is the first line of its (env, task, repeat, generation) and its generation is the
newest of its (env, task, repeat). The readers parse with orjson, which reads an integer
beyond 64 bits as a float: records are compared with such an integer as that float
(:func:`plain`), and compare's, trend's and the report's without their turns, which they
do not keep. Compare and trend also count each line that is no record but names its episode
(:func:`names_an_episode`) as that episode errored, where its generation has no record.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentgym.compare import CompareError, compare_runs
from pytest_agentgym.compare.runs import load_run
from pytest_agentgym.report.payload import read_for_report
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.report.trend import build_trend
from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.jsonl import encode_line
from pytest_agentgym.results.ledger import RunLedger
from pytest_agentgym.results.record_checks import MAX_WHOLE
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run import shards
from pytest_agentgym.run.merge import merge
from pytest_agentgym.run.merge_checks import MergeError
from pytest_agentgym.run.plans import EnvPlan, plan_record

from helpers.report_fixtures import make_episode, make_info, write_run

pytestmark = [pytest.mark.faults,  # malformed input
              pytest.mark.filterwarnings("ignore::UserWarning")]  # every line left out warns; checked below

RUN_ID = "20261121-120000-abcd"

# -- what goes into a line ----------------------------------------------------------------------

#: Text, with what models and servers are known to send: half a surrogate pair (a reply cut
#: inside an emoji), markup that must not end the report's script block.
TEXT = st.text(max_size=12) | st.sampled_from(["\ud83d", "cut \ud83d", "</script><!--", ""])
#: Numbers at the edges: non-finite (Python's json writes and reads NaN and Infinity), beyond
#: any sum, beyond 64 bits, negative.
EDGES = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -1e120, 2**64, 2**53, -1, 0])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | EDGES | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)

#: A record of the harness: (env, task, repeat, generation, outcome). Few keys, so that
#: duplicates and superseding generations are common.
EPISODES = st.tuples(st.sampled_from(["Maze", "Wordle"]), st.integers(0, 3), st.integers(0, 1),
                     st.integers(1, 2), st.sampled_from(["passed", "failed", "unsolved", "error"]))

#: Fields that are replaced: every field of a record, and one of its first turn and its error.
TOP_FIELDS = [f.name for f in dataclasses.fields(EpisodeRecord)]
TURN_FIELDS = ["index", "observation", "reply", "action", "feedback", "reward", "done", "model_latency_s",
               "score", "prompt_tokens", "token_data"]


def record_data(episode: tuple) -> dict[str, Any]:
    env, task, repeat, generation, outcome = episode
    record = make_episode(env, task, repeat=repeat, outcome=outcome)
    return dataclasses.replace(record, generation=generation).to_dict()


@st.composite
def a_line(draw) -> tuple[str, bytes]:
    """(what it is, its bytes without the newline). Only the harness lines are all records;
    the rest may or may not be (a replaced field may hold a value of the right type)."""
    kind = draw(st.sampled_from(["harness", "harness", "harness", "changed", "json", "field", "turn", "error",
                                 "bytes", "torn", "blank"]))
    if kind == "harness":
        data = record_data(draw(EPISODES))
        data["turns"][0]["reply"] = draw(TEXT)  # as the model sent it, half a surrogate pair too
        return kind, encode_line(data).rstrip(b"\n")
    if kind == "changed":  # the same episode again, with other contents
        data = record_data(draw(EPISODES))
        data["duration_s"] = draw(st.floats(0, 1000))
        return kind, json.dumps(data).encode()
    if kind == "json":
        return kind, json.dumps(draw(JSON)).encode()
    data = record_data(draw(EPISODES))
    if kind == "field":
        name = draw(st.sampled_from(TOP_FIELDS))
        data[name] = draw(EDGES | JSON)
        return f"field {name}", json.dumps(data).encode()
    if kind == "turn":
        name = draw(st.sampled_from(TURN_FIELDS))
        data["turns"][0][name] = draw(EDGES | JSON)
        return f"turn {name}", json.dumps(data).encode()
    if kind == "error":
        data["error"] = draw(JSON | st.fixed_dictionaries({"type": JSON, "message": JSON, "where": JSON}))
        return kind, json.dumps(data).encode()
    if kind == "bytes":
        return kind, draw(st.binary(max_size=60)).replace(b"\n", b" ")
    if kind == "torn":
        line = json.dumps(data).encode()
        return kind, line[:draw(st.integers(0, len(line) - 1))]
    return kind, draw(st.sampled_from([b"", b"   ", b"\t"]))


@st.composite
def episodes_files(draw) -> bytes:
    """An episodes.jsonl: lines from :func:`a_line`, some repeated byte for byte, and
    perhaps a last line without its newline (a writer killed mid-write)."""
    lines = [draw(a_line())[1] for _ in range(draw(st.integers(0, 14)))]
    for _ in range(draw(st.integers(0, 3))):  # copies of earlier lines
        if lines:
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(lines)))
    text = b"".join(line + b"\n" for line in lines)
    if draw(st.booleans()):
        text += draw(a_line())[1]  # no newline: the last line is torn, or happens to be whole
    return text


# -- what the readers must find ----------------------------------------------------------------


@dataclasses.dataclass
class Expected:
    #: line number -> record, for every line that is a record
    records: dict[int, EpisodeRecord]
    #: line numbers of the lines that are no record (blank lines are neither)
    skipped: list[int]
    #: line number -> (line number of the record it repeats, whether the bytes are the same)
    duplicates: dict[int, tuple[int, bool]]
    #: (env, task, repeat) -> the line number of the record that counts
    current: dict[tuple, int]
    #: line number -> ((env, task, repeat), generation) of each line that is no record but names
    #: its episode (:func:`names_an_episode`)
    named: dict[int, tuple] = dataclasses.field(default_factory=dict)

    @property
    def counted(self) -> dict[tuple, EpisodeRecord]:
        return {key: self.records[line] for key, line in self.current.items()}

    @property
    def compared(self) -> dict[tuple, tuple[int, EpisodeRecord | None]]:
        """What compare and trend count: (env, task, repeat) -> (generation, the record, or None
        for a line naming its episode), the newest generation's first line, a line naming an
        episode only where its generation has no record."""
        readable = {(r.key, r.generation) for r in self.records.values()}
        lines = [(n, r.key, r.generation, r) for n, r in self.records.items() if n not in self.duplicates]
        lines += [(n, key, generation, None) for n, (key, generation) in self.named.items()
                  if (key, generation) not in readable]
        found: dict[tuple, tuple[int, EpisodeRecord | None]] = {}
        for _, key, generation, record in sorted(lines, key=lambda line: line[0]):
            if key not in found or generation > found[key][0]:
                found[key] = (generation, record)
        return found


def _no_constant(name: str) -> None:
    raise ValueError(name)


def strict_json(raw: bytes):
    """A line as strict JSON (NaN and Infinity are no JSON numbers)"""
    return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)


#: The generation the garbage run's run.json says it is at: a line of a later generation is no
#: record of the run (docs/results.md), so it is skipped like any other line that is no record.
RUN_GENERATION = 2


def names_an_episode(raw: bytes) -> tuple | None:
    """((env, task, repeat), generation) that a line that is no record names: when Python's json
    reads it and ``EpisodeRecord.from_dict`` (the types alone) takes it, with its index and repeat
    from 0, its generation from 1 to the run's, each to 2**53 - 1 (docs/results.md)."""
    try:
        record = EpisodeRecord.from_dict(json.loads(raw.decode("utf-8")))
    except Exception:  # noqa: BLE001 - whatever it is, it names nothing
        return None
    if not (0 <= record.task_index <= MAX_WHOLE and 0 <= record.repeat <= MAX_WHOLE
            and 1 <= record.generation <= min(RUN_GENERATION, MAX_WHOLE)):
        return None
    return record.key, record.generation


def expected_of(text: bytes) -> Expected:
    records, skipped, raw_of, named = {}, [], {}, {}
    for number, raw in enumerate(io.BytesIO(text), 1):  # lines end at b"\n" only, as the readers read
        if raw.isspace():
            continue
        try:
            record = EpisodeRecord.from_line(strict_json(raw))  # strict JSON, then the record check
        except Exception:  # noqa: BLE001 - whatever it is, it is no record
            skipped.append(number)
            if (names := names_an_episode(raw)) is not None:
                named[number] = names
            continue
        if record.generation > RUN_GENERATION:
            skipped.append(number)
            continue
        records[number] = record
        raw_of[number] = raw.rstrip(b"\r\n")
    first: dict[tuple, int] = {}
    duplicates = {}
    for number, record in records.items():
        seen = first.setdefault((record.key, record.generation), number)
        if seen != number:
            duplicates[number] = (seen, raw_of[seen] == raw_of[number])
    newest: dict[tuple, int] = {}
    for (key, generation) in first:
        newest[key] = max(newest.get(key, generation), generation)
    current = {key: first[(key, generation)] for key, generation in newest.items()}
    return Expected(records, skipped, duplicates, current, named)


def plain(value: Any) -> Any:
    """``value`` with an integer beyond 64 bits as the float that orjson reads it as."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**64 \
        else value


def same(records, *, turns: bool = False) -> dict[tuple, Any]:
    """Records by key as data (:func:`plain`), without their turns unless ``turns`` (compare,
    trend and the report keep none)."""
    return {r.key: plain((r if turns else dataclasses.replace(r, turns=())).to_dict()) for r in records}


# -- the readers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    """A run of every key the generated files use, read by nobody but compare and trend."""
    episodes = [make_episode(env, task, repeat=repeat) for env in ("Maze", "Wordle") for task in range(4)
                for repeat in range(2)]
    root = tmp_path_factory.mktemp("clean")
    return write_run(root, make_info(environments=("Maze", "Wordle"), status="finished"), episodes).path


def write_garbage_run(root: Path, text: bytes, expected: Expected) -> RunDir:
    """A finished run holding ``text`` as its episodes.jsonl, recorded as shard 1 of 1 whose
    selection is what the run counts (so a merge has nothing to refuse but duplicates)."""
    envs = sorted({key[0] for key in expected.current}) or ["Maze"]
    run = write_run(root, make_info(environments=tuple(envs), status="finished", generation=RUN_GENERATION), [])
    record = shards.shard_record(shards.Shard(1, 1, "test"), {key: 1.0 for key in expected.current},
                                 {env: plan_record(EnvPlan()) for env in envs})
    run.write_info(dataclasses.replace(run.read_info(), shard=record))
    run.episodes_file.write_bytes(text)
    return run


def check_run_dir(run: RunDir, expected: Expected) -> None:
    found = RunDir(run.path).read()
    assert [s.line for s in found.skipped] == expected.skipped
    assert {d.line: (d.kept_line, d.identical) for d in found.duplicates} == expected.duplicates
    assert {n: plain(r.to_dict()) for n, r in zip(found.lines, found.records)} == {
        n: plain(r.to_dict()) for n, r in expected.records.items() if n not in expected.duplicates}
    counted = current_records(found.records)
    assert len(counted) == len(expected.current)  # each episode once
    assert same(counted, turns=True) == same(expected.counted.values(), turns=True)
    assert len(counted.duplicates) == len(expected.duplicates)  # what run.json's counts say


def check_report(run: RunDir, expected: Expected) -> None:
    packed = read_for_report(run.episodes_file)
    assert [s.line for s in packed.skipped] == expected.skipped
    assert sorted(d.line for d in packed.duplicates) == sorted(expected.duplicates)
    counted = current_records(packed.records)
    assert same(counted) == same(expected.counted.values())
    page = render_run_dir(run.path).read_text(encoding="utf-8")
    assert f"<dt>Episodes</dt><dd>{len(expected.current)}:" in page
    assert ('id="duplicate-lines"' in page) == bool(expected.duplicates)
    assert ('id="skipped-lines"' in page) == bool(expected.skipped)


def check_compare_and_trend(clean: Path, run: RunDir, expected: Expected) -> None:
    compared = expected.compared
    if not compared:
        with pytest.raises(CompareError, match="holds no readable episode"):
            load_run(run.path, "candidate")
        return
    loaded = load_run(run.path, "candidate")
    records = [r for _, r in compared.values() if r is not None]
    assert same(r for r in loaded.records if r.key not in loaded.unreadable) == same(records)
    assert {r.key: (r.generation, r.error.type) for r in loaded.records if r.key in loaded.unreadable} == {
        key: (generation, "UnreadableRecord") for key, (generation, r) in compared.items() if r is None}
    assert len(loaded.records) == len(compared)
    comparison = compare_runs(clean, run.path, allow_mismatch=True)
    for env, result in comparison.environments.items():
        mine = sum(1 for key in compared if key[0] == env)
        assert result.n_matched + result.n_errors + result.n_only_cand == mine, env
    trend = build_trend([clean, run.path], allow_mismatch=True)
    last = next(r for r in trend.runs if r.path == run.path)
    assert sum(s.episodes for s in last.summaries.values()) == len(compared)


def check_resume(run: RunDir, expected: Expected) -> None:
    kept = RunLedger.resume(run.path).kept
    assert same(kept.values(), turns=True) == same((r for r in expected.counted.values() if r.error is None),
                                                   turns=True)


def check_merge(run: RunDir, out: Path, expected: Expected) -> None:
    differing = sorted(line for line, (_, identical) in expected.duplicates.items() if not identical)
    if not expected.current:
        return  # a shard of no episode: nothing to merge, and nothing that a line could break
    if differing:
        with pytest.raises(MergeError) as refused:
            merge([run.path], out)
        for line in differing[:8]:  # merge lists the first 8 and counts the rest
            kept_line = expected.duplicates[line][0]
            assert f"at lines {kept_line} and {line}" in str(refused.value)
        if len(differing) > 8:
            assert f"({len(differing) - 8} more)" in str(refused.value)
        return
    merged = merge([run.path], out)
    assert merged.info.counts["episodes"] == len(expected.current)
    assert merged.info.counts["duplicates"] == len(expected.duplicates)
    again = RunDir(out).read()
    assert not again.duplicates and not again.skipped
    assert same(current_records(again.records), turns=True) == same(expected.counted.values(), turns=True)


#: examples per run: 40 in the default tier; AGENTGYM_PROPERTY_EXAMPLES=2000 for a longer search
EXAMPLES = int(os.environ.get("AGENTGYM_PROPERTY_EXAMPLES", "40"))


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=episodes_files())
def test_every_reader_counts_each_valid_record_once_and_never_raises(clean_run, text):
    expected = expected_of(text)
    root = Path(tempfile.mkdtemp(prefix="garbage-", dir=clean_run.parent.parent))
    try:
        run = write_garbage_run(root / "run", text, expected)
        check_run_dir(run, expected)
        check_report(run, expected)
        check_compare_and_trend(clean_run, run, expected)
        check_resume(run, expected)
        check_merge(run, root / "merged", expected)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_generated_files_hold_what_the_property_is_about():
    """The strategy reaches every case the property speaks of (a guard against a strategy
    that quietly stops making duplicates or garbage)."""
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=episodes_files())
    def look(text):
        expected = expected_of(text)
        if expected.skipped:
            seen.add("skipped")
        if any(same_bytes for _, same_bytes in expected.duplicates.values()):
            seen.add("identical duplicate")
        if any(not same_bytes for _, same_bytes in expected.duplicates.values()):
            seen.add("differing duplicate")
        if any(r.generation == 2 for r in expected.counted.values()) and any(
                r.generation == 1 for r in expected.records.values()):
            seen.add("generations")
        if re.search(rb"\bNaN\b|Infinity", text):
            seen.add("non-finite")
        if any(r is None for _, r in expected.compared.values()):
            seen.add("a line naming its episode")
        if text and not text.endswith(b"\n"):
            seen.add("no newline at the end")

    look()
    assert seen == {"skipped", "identical duplicate", "differing duplicate", "generations", "non-finite",
                    "no newline at the end", "a line naming its episode"}
