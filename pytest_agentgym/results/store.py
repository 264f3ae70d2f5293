"""Run directories: where a run's results live and how they survive a crash.

    reports/<run_id>/run.json         RunInfo: settings, versions, start/end, status, gates
    reports/<run_id>/episodes.jsonl   one EpisodeRecord per line, appended as each finishes
    reports/<run_id>/prompts.jsonl    each opening (instruction messages) once, by hash
    reports/<run_id>/tokens.jsonl     token views, when the endpoint sent token ids
    reports/<run_id>/logs/            server and endpoint logs
    reports/latest -> <run_id>        the newest run

Each episode line is appended whole or not at all, under a lock shared with
the other processes of the run, the moment the episode ends (see
:mod:`pytest_agentgym.results.jsonl`): a run killed with SIGKILL keeps every finished
episode, and a full disk raises :class:`ResultsWriteError` with the file cut
back to whole lines. A torn or unreadable line is skipped when reading and
reported (``RunDir.skipped``, :meth:`RunDir.read_episodes_report`); so is a
second record of one episode and generation (``RunDir.duplicates``), see
:mod:`pytest_agentgym.results.reading`.

What is stored is redacted first (:mod:`pytest_agentgym.results.redact`): no URL in
run.json or episodes.jsonl carries a password or a key.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

from pytest_agentgym.results.conversation import PROMPTS_FILE, TOKENS_FILE, opening_line, tokens_line
from pytest_agentgym.results.current import Duplicate, Records
from pytest_agentgym.results.jsonl import (
    ResultsWriteError,
    SkippedLine,
    append_line,
    describe_write_error,
    strict_dumps,
)
from pytest_agentgym.results.reading import EpisodesFile, read_episodes_file
from pytest_agentgym.results.records import EpisodeRecord, RunInfo
from pytest_agentgym.results.redact import redact_data

__all__ = ["RunDir", "ResultsWriteError", "SkippedLine", "check_writable", "point_latest"]

RUN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
LATEST = "latest"


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: lines of episodes.jsonl that the last read skipped (torn or unreadable)
        self.skipped: list[SkippedLine] = []
        #: records of episodes.jsonl that the last read left out: a second record of one
        #: (env, task, repeat) in one generation (the first written counts)
        self.duplicates: list[Duplicate] = []
        #: openings this object wrote to prompts.jsonl (another process may write one again:
        #: its reader keeps one per hash)
        self._openings_written: set[str] = set()

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

    @property
    def resume_advice(self) -> str:
        return f"resume with --agentgym-resume={self.path}"

    def write_info(self, info: RunInfo) -> None:
        """Replace run.json atomically (write a temporary file, then rename); redacted,
        strict JSON. Raises :class:`ResultsWriteError` when the disk refuses."""
        text = strict_dumps(redact_data(info.to_dict()), indent=2) + "\n"
        tmp = self.run_file.with_suffix(".json.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.run_file)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ResultsWriteError(
                describe_write_error(self.run_file, exc, self.resume_advice, "run.json was left as it was"),
                exc.errno, str(self.run_file)) from exc

    def read_info(self) -> RunInfo:
        try:
            return RunInfo.from_dict(json.loads(self.run_file.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{self.run_file} does not exist; is {self.path} a pytest-agentgym run directory?"
            ) from None

    def append_episode(self, record: EpisodeRecord) -> None:
        """Append one record to episodes.jsonl: the whole line or nothing (see
        :func:`pytest_agentgym.results.jsonl.append_line`). Its opening messages go to
        prompts.jsonl the first time this run directory sees them, its token view to
        tokens.jsonl (:mod:`pytest_agentgym.results.conversation`), both before the record's
        line. Raises :class:`ResultsWriteError` (an OSError) naming the file, the error and
        what to do."""
        data = record.to_dict()
        opening, tokens = data.pop("opening", None), data.pop("tokens", None)
        sha = record.opening_sha256
        if opening is not None and sha is not None and sha not in self._openings_written:
            append_line(self.path / PROMPTS_FILE, redact_data(opening_line(sha, opening)),
                        then=self.resume_advice)
            self._openings_written.add(sha)
        if tokens is not None:
            append_line(self.path / TOKENS_FILE, tokens_line(record, tokens), then=self.resume_advice)
        append_line(self.episodes_file, redact_data(data), then=self.resume_advice)

    def read(self, convert: Callable[[Any], EpisodeRecord] = EpisodeRecord.from_line) -> EpisodesFile:
        """episodes.jsonl as every reader reads it
        (:func:`~pytest_agentgym.results.reading.read_episodes_file`): the records, their line
        numbers, the skipped lines and the duplicates left out. Each skipped line and each
        duplicate is warned about and kept in ``self.skipped`` and ``self.duplicates``.
        ``convert``: :func:`~pytest_agentgym.results.reading.record_without_turns` for a reader
        that needs no trajectory."""
        found = read_episodes_file(self.episodes_file, convert)
        self.skipped, self.duplicates = found.skipped, found.duplicates
        for problem in found.problems():
            warnings.warn(problem, stacklevel=3)
        return found

    def read_episodes(self) -> Records:
        """The records in file order (superseded generations included, duplicates left out);
        skipped lines and duplicates are warned about and kept in ``self.skipped`` and
        ``self.duplicates`` (and on the returned list, which
        :func:`~pytest_agentgym.results.current.current_records` passes on)."""
        return self.read().records

    def read_episodes_report(self) -> tuple[Records, list[SkippedLine]]:
        """The records, and the lines skipped because they were torn or unreadable
        (each with file, line number and reason; also kept in ``self.skipped``)."""
        found = self.read()
        return found.records, found.skipped


def check_writable(reports_dir: str | Path) -> str | None:
    """Why results cannot be written under ``reports_dir``, or None when they can.

    Call it before any episode runs. It writes and removes a small probe file
    in ``reports_dir`` (in its nearest existing parent when it does not exist
    yet, which is where it would be created), so a read-only filesystem, a
    missing permission or a full disk is found now rather than after the
    first episode.
    """
    target = Path(reports_dir)
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return (f"reports directory {target}: {existing} is not a directory; "
                f"pass --agentgym-reports=DIR with a directory you can write to")
    prefix = ".agentgym-write-check-"
    probe = existing / prefix  # named in the message when not even the file can be made
    try:
        fd, name = tempfile.mkstemp(prefix=prefix, dir=existing)
        probe = Path(name)
        try:
            os.write(fd, b"pytest-agentgym write check\n" * 64)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        then = "run again (or pass --agentgym-reports=DIR with a directory you can write to)"
        return f"reports directory {target} is not writable: " + describe_write_error(probe, exc, then)
    return None


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
