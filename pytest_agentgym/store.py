"""Run directories: where a run's results live and how they survive a crash.

    reports/<run_id>/run.json         RunInfo: settings, versions, start/end, status, gates
    reports/<run_id>/episodes.jsonl   one EpisodeRecord per line, appended as each finishes
    reports/<run_id>/logs/            server and endpoint logs
    reports/latest -> <run_id>        the newest run

Each episode line is written with a single ``write`` and flushed at once, so a
run killed with SIGKILL keeps every finished episode, each line whole. A line
torn by a power cut is skipped when reading, with a warning.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from pytest_agentgym.results import EpisodeRecord, RunInfo

RUN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
LATEST = "latest"


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, root: str | Path, run_id: str) -> "RunDir":
        run_dir = cls(Path(root) / run_id)
        (run_dir.path / "logs").mkdir(parents=True, exist_ok=True)
        return run_dir

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def episodes_file(self) -> Path:
        return self.path / EPISODES_FILE

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def write_info(self, info: RunInfo) -> None:
        """Replace run.json atomically (write a temporary file, then rename)."""
        tmp = self.run_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(info.to_dict(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.run_file)

    def read_info(self) -> RunInfo:
        try:
            return RunInfo.from_dict(json.loads(self.run_file.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{self.run_file} does not exist; is {self.path} a pytest-agentgym run directory?"
            ) from None

    def append_episode(self, record: EpisodeRecord) -> None:
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        # O_APPEND + one write: whole lines even with several writers.
        fd = os.open(self.episodes_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def read_episodes(self) -> list[EpisodeRecord]:
        if not self.episodes_file.exists():
            return []
        records = []
        with self.episodes_file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    records.append(EpisodeRecord.from_dict(json.loads(line)))
                except (json.JSONDecodeError, TypeError, KeyError) as exc:
                    warnings.warn(f"{self.episodes_file}:{number}: skipped an unreadable line ({exc})")
        return records


def point_latest(root: str | Path, run_id: str) -> None:
    """Make ``root/latest`` a symlink to ``run_id`` (replaced atomically)."""
    root = Path(root)
    tmp = root / f".{LATEST}.{os.getpid()}"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(run_id, target_is_directory=True)
        os.replace(tmp, root / LATEST)
    except OSError:
        # Filesystems without symlinks: a plain file naming the run.
        (root / f"{LATEST}.txt").write_text(run_id + "\n", encoding="utf-8")
