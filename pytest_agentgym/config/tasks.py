"""Task ranges: ``"0-9,12"`` read into task indices and indices written back as ranges,
in one place (suites, ``--agentgym-tasks``, shards, comparisons and merge use both)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable

_TASK_PART = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_tasks(text: str | int | list) -> tuple[int, ...]:
    """``0-9,12`` -> (0, 1, ..., 9, 12); ranges are inclusive; order kept, duplicates dropped."""
    if isinstance(text, bool):
        raise ValueError(f"expected task indices, got {text!r}")
    if isinstance(text, int):
        return (text,)
    parts = text if isinstance(text, list) else str(text).split(",")
    out: list[int] = []
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out.append(part)
            continue
        match = _TASK_PART.match(str(part))
        if not match:
            raise ValueError(
                f"task spec {part!r} is not an index or an inclusive range like 0-9 "
                "(write e.g. '0-9,12')"
            )
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise ValueError(f"task range {part!r} runs backwards; write {high}-{low}")
        out.extend(range(low, high + 1))
    return tuple(dict.fromkeys(out))


def task_ranges(tasks: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2, 5, 7-8``."""
    ordered = sorted(set(tasks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def describe_keys(keys: Iterable[tuple[int, int]]) -> str:
    """(task, repeat) keys as tasks: ``0-2`` for first repeats, ``0-2 (repeat 2)`` for others."""
    by_repeat: dict[int, list[int]] = defaultdict(list)
    for task, repeat in keys:
        by_repeat[repeat].append(task)
    return "; ".join(task_ranges(tasks) if repeat == 1 else f"{task_ranges(tasks)} (repeat {repeat})"
                     for repeat, tasks in sorted(by_repeat.items()))
