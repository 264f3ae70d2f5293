"""The run's records: one run id, one run directory; its status; resume.

A :class:`RunLedger` owns ``run.json`` and ``episodes.jsonl`` of one run:

* one process writes a run directory at a time: a new run and a resume take the
  directory's lock (:mod:`pytest_agentgym.results.lock`) before they look at it,
  and a second process is refused with the holder's pid and host;
* a new run refuses a run directory that already holds a run (reusing a run id
  would silently mix two runs' episodes);
* ``--agentgym-resume`` reopens one: the scored episodes of earlier generations
  are *kept* (their items report the stored record), every other episode runs
  again as generation ``n + 1``; readers count the newest generation of each
  (env, task, repeat) (:func:`~pytest_agentgym.results.current.current_records`);
* the status in run.json follows the run: ``running`` while it runs, then one of
  the end states (:func:`final_status`), or ``crashed`` when a later reader finds a
  ``running`` run whose process is gone (:func:`settle_crashed`).

Knows nothing of pytest: errors are :class:`LedgerError` with a message that
says what to do, which the plugin turns into a usage error.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterable

from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.lock import RunDirBusy, RunLock, process_alive, this_process
from pytest_agentgym.results.reading import LATER_GENERATION
from pytest_agentgym.results.records import EpisodeRecord, RunInfo
from pytest_agentgym.results.store import LATEST, RunDir


class LedgerError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


class ResumeNotPlayable(LedgerError):
    """A resume that cannot go on now for want of infrastructure (no model endpoint answers),
    not because of its settings: the plugin exits 3 (not played), as a run with no endpoint does."""


# -- the process that writes a run -------------------------------------------------------


def settle_crashed(run_dir: RunDir) -> RunInfo | None:
    """Read run.json; a ``running`` run whose process is gone becomes ``crashed``
    (written back, with the time it was found). None when there is no run.json."""
    if not run_dir.run_file.is_file():
        return None
    info = run_dir.read_info()
    if info.status == "running" and process_alive(info.process) is False:
        from pytest_agentgym.results.events import utc_now

        info = dataclasses.replace(
            info, status="crashed",
            notes=info.notes + (f"found crashed at {utc_now()}: process {info.process.get('pid')} "
                                f"is gone and run.json still said running",))
        run_dir.write_info(info)
    return info


# -- what run.json says of the run's setting -----------------------------------------------------


def git_commit() -> str | None:
    """The commit of the working directory, when it is a git checkout."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


#: The resolved settings that run.json keeps.
SNAPSHOT_KEYS = ("node", "envs", "tasks", "repeat", "max_rounds", "episode_timeout", "concurrency",
                 "model", "base_url", "checkpoint", "baseline", "max_drop", "seed", "retries",
                 "nats", "servers_mode", "node_max_rounds", "node_episode_timeout", "sampling",
                 "max_error_rate", "baseline_metric", "strict_gates", "allow_mismatch",
                 "stop_when_decided")


def settings_snapshot(settings: Any) -> dict[str, Any]:
    values = {k: getattr(settings, k) for k in SNAPSHOT_KEYS}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()} | {
        "node_file": str(settings.node_file)}


# -- how a run ended ---------------------------------------------------------------------


def final_status(records: Iterable[EpisodeRecord], *, interrupted: bool = False) -> str:
    """``interrupted``; else ``no-episode-scored`` (nothing scored at all),
    ``finished-with-errors`` (some episode ended in an error) or ``finished``."""
    if interrupted:
        return "interrupted"
    current = current_records(records)
    scored = sum(1 for r in current if r.error is None)
    if scored == 0:
        return "no-episode-scored"
    return "finished-with-errors" if scored < len(current) else "finished"


#: How a door names its run id option (pytest's; the rollout service passes its own).
RUN_ID_FLAG = "--agentgym-run-id"


def _lock(run_dir: RunDir, run_id_flag: str = RUN_ID_FLAG) -> RunLock:
    try:
        return RunLock(run_dir.path).acquire()
    except RunDirBusy as exc:
        resume = f"then resume it with --agentgym-resume={run_dir.path}; or " if run_id_flag == RUN_ID_FLAG else ""
        raise LedgerError(f"{exc}, {resume}give this run another {run_id_flag}") from None


# -- finding a run -----------------------------------------------------------------------


