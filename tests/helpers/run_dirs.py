"""Reading what a run wrote in its directory (``reports/<run_id>/``)."""

from __future__ import annotations

import json
from pathlib import Path


def read_episodes(run_dir: Path) -> list[dict]:
    """The records of ``run_dir``/episodes.jsonl in the order written; none when the run
    has not written the file (yet)."""
    path = run_dir / "episodes.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def written_lines(path: Path) -> int:
    """How many lines ``path`` holds so far (none before it exists)."""
    return path.read_text().count("\n") if path.exists() else 0
