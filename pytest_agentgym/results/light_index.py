"""The light index of an episodes.jsonl: what a reader without trajectories needs, kept beside it.

compare, trend, merge and the report's run list read a run's records without their turns
(:func:`~pytest_agentgym.results.reading.record_without_turns`), yet every line must still
be parsed and checked whole to know whether it is a record: a 10,000-episode run is
130 MB of JSON, most of it turns. The report reads every line whole anyway when it is
rendered (at the end of every run, shard, merge and rollout session), so that reading
leaves behind ``episodes.light.json``: each kept record's own fields (its line's JSON
without ``turns``), its line number and byte offset, the skipped lines (with the episode
each names, if any) and the duplicates,
exactly what :func:`~pytest_agentgym.results.reading.read_episodes_file` found. A later
reader without trajectories takes that instead of the 130 MB.

It is a cache, never the record: it is used only while it describes the file as it is now
(:func:`stamp`: size, modification time in nanoseconds, inode, and a CRC-32 of the file's
first and last 64 KiB, taken before the reading; a file that changed while it was read
gets no index), and only by the reader rules it was made with (:func:`rules`: a digest of
the modules that decide what a record is). Anything else (no index, another file, an
index that cannot be read, a directory that cannot be written) means the file is read
as before; deleting the index loses nothing. docs/results.md, "The light index".
A reader that must leave the run directories as they are (``pytest-agentgym view``) keeps
the indexes of a directory's files in a cache of its own (:func:`keep_elsewhere`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from pytest_agentgym.results.current import Duplicate
from pytest_agentgym.results.jsonl import SkippedLine
from pytest_agentgym.results.records import EpisodeRecord, record_from_values

#: The index's own layout; a reader of another one reads the file instead. 3: each record
#: is a row of its field values in :data:`~pytest_agentgym.results.records.EpisodeRecord`'s
#: field order (``fields`` names them), a missing field as its default (2: a dict per record;
#: the keys were most of the file and of its parsing, and a row builds its record slot by
#: slot, :func:`~pytest_agentgym.results.records.record_from_values`).
FORMAT = 3
#: How much of each end of the file the stamp hashes.
EDGE = 64 * 1024


#: directories whose files' indexes are kept elsewhere -> where (:func:`keep_elsewhere`)
_ELSEWHERE: dict[Path, Path] = {}


def keep_elsewhere(root: Path, cache: Path) -> None:
    """Keep the indexes of the files under ``root`` in ``cache`` instead of beside them:
    ``pytest-agentgym view`` writes nothing into the reports directory it serves. Undone
    by :func:`keep_beside`."""
    _ELSEWHERE[Path(root).resolve()] = Path(cache)


def keep_beside(root: Path) -> None:
    """Undo :func:`keep_elsewhere` for ``root``."""
    _ELSEWHERE.pop(Path(root).resolve(), None)


def default_cache() -> Path:
    """Where indexes kept elsewhere go by default: ``$XDG_CACHE_HOME/pytest-agentgym/light-index``
    (``~/.cache/...`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agentgym" / "light-index"


def index_path(path: Path) -> Path:
    """Where the light index of ``path`` (an episodes.jsonl) lives: episodes.light.json beside
    it, or, for a file under a root of :func:`keep_elsewhere`, a file in that root's cache
    named after the file's resolved path."""
    if _ELSEWHERE:
        resolved = Path(path).resolve()
        for root, cache in list(_ELSEWHERE.items()):
            if resolved.is_relative_to(root):
                return cache / (hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:32]
                                + ".light.json")
    return path.with_name(path.name.rsplit(".", 1)[0] + ".light.json")


#: The modules that decide what a line of episodes.jsonl is (the record checks, the parser,
#: the reader, this one), beside this file.
RULE_MODULES = ("records.py", "jsonl.py", "reading.py", "light_index.py")


class Indexed(NamedTuple):
    """What the index says :func:`~pytest_agentgym.results.reading.read_episodes_file` found."""

    records: list[EpisodeRecord]
    lines: list[int]
    offsets: list[int]
    skipped: list[SkippedLine]
    duplicates: list[Duplicate]


@functools.lru_cache(maxsize=1)
def rules() -> str:
    """A digest of the code that decides what a line is (:data:`RULE_MODULES`): an index made
    by other rules may keep or skip other lines, so it is not used."""
    digest = hashlib.sha256()
    for name in RULE_MODULES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    return digest.hexdigest()[:16]


def stamp(path: Path) -> list[Any] | None:
    """What says that ``path`` is still the file an index was made from: [size, mtime_ns,
    inode, CRC-32 of the first and of the last 64 KiB]; None when it cannot be read."""
    try:
        with path.open("rb") as handle:
            status = os.fstat(handle.fileno())
            head = handle.read(EDGE)
            handle.seek(max(status.st_size - EDGE, 0))
            tail = handle.read(EDGE)
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns, status.st_ino, zlib.crc32(head), zlib.crc32(tail)]


def save(path: Path, made_from: list[Any] | None, found: Any, light: list[dict[str, Any]]) -> None:
    """Write the index of ``path`` from what a whole reading found (``found``: the reader's
    EpisodesFile, whose ``lines``, ``offsets``, ``skipped`` and ``duplicates`` are kept;
    ``light``: each kept record's fields, :func:`light_fields`, in its records' order). Nothing is written
    when the file changed since ``made_from`` (its :func:`stamp` before the reading) or when
    the index cannot be written (a read-only run directory, a full disk): it is a cache."""
    if made_from is None or stamp(path) != made_from:
        return
    names, defaults = _record_fields(), _defaults()
    rows = [[fields.get(name, default) for name, default in zip(names, defaults)] for fields in light]
    index = {"format": FORMAT, "rules": rules(), "stamp": made_from, "fields": names, "records": rows,
             "lines": found.lines,
             "offsets": found.offsets,
             "skipped": [[s.line, s.reason, s.torn, s.key, s.generation, s.model] for s in found.skipped],
             "duplicates": [[list(d.key), d.generation, d.line, d.kept_line, d.identical] for d in found.duplicates]}
    target = index_path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # a cache directory (keep_elsewhere) made on first use
        tmp.write_bytes(orjson.dumps(index))
        os.replace(tmp, target)
    except (OSError, TypeError):  # TypeError: a number orjson cannot write (beyond 64 bits)
        tmp.unlink(missing_ok=True)


def light_fields(data: dict[str, Any]) -> dict[str, Any]:
    """What the index keeps of a record's line JSON: its record fields but the turns, and
    ``retried`` only when it holds something (an empty one is the record's default)."""
    names = frozenset(_record_fields())
    return {key: value for key, value in data.items()
            if key in names and key != "turns" and (key != "retried" or value)}


@functools.lru_cache(maxsize=1)
def _record_fields() -> list[str]:
    return [field.name for field in dataclasses.fields(EpisodeRecord)]


@functools.lru_cache(maxsize=1)
def _defaults() -> list[Any]:
    """Each field's default as the index writes it (a tuple as a list; None for the fields
    every record has)."""
    return [None if field.default is dataclasses.MISSING else
            list(field.default) if isinstance(field.default, tuple) else field.default
            for field in dataclasses.fields(EpisodeRecord)]


def _records(rows: list[list[Any]]) -> list[EpisodeRecord]:
    """The records without turns of the index's rows, as ``EpisodeRecord._build`` makes them;
    set slot by slot when no field needs converting (no error, nothing retried, no opening
    or tokens: the usual record), a third of the time."""
    names = _record_fields()
    turns, retried, error, opening, tokens = (names.index(name) for name in
                                              ("turns", "retried", "error", "opening", "tokens"))
    records = []
    for row in rows:
        if row[retried] or row[error] is not None or row[opening] is not None or row[tokens] is not None:
            records.append(EpisodeRecord._build({**dict(zip(names, row)), "turns": ()}))
            continue
        row[turns] = row[retried] = ()
        records.append(record_from_values(row))
    return records


def load(path: Path) -> Indexed | None:
    """What :func:`~pytest_agentgym.results.reading.read_episodes_file` with
    ``record_without_turns`` finds in ``path``, from its index; None when there is no index
    that describes the file as it is now."""
    try:
        data = orjson.loads(index_path(path).read_bytes())
    except (OSError, ValueError):
        return None
    try:
        if (data["format"] != FORMAT or data["rules"] != rules() or data["stamp"] != stamp(path)
                or data["fields"] != _record_fields()):
            return None
        name = str(path)
        found = Indexed(_records(data["records"]), data["lines"],
                        data["offsets"],
                        [SkippedLine(name, line, reason, torn, key=tuple(key) if key else None,
                                     generation=generation, model=model)
                         for line, reason, torn, key, generation, model in data["skipped"]],
                        [Duplicate(tuple(key), generation, line, kept, name, identical)
                         for key, generation, line, kept, identical in data["duplicates"]])
    except (KeyError, TypeError, ValueError):  # an index this reader did not write
        return None
    return found if len(found.records) == len(found.lines) == len(found.offsets) else None