def resolve_run_dir(value: str, reports: Path) -> Path:
    """A run directory from what a user wrote: a path, ``latest``, or a run id
    under ``reports``. Resolved at once, so that ``latest`` names the run it
    names now, not the one that a new run is about to point it at."""
    candidates = [Path(value).expanduser()]
    if value == LATEST:
        link = reports / LATEST
        named = reports / f"{LATEST}.txt"
        if link.is_symlink() or link.is_dir():
            candidates = [link.resolve()]
        elif named.is_file():
            candidates = [reports / named.read_text(encoding="utf-8").strip()]
    else:
        candidates.append(reports / value)
    for candidate in candidates:
        if (candidate / "run.json").is_file() or (candidate / "episodes.jsonl").is_file():
            return candidate.resolve()
    tried = " or ".join(str(c) for c in dict.fromkeys(candidates))
    raise LedgerError(
        f"{value!r} is not a run directory: no run.json or episodes.jsonl in {tried}; "
        f"give a run directory (e.g. {reports / LATEST}) or a run id under {reports}"
    )


def _later_lines(run_dir: RunDir, later: list[Any], generation: int) -> str:
    """Why a run whose episodes.jsonl holds records of a later generation is not resumed: the
    resume would write that generation, and those lines would count as its records."""
    lines = ", ".join(str(s.line) for s in later[:8]) + (f", ... ({len(later) - 8} more)" if len(later) > 8 else "")
    return (f"{run_dir.episodes_file} holds {len(later)} line(s) of a generation beyond the run's generation "
            f"{generation} (run.json), at line(s) {lines}: they are no record of this run (edited by hand, copied "
            f"from another run, or written by a bug), and a resume as generation {generation + 1} would count "
            f"them as its own; delete those lines (or start a new run), then resume again")


