"""Reading what a run wrote in its directory (``reports/<run_id>/``)."""

from __future__ import annotations

import json
from pathlib import Path


def read_episodes(run_dir: Path) -> list[dict]:
    """The records of ``run_dir``/episodes.jsonl in the order written; none when the run
    has not written the file (yet). A last line still being written (no newline yet: a
    test polling a live run) is not a record yet and is left out."""
    path = run_dir / "episodes.jsonl"
    if not path.is_file():
        return []
    whole = path.read_text().rpartition("\n")[0]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


def written_lines(path: Path) -> int:
    """How many lines ``path`` holds so far (none before it exists)."""
    return path.read_text().count("\n") if path.exists() else 0
