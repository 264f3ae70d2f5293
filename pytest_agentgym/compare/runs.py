"""A run directory read for a comparison: its run.json and the episodes it counts.

Anything that is not a readable run directory with results (a path that does
not exist, a file, an empty directory, no or a corrupt run.json, no episode)
is a :class:`CompareError` naming the path, the problem and what to give instead.

The records are kept without their turns
(:func:`~pytest_agentgym.results.reading.record_without_turns`): a comparison reads a
record's own fields only, and two 10,000-episode runs with their trajectories would hold
hundreds of megabytes. The compare view reads the few trajectories it shows by key
(:meth:`LoadedRun.whole`). A run read once can be compared many times (``trend``):
:func:`load_run` passes a :class:`LoadedRun` through.

A line that is no record but names its episode (a NaN or infinite reward written by another
tool: :func:`~pytest_agentgym.results.reading.named_episode`) counts as that episode recorded
with an error (:func:`~pytest_agentgym.results.reading.unreadable_episode`), so it is paired
as any errored key is, never as a key the run lacks; the verdict's detail names such lines
(:func:`unreadable_note`). It counts as a record of its generation would (the newest generation
of a key counts), unless that generation of the key has a record that can be read: that one
counts, as for every other reader.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from pytest_agentgym.compare.error import CompareError
from pytest_agentgym.results.current import Key, current_records, record_key
from pytest_agentgym.results.jsonl import SkippedLine
from pytest_agentgym.results.reading import read_record_at, record_without_turns, unreadable_episode
from pytest_agentgym.results.records import EpisodeRecord, RunInfo
from pytest_agentgym.results.store import RunDir

if TYPE_CHECKING:
    from pytest_agentgym.compare.pairing import Flip

_GIVE = "give a run directory that holds run.json and episodes.jsonl (e.g. reports/<run_id>)"


@dataclass(frozen=True)
class LoadedRun:
    #: the run directory as it was given
    given: str
    path: Path
    info: RunInfo
    #: the newest generation of each (env, task, repeat): what the run counts, without turns
    records: tuple[EpisodeRecord, ...]
    #: the byte offset in episodes.jsonl of each record's line, by (env, task, repeat)
    offsets: Mapping[Key, int] = field(default_factory=dict, repr=False, compare=False)
    #: the keys whose current record stands for a line that is no record but names its episode:
    #: that line, by (env, task, repeat)
    unreadable: Mapping[Key, SkippedLine] = field(default_factory=dict, repr=False, compare=False)

    @property
    def episodes_file(self) -> Path:
        return RunDir(self.path).episodes_file

    def whole(self, key: Key) -> EpisodeRecord:
        """The record of ``key`` with its turns, read again from episodes.jsonl. Raises
        CompareError when the file cannot be read or changed since. A key that stands for a
        line that is no record has its errored record, without turns."""
        if key in self.unreadable:
            return unreadable_episode(self.unreadable[key], self.info.run_id)
        try:
            return read_record_at(self.episodes_file, self.offsets[key])
        except KeyError:
            raise CompareError(f"{self.given} holds no episode {key}") from None
        except (OSError, ValueError) as exc:
            raise CompareError(f"{self.episodes_file} cannot be read again ({exc}); compare the runs "
                               f"again") from None

    @property
    def keys(self) -> set[tuple[str, int, int]]:
        return set(map(record_key, self.records))

    @property
    def version(self) -> str | None:
        return self.info.versions.get("pytest-agentgym")


def load_run(run: str | Path | RunDir | LoadedRun, role: str) -> LoadedRun:
    """Read the ``role`` run (``baseline`` or ``candidate``) for a comparison; a run read
    already is returned as it is."""
    if isinstance(run, LoadedRun):
        return run
    run_dir = run if isinstance(run, RunDir) else RunDir(run)
    given = str(run.path if isinstance(run, RunDir) else run)
    path = run_dir.path
    if not path.exists():
        raise CompareError(f"{role} {given} does not exist; {_GIVE}")
    if not path.is_dir():
        raise CompareError(f"{role} {given} is a file, not a run directory; {_GIVE}")
    if not run_dir.run_file.is_file():
        what = "is an empty directory" if not any(path.iterdir()) else "has no run.json"
        raise CompareError(f"{role} {given} {what}: it is not a pytest-agentgym run directory; {_GIVE}")
    info = _read_info(run_dir, role)
    if not run_dir.episodes_file.is_file():
        raise CompareError(f"{role} {given} has no episodes.jsonl: the run recorded no episode "
                           f"(status {info.status}); compare runs that played episodes")
    try:
        found = run_dir.read(record_without_turns)
    except OSError as exc:
        raise CompareError(f"{role} {run_dir.episodes_file} cannot be read ({exc.strerror or exc}); "
                           f"make it readable or {_GIVE}") from None
    records, skipped = found.records, found.skipped
    named = [line for line in skipped if line.key is not None]
    if not records and not named:
        detail = f" ({len(skipped)} unreadable line(s) skipped, e.g. {skipped[0]})" if skipped else ""
        raise CompareError(f"{role} {run_dir.episodes_file} holds no readable episode{detail}; "
                           f"compare runs that played episodes")
    stands_for: dict[int, SkippedLine] = {}  # id(errored record) -> the line it stands for
    if named:  # each such line an errored record in its place, then counted as every record is
        by_line = list(zip(found.lines, records))
        readable = {(record.key, record.generation) for record in records}
        for line in named:
            if (line.key, line.generation) in readable:
                continue  # the generation has a record every reader counts: it stands
            record = unreadable_episode(line, info.run_id)
            stands_for[id(record)] = line
            by_line.append((line.line, record))
        by_line.sort(key=operator.itemgetter(0))
        current = tuple(current_records([record for _, record in by_line]))
    else:
        current = tuple(current_records(records))
    if len(current) == len(records) and not named:  # every record counts (one per key): in the file's order
        offsets = dict(zip(map(record_key, records), found.offsets))
    else:
        offset_of = {id(record): offset for record, offset in zip(records, found.offsets)}
        offsets = {record.key: offset_of[id(record)] for record in current if id(record) in offset_of}
    unreadable = {record.key: stands_for[id(record)] for record in current if id(record) in stands_for}
    return LoadedRun(given=given, path=path, info=info, records=current, offsets=offsets, unreadable=unreadable)


#: How many line numbers :func:`unreadable_note` names per run before it counts the rest.
SHOWN_LINES = 10


def unreadable_note(env: str, flips: Iterable["Flip"], base: LoadedRun, cand: LoadedRun) -> str:
    """What a verdict's detail says of ``env``'s errored keys that are lines no reader could
    read but that name their episode (a NaN reward): how many, in which run, their line numbers
    and the first one's reason; empty when there are none."""
    if not base.unreadable and not cand.unreadable:
        return ""
    flips = list(flips)
    found = []
    for run, role, side in ((base, "baseline", "base"), (cand, "candidate", "cand")):
        lines = sorted((run.unreadable[(env, f.task_index, f.repeat)] for f in flips
                        if getattr(f, side) == "error" and (env, f.task_index, f.repeat) in run.unreadable),
                       key=operator.attrgetter("line"))
        if lines:
            numbers = ", ".join(str(line.line) for line in lines[:SHOWN_LINES])
            more = f" and {len(lines) - SHOWN_LINES} more" if len(lines) > SHOWN_LINES else ""
            found.append((len(lines), f"the {role}'s {run.episodes_file} line(s) {numbers}{more} "
                                      f"(line {lines[0].line}: {lines[0].reason})"))
    if not found:
        return ""
    return (f"{sum(n for n, _ in found)} of the errored episode(s) are lines that name their episode but are "
            f"no record, counted as errors: {'; '.join(text for _, text in found)}; correct or delete those "
            f"lines, or resume the run to play them again")


def _read_info(run_dir: RunDir, role: str) -> RunInfo:
    where = run_dir.run_file
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CompareError(f"{role} {where} cannot be read ({exc.strerror or exc}); "
                           f"make it readable or {_GIVE}") from None
    except UnicodeDecodeError:
        raise CompareError(f"{role} {where} is not UTF-8 text: the file is corrupt; {_GIVE}") from None
    except json.JSONDecodeError as exc:
        raise CompareError(f"{role} {where} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                           f"column {exc.colno}): the file is corrupt; {_GIVE}") from None
    if not isinstance(data, dict):
        raise CompareError(f"{role} {where} holds a JSON {type(data).__name__}, not a run's settings "
                           f"object: the file is corrupt; {_GIVE}")
    try:
        return RunInfo.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise CompareError(f"{role} {where} is not a pytest-agentgym run.json ({exc}); {_GIVE}") from None
