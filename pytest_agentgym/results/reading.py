"""Reading a run's episodes.jsonl: the one function behind every reader.

The run directory (:class:`~pytest_agentgym.results.store.RunDir`), the report, compare
and trend, merge, resume and the rollout service all read a run's records through
:func:`read_episodes_file`, so they agree on what a run holds:

* a line that is no record (not UTF-8, not JSON, another JSON type, a field of the
  wrong type, a non-finite number: :func:`~pytest_agentgym.results.record_checks.check_record_data`)
  is skipped and reported with its line number and the reason
  (:class:`~pytest_agentgym.results.jsonl.SkippedLine`); one that is a record but for its
  numbers (a NaN reward) also says which episode it names (:func:`named_episode`), which
  compare counts as errored (:func:`unreadable_episode`);
* a second record of the same (env, task, repeat) in the same generation is a
  :class:`~pytest_agentgym.results.current.Duplicate`: the first written counts (the
  file is append-only, so the first line is the first thing the run said of the
  episode; a later copy adds nothing), the others are left out and reported with both
  line numbers and whether the lines are the same bytes;
* a record of a generation beyond the run's (run.json ``generation``, read from beside the
  file: :func:`run_generation`) is no record of this run (a line edited by hand, copied
  from another run or written by a bug): it is skipped and reported like a line that is no
  record (:data:`LATER_GENERATION`), never counted as the newest word on its episode;
* of the rest, each (env, task, repeat) counts once, in its newest generation
  (:func:`~pytest_agentgym.results.current.current_records`).

Lines are parsed by :func:`~pytest_agentgym.results.jsonl.parse_fast` (orjson, the
standard library for what orjson refuses); a line whose record is refused is read again
by the standard library, so the reason given for it is the one that reader gives. A reader
that needs no trajectory (compare, trend, merge, the report's index) converts with
:func:`record_without_turns`: the same checks, the same lines kept, no Turn objects, and
the byte offset of each line (``EpisodesFile.offsets``) to read one record whole later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from pytest_agentgym.results import light_index
from pytest_agentgym.results.current import Duplicate, Key, Records, current_records
from pytest_agentgym.results.jsonl import UNREADABLE, SkippedLine, parse_fast, parse_line, read_numbered
from pytest_agentgym.results.record_checks import check_record_data
from pytest_agentgym.results.records import TURN_NAMES, TURN_REQUIRED, EpisodeRecord, ErrorInfo

__all__ = ["LATER_GENERATION", "UNREADABLE_RECORD", "EpisodesFile", "named_episode", "read_episodes_file",
           "read_record_at", "record_without_turns", "run_generation", "unreadable_episode"]

#: What a skipped line is (``SkippedLine.what``) when its record's generation is beyond the run's.
LATER_GENERATION = "a record of a later generation than the run's"
#: The error type of the record that stands for a line naming its episode that is no record
#: (:func:`unreadable_episode`).
UNREADABLE_RECORD = "UnreadableRecord"


@dataclass
class EpisodesFile:
    """What :func:`read_episodes_file` found in one episodes.jsonl."""

    path: Path
    #: every record that counts or counted (superseded generations included), duplicates left
    #: out, in file order; a :class:`~pytest_agentgym.results.current.Records` that carries
    #: ``duplicates`` and ``skipped``
    records: Records
    #: the line number of each of ``records``
    lines: list[int] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    #: the byte offset of the line of each of ``records`` (:func:`read_record_at` reads it again)
    offsets: list[int] = field(default_factory=list)

    @property
    def current(self) -> Records:
        """What the run counts: the newest generation of each (env, task, repeat)."""
        return current_records(self.records)

    def problems(self) -> list[str]:
        """One message per skipped line and per duplicate, in line order."""
        found: list[tuple[int, str]] = [(s.line, str(s)) for s in self.skipped]
        found += [(d.line or 0, str(d)) for d in self.duplicates]
        return [text for _, text in sorted(found, key=lambda item: item[0])]


def _no_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: the line holds {name} (Python's json reads it; no writer of a run "
                     f"writes it)")


def strict(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """``parse``, refusing a line that holds NaN or Infinity anywhere (strict JSON has no
    such number, and every writer of a run writes strict JSON): in a field the record check
    knows, with that field's message; elsewhere (a turn's token data) with a general one.
    Only a line whose bytes hold those words pays for the second look; with
    :func:`~pytest_agentgym.results.jsonl.parse_fast` only a line that orjson (which reads
    strict JSON alone) refused and the standard library read."""
    if parse is parse_fast:
        return functools.partial(parse_fast, fallback=strict(parse_line))

    def read(raw: bytes) -> Any:
        data = parse(raw)
        if b"NaN" in raw or b"Infinity" in raw:
            try:
                json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
            except ValueError as exc:
                check_record_data(data)  # the field's own message, when it is a field it checks
                raise exc from None
        return data

    return read


def record_without_turns(data: Any) -> EpisodeRecord:
    """The record of a line's JSON without its turns: the line is taken or refused exactly as
    ``EpisodeRecord.from_line`` takes or refuses it, with the same reason, but no Turn is made
    (compare, trend and merge read only a record's own fields; ``rounds`` and the token counts
    are among them). A line whose turns are not what Turn takes is built whole, so that it
    fails as the whole record does."""
    check_record_data(data)  # first: what every reader refuses, with its message
    turns = data.get("turns") or ()
    if not all(map(TURN_NAMES.issuperset, turns)) or not all(map(TURN_REQUIRED.issubset, turns)):
        EpisodeRecord.from_line(data)  # raises Turn's own TypeError
    # built as from_line builds it, the check above standing for from_dict's second one (a fifth
    # of the time a light record costs)
    return EpisodeRecord._build({**data, "turns": ()})


def named_episode(raw: bytes) -> tuple[Key, int, str] | None:
    """The episode a line that is no record names, when it is a record but for its numbers (a
    NaN or infinite reward, a number beyond the ranges: what ``EpisodeRecord.from_dict`` takes
    and ``from_line`` refuses), with an index, repeat and generation in their ranges:
    ``((env, task, repeat), generation, model)``. None for any other line (not JSON, a field of
    the wrong type, a field missing): it names nothing that can be trusted."""
    try:
        record = EpisodeRecord.from_dict(parse_line(raw))  # Python's json reads NaN and Infinity
        check_record_data({"task_index": record.task_index, "repeat": record.repeat,
                           "generation": record.generation})
    except UNREADABLE:
        return None
    return record.key, record.generation, record.model


def unreadable_episode(skipped: SkippedLine, run_id: str) -> EpisodeRecord:
    """The errored record that stands for ``skipped``, a line that names its episode
    (``skipped.key``) but is no record: no reward, an error of type :data:`UNREADABLE_RECORD`
    whose message is the skipped line's (file, line number, reason). A reader that counts
    such an episode (compare) counts it as any episode recorded with an error."""
    assert skipped.key is not None, skipped
    env, task, repeat = skipped.key
    return EpisodeRecord.errored(run_id, env, task, repeat, ErrorInfo(UNREADABLE_RECORD, str(skipped), "harness"),
                                 started_at="", model=skipped.model or "", generation=skipped.generation or 1)


def _naming(skipped: SkippedLine, raw: bytes) -> SkippedLine:
    """``skipped`` (the line ``raw``) with the episode it names, if it names one (:func:`named_episode`)."""
    named = named_episode(raw)
    if named is None:
        return skipped
    key, generation, model = named
    return dataclasses.replace(skipped, key=key, generation=generation, model=model)


def run_generation(path: str | Path) -> int | None:
    """The generation the run of ``path`` (its episodes.jsonl) is at: run.json's ``generation``
    beside it (1 when run.json names none, as :class:`~pytest_agentgym.results.records.RunInfo`
    reads it). None when there is no run.json that can be read (a file read on its own): then no
    line is refused for its generation."""
    try:
        data = orjson.loads((Path(path).parent / "run.json").read_bytes())
    except (OSError, ValueError):
        return None
    value = data.get("generation", 1) if isinstance(data, dict) else None
    return value if type(value) is int and value >= 1 else None


def _later_reason(generation: int, run: int) -> str:
    return (f"its generation {generation} is beyond the run's generation {run} in run.json: it is no record "
            f"of this run (a line edited by hand, copied from another run, or written by a bug); every reader "
            f"leaves it out, and a resume refuses the run until the line is deleted")


def without_later_generations(found: EpisodesFile, run: int | None) -> EpisodesFile:
    """``found`` without its records (and duplicates) of a generation beyond ``run`` (the run's
    generation; None: no limit), each moved to the skipped lines as :data:`LATER_GENERATION`."""
    if run is None or (all(r.generation <= run for r in found.records)
                       and all(d.generation <= run for d in found.duplicates)
                       and all((s.generation or 1) <= run for s in found.skipped)):
        return found
    name = str(found.path)
    # a line that is no record and names an episode of a later generation names none of this run
    unnamed = [s if (s.generation or 1) <= run else dataclasses.replace(s, key=None, generation=None, model=None)
               for s in found.skipped]
    keep = [i for i, record in enumerate(found.records) if record.generation <= run]
    later = [SkippedLine(name, line, _later_reason(record.generation, run), what=LATER_GENERATION)
             for line, record in zip(found.lines, found.records) if record.generation > run]
    later += [SkippedLine(name, d.line or 0, _later_reason(d.generation, run), what=LATER_GENERATION)
              for d in found.duplicates if d.generation > run]
    skipped = sorted([*unnamed, *later], key=lambda s: s.line)
    duplicates = [d for d in found.duplicates if d.generation <= run]
    records = Records([found.records[i] for i in keep], duplicates=duplicates, skipped=skipped)
    return EpisodesFile(found.path, records, [found.lines[i] for i in keep], skipped, duplicates,
                        [found.offsets[i] for i in keep])


def read_episodes_file(path: str | Path, convert: Callable[[Any], EpisodeRecord] = EpisodeRecord.from_line, *,
                       parse: Callable[[bytes], Any] = parse_fast, keep_index: bool = False,
                       generation: int | None = None) -> EpisodesFile:
    """Read the episode records of ``path`` (see the module docstring). ``convert`` makes a
    record of a line's JSON, with every check of ``check_record_data`` (the default,
    ``EpisodeRecord.from_line``; :func:`record_without_turns` keeps the record without its
    turns, and is answered from the file's light index when it has one that describes it as
    it is: :mod:`~pytest_agentgym.results.light_index`); ``parse`` reads a line's bytes.
    ``keep_index``: write that index from this reading (the report's, which reads every line
    whole anyway). ``generation``: the run's generation (default: run.json's beside the file,
    :func:`run_generation`); a record beyond it is skipped (:func:`without_later_generations`;
    the index keeps what the file holds, so it serves whatever run.json says). A missing file
    holds no record."""
    path = Path(path)
    run = generation if generation is not None else run_generation(path)
    return without_later_generations(_read(path, convert, parse, keep_index), run)


def _read(path: Path, convert: Callable[[Any], EpisodeRecord], parse: Callable[[bytes], Any],
          keep_index: bool) -> EpisodesFile:
    """:func:`read_episodes_file` but for the run's generation."""
    if convert is record_without_turns and parse is parse_fast:
        with _no_cycle_collection():
            indexed = light_index.load(path)
        if indexed is not None:
            return EpisodesFile(path, Records(indexed.records, duplicates=indexed.duplicates, skipped=indexed.skipped),
                                indexed.lines, indexed.skipped, indexed.duplicates, indexed.offsets)
    made_from = light_index.stamp(path) if keep_index else None
    light: dict[int, dict[str, Any]] = {}  # id(record) -> its line's JSON without turns, for the index
    line = [b""]  # the line being converted: read again by the standard library if refused
    refused: list[bytes] = []  # each line skipped, in order (one per SkippedLine): what it names

    def remember(raw: bytes) -> Any:
        line[0] = raw
        try:
            return read(raw)
        except UNREADABLE:
            refused.append(raw)
            raise

    def checked(data: Any) -> EpisodeRecord:
        try:
            record = convert(data)
        except UNREADABLE:
            try:
                if parse is parse_line:
                    raise
                data = again(line[0])  # the standard library's reading says why (an integer beyond 64 bits)
                record = convert(data)
            except UNREADABLE:
                refused.append(line[0])
                raise
        if made_from is not None:
            light[id(record)] = light_index.light_fields(data)
        return record

    read, again = strict(parse), strict(parse_line)
    with _no_cycle_collection():
        numbered, skipped = read_numbered(path, checked, parse=remember)
    skipped = [_naming(s, raw) for s, raw in zip(skipped, refused, strict=True)]
    first: dict[tuple[Key, int], tuple[int, int]] = {}  # (key, generation) -> (line, offset)
    records: list[EpisodeRecord] = []
    lines: list[int] = []
    offsets: list[int] = []
    duplicates: list[Duplicate] = []
    for number, offset, record in numbered:
        seen = first.setdefault((record.key, record.generation), (number, offset))
        if seen[0] != number:
            duplicates.append(Duplicate(record.key, record.generation, number, seen[0], str(path),
                                        _same_line(path, seen[1], offset)))
            continue
        records.append(record)
        lines.append(number)
        offsets.append(offset)
    kept = Records(records, duplicates=duplicates, skipped=skipped)
    found = EpisodesFile(path, kept, lines, skipped, duplicates, offsets)
    if made_from is not None:
        light_index.save(path, made_from, found, [light[id(record)] for record in records])
    return found


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused: a run's records are many small objects in no
    cycle, and as they pile up the collector walks them again and again (a fifth of the
    time of reading 10,000 records). It is switched on again afterwards only if it was on
    before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_record_at(path: str | Path, offset: int) -> EpisodeRecord:
    """The whole record (turns included) of the line at byte ``offset`` of ``path``, as
    :func:`read_episodes_file` read it (``EpisodesFile.offsets``): for a reader that kept
    records without their turns and needs a few trajectories (compare's view of the
    episodes that changed). Raises OSError when the file cannot be read, ValueError when
    the line there is no longer the record (the file was changed since)."""
    with Path(path).open("rb") as handle:
        handle.seek(offset)
        raw = handle.readline()
    try:
        return EpisodeRecord.from_line(strict(parse_fast)(raw))
    except UNREADABLE as exc:
        raise ValueError(f"{path}: the line at byte {offset} is no longer a record ({exc}); the file "
                         f"changed since it was read") from None


def _same_line(path: Path, one: int, other: int) -> bool | None:
    """Whether the lines at byte offsets ``one`` and ``other`` of ``path`` are the same bytes
    (a line copied whole); read again only for a duplicate, which is rare. None when the
    file cannot be read again."""
    try:
        with path.open("rb") as handle:
            handle.seek(one)
            first = handle.readline()
            handle.seek(other)
            second = handle.readline()
    except OSError:
        return None
    return first.rstrip(b"\r\n") == second.rstrip(b"\r\n")
