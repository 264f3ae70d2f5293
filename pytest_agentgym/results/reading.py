"""Reading a run's episodes.jsonl: the one function behind every reader.

The run directory (:class:`~pytest_agentgym.results.store.RunDir`), the report, compare
and trend, merge, resume and the rollout service all read a run's records through
:func:`read_episodes_file`, so they agree on what a run holds:

* a line that is no record (not UTF-8, not JSON, another JSON type, a field of the
  wrong type, a non-finite number: :func:`~pytest_agentgym.results.records.check_record_data`)
  is skipped and reported with its line number and the reason
  (:class:`~pytest_agentgym.results.jsonl.SkippedLine`);
* a second record of the same (env, task, repeat) in the same generation is a
  :class:`~pytest_agentgym.results.records.Duplicate`: the first written counts (the
  file is append-only, so the first line is the first thing the run said of the
  episode; a later copy adds nothing), the others are left out and reported with both
  line numbers and whether the lines are the same bytes;
* of the rest, each (env, task, repeat) counts once, in its newest generation
  (:func:`~pytest_agentgym.results.records.current_records`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pytest_agentgym.results.jsonl import SkippedLine, parse_line, read_numbered
from pytest_agentgym.results.records import (
    Duplicate,
    EpisodeRecord,
    Key,
    Records,
    check_record_data,
    current_records,
)

__all__ = ["EpisodesFile", "read_episodes_file"]


@dataclass
class EpisodesFile:
    """What :func:`read_episodes_file` found in one episodes.jsonl."""

    path: Path
    #: every record that counts or counted (superseded generations included), duplicates left
    #: out, in file order; a :class:`~pytest_agentgym.results.records.Records` that carries
    #: ``duplicates`` and ``skipped``
    records: Records
    #: the line number of each of ``records``
    lines: list[int] = field(default_factory=list)
    #: the parsed JSON of each of ``records`` (only when asked for: ``keep_data``)
    data: list[Any] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)

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
    Only a line whose bytes hold those words pays for the second look."""
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


def read_episodes_file(path: str | Path, convert: Callable[[Any], EpisodeRecord] = EpisodeRecord.from_line, *,
                       parse: Callable[[bytes], Any] = parse_line, keep_data: bool = False) -> EpisodesFile:
    """Read the episode records of ``path`` (see the module docstring). ``convert`` makes a
    record of a line's JSON, with every check of ``check_record_data`` (the default,
    ``EpisodeRecord.from_line``; the report's keeps the record without its turns); ``parse``
    reads a line's bytes; ``keep_data`` keeps each record's JSON as read (merge writes it
    back). A missing file holds no record."""
    path = Path(path)

    def both(data: Any) -> tuple[EpisodeRecord, Any]:
        return convert(data), data if keep_data else None

    parse = strict(parse)

    numbered, skipped = read_numbered(path, both, parse=parse)
    first: dict[tuple[Key, int], tuple[int, int]] = {}  # (key, generation) -> (line, offset)
    records: list[EpisodeRecord] = []
    lines: list[int] = []
    data: list[Any] = []
    duplicates: list[Duplicate] = []
    for number, offset, (record, raw) in numbered:
        seen = first.setdefault((record.key, record.generation), (number, offset))
        if seen[0] != number:
            duplicates.append(Duplicate(record.key, record.generation, number, seen[0], str(path),
                                        _same_line(path, seen[1], offset)))
            continue
        records.append(record)
        lines.append(number)
        if keep_data:
            data.append(raw)
    kept = Records(records, duplicates=duplicates, skipped=skipped)
    return EpisodesFile(path, kept, lines, data, skipped, duplicates)


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
