"""What a run counts: the newest generation of each episode, duplicates left out.

:func:`current_records` is the one rule behind every reader that counts (summary, gates,
report, compare, merge, resume, batch events); :class:`Records` is its result, a list that
also says what reading left out (:class:`Duplicate` records, skipped lines).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterable

from pytest_agentgym.results.records import EpisodeRecord

#: (env, task index, repeat): what a run holds exactly once
Key = tuple[str, int, int]


@dataclass(frozen=True)
class Duplicate:
    """A second record of one (env, task, repeat) in one generation, left out by every reader.

    ``line`` and ``kept_line`` are line numbers of episodes.jsonl (None for records that
    did not come from a file); ``identical``: the two lines are the same bytes (None when
    that is not known)."""

    key: Key
    generation: int
    line: int | None = None
    kept_line: int | None = None
    path: str | None = None
    identical: bool | None = None

    def __str__(self) -> str:
        env, task, repeat = self.key
        what = f"{env} task {task} repeat {repeat} (generation {self.generation})"
        if self.line is None:
            return f"left out a second record of {what}: the first one counts"
        same = {True: "the same line", False: "a different record", None: "another record"}[self.identical]
        return (f"{self.path}:{self.line}: skipped a duplicate of {what}: line {self.kept_line} "
                f"holds it already ({same}); the first written counts")


class Records(list):  # type: ignore[type-arg]  (a list of EpisodeRecord)
    """Records as a reader counts them, with what reading left out: ``duplicates``
    (:class:`Duplicate`) and ``skipped`` (lines that are no record,
    :class:`~pytest_agentgym.results.jsonl.SkippedLine`). A plain list otherwise;
    :func:`current_records` passes both on, so the figures made from a run's records
    (run.json ``counts``) can say what was left out."""

    def __init__(self, items: Iterable[EpisodeRecord] = (), *, duplicates: Iterable[Duplicate] = (),
                 skipped: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.duplicates: tuple[Duplicate, ...] = tuple(duplicates)
        self.skipped: tuple[Any, ...] = tuple(skipped)


#: (env, task index, repeat) of a record: EpisodeRecord.key without the property's call.
record_key = operator.attrgetter("env", "task_index", "repeat")


def current_records(records: Iterable[EpisodeRecord]) -> Records:
    """What a run counts: for each (env, task, repeat), the first written record of its
    newest generation, in the order they were written.

    episodes.jsonl is append-only: a resumed run adds a new generation's record for
    every episode it reruns (the missing and the errored ones) and leaves the
    superseded error records in the file as history. A second record of the same
    episode and generation (a line written twice, a copied line) is a duplicate: the
    first written counts (the append-only file's first word on the episode), the
    others are listed in the result's ``duplicates``. Every reader that counts
    (summary, gates, report, compare, merge, resume, batch events) goes through here;
    :func:`pytest_agentgym.results.reading.read_episodes_file` finds the duplicates of a
    file with their line numbers first, and those are passed on too.
    """
    given = records if isinstance(records, list) else list(records)
    keys = list(map(record_key, given))  # (record.key, made once)
    if len(set(keys)) == len(keys):  # one record per key (the usual run): every record counts
        return Records(given, duplicates=getattr(given, "duplicates", ()), skipped=getattr(given, "skipped", ()))
    newest: dict[Key, int] = {}
    for key, record in zip(keys, given):
        generation = newest.get(key)
        if generation is None or record.generation > generation:
            newest[key] = record.generation
    seen: set[Key] = set()
    kept: list[EpisodeRecord] = []
    found: list[Duplicate] = []
    for key, record in zip(keys, given):
        if record.generation != newest[key]:
            continue
        if key in seen:
            found.append(Duplicate(key, record.generation))
            continue
        seen.add(key)
        kept.append(record)
    return Records(kept, duplicates=(*getattr(given, "duplicates", ()), *found),
                   skipped=getattr(given, "skipped", ()))