class RunLedger:
    """run.json and episodes.jsonl of one run, for the process that writes them."""

    def __init__(self, run_dir: RunDir, *, generation: int = 1,
                 previous: RunInfo | None = None, kept: dict | None = None) -> None:
        self.run_dir = run_dir
        self.generation = generation
        #: the run.json of the run being resumed (None for a new run)
        self.previous = previous
        #: (env, task, repeat) -> the scored record an earlier generation left
        self.kept: dict[tuple[str, int, int], EpisodeRecord] = kept or {}
        self.info: RunInfo | None = None
        #: the run directory's lock, held by the process that writes the run (not by xdist workers)
        self.lock: RunLock | None = None
        #: what the run being resumed had stopped early (--agentgym-stop-when-decided)
        self.previous_stopped: dict[str, dict[str, Any]] = {}

    @property
    def resuming(self) -> bool:
        return self.previous is not None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def new(cls, reports: Path, run_id: str, *, run_id_flag: str = RUN_ID_FLAG) -> "RunLedger":
        """A new run, holding its directory's lock; the directory must not hold a run already.
        ``run_id_flag``: the option that names the run id, for the refusals' advice."""
        run_dir = RunDir(reports / run_id)
        lock = _lock(run_dir, run_id_flag)
        if run_dir.run_file.is_file() or run_dir.episodes_file.is_file():
            lock.release()
            try:
                info = settle_crashed(run_dir)
                status = info.status if info else "no run.json"
            except (OSError, ValueError, TypeError, AttributeError) as exc:  # a run.json that cannot be read: still taken
                status = f"run.json unreadable: {type(exc).__name__}"
            held = len(current_records(run_dir.read_episodes()))
            raise LedgerError(
                f"run id {run_id!r} is taken: {run_dir.path} holds a run ({held} episode(s), "
                f"status {status}); "
                + (f"continue it with --agentgym-resume={run_dir.path}, or "
                   if run_id_flag == RUN_ID_FLAG and "unreadable" not in status else "")
                + f"pick another id with {run_id_flag} (or leave it out for a fresh one)"
            )
        ledger = cls(run_dir)
        ledger.lock = lock
        return ledger

    @classmethod
    def resume(cls, path: Path) -> "RunLedger":
        """Reopen the run in ``path`` for another generation, holding its lock."""
        run_dir = RunDir(path)
        if not run_dir.run_file.is_file() and not run_dir.episodes_file.is_file():
            raise LedgerError(f"{path} holds no run (no run.json or episodes.jsonl); give the directory "
                              f"of a run to resume")
        lock = _lock(run_dir)
        try:
            try:
                info = settle_crashed(run_dir)
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                raise LedgerError(f"{run_dir.run_file} cannot be read ({type(exc).__name__}: {exc}); the run "
                                  f"cannot be resumed (its settings are unknown): start a new run") from None
            if info is None:
                raise LedgerError(f"{path} has episodes but no run.json; it cannot be resumed "
                                  f"(its settings are unknown): start a new run")
            if info.status == "running" and process_alive(info.process):
                # the lock is free, yet its writer lives: a version of the plugin before the lock
                raise LedgerError(f"run {info.run_id} in {path} is still running (process "
                                  f"{info.process.get('pid')}); wait for it or stop it before resuming")
            records = run_dir.read_episodes()
            later = [s for s in run_dir.skipped if s.what == LATER_GENERATION]
            if later:
                raise LedgerError(_later_lines(run_dir, later, info.generation))
        except BaseException:
            lock.release()
            raise
        current = current_records(records)
        kept = {r.key: r for r in current if r.error is None}
        ledger = cls(run_dir, generation=info.generation + 1, previous=info, kept=kept)
        ledger.previous_stopped = dict(info.stopped_early)
        ledger.lock = lock
        return ledger

    def release(self) -> None:
        """Let go of the run directory's lock (the process is done writing)."""
        if self.lock is not None:
            self.lock.release()

    @classmethod
    def for_worker(cls, run_dir: RunDir, generation: int) -> "RunLedger":
        """An xdist worker's view: it appends records of ``generation`` and reports the
        scored records of earlier generations for the items it is given."""
        kept = {r.key: r for r in current_records(run_dir.read_episodes())
                if r.error is None and r.generation < generation} if generation > 1 else {}
        return cls(run_dir, generation=generation, kept=kept)

    # -- writing -------------------------------------------------------------------------

    def begin(self, info: RunInfo) -> RunInfo:
        """Write run.json as ``running`` (a resumed run keeps its first start time)."""
        from pytest_agentgym.results.events import utc_now

        info = dataclasses.replace(info, status="running", process=this_process(),
                                   generation=self.generation, ended_at=None)
        if self.previous is not None:
            info = dataclasses.replace(
                info, started_at=self.previous.started_at,
                resumed_at=self.previous.resumed_at + (utc_now(),),
                notes=self.previous.notes + tuple(n for n in info.notes if n not in self.previous.notes))
        taken = self.lock.taken_over if self.lock is not None else None
        if taken and taken not in info.notes:
            info = dataclasses.replace(info, notes=info.notes + (taken,))
        (self.run_dir.path / "logs").mkdir(parents=True, exist_ok=True)
        self.write(info)
        self._reserve_space()
        return info

    #: Kept free for the last writes of a run whose disk fills up (run.json with its status).
    RESERVE_BYTES = 256 * 1024

    @property
    def _reserve(self) -> Path:
        return self.run_dir.path / ".space-reserve"

    def _reserve_space(self) -> None:
        """Set aside room for run.json's final state, released when the disk is full."""
        try:
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, self.RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError:
            self.release_reserve()  # no room even for that: the run finds out at its first write

    def release_reserve(self) -> None:
        try:
            self._reserve.unlink()
        except FileNotFoundError:
            pass

    def write(self, info: RunInfo) -> None:
        self.info = info
        self.run_dir.write_info(info)

    def stamp(self, record: EpisodeRecord) -> EpisodeRecord:
        """The record as this generation writes it."""
        if record.generation == self.generation:
            return record
        return dataclasses.replace(record, generation=self.generation)

    def append(self, record: EpisodeRecord) -> EpisodeRecord:
        record = self.stamp(record)
        self.run_dir.append_episode(record)
        return record

    def open_log(self, worker: str | None = None) -> None:
        """The plugin's own log (failed attempts with their tracebacks, server starts) goes
        to logs/harness.log (a worker's to harness-<id>.log), not to pytest's captured
        logs, so the terminal keeps to a few lines per error."""
        import logging

        name = "harness.log" if worker is None else f"harness-{worker}.log"
        self.run_dir.logs.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.run_dir.logs / name, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("pytest_agentgym")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        self._log_handler = handler

    def close_log(self) -> None:
        import logging

        handler = getattr(self, "_log_handler", None)
        if handler is not None:
            logger = logging.getLogger("pytest_agentgym")
            logger.removeHandler(handler)
            logger.propagate = True
            handler.close()
            self._log_handler = None

    def records(self) -> list[EpisodeRecord]:
        """What the run counts now: the newest generation of each episode."""
        return current_records(self.run_dir.read_episodes())
