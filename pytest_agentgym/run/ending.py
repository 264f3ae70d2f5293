"""What a run writes as it ends: run.json's end state, the end events, the report, and
the record of an episode lost with a crashed xdist worker. No pytest."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from pytest_agentgym.results.aggregate import summaries_record
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo


def end_info(info: RunInfo, done: Any, *, stopper: Any, resources: Any) -> RunInfo:
    """run.json's end state: ``info`` as the run began, with what it concluded (``done``:
    run/judging.py's Conclusion), its stops, the versions, and the notes of the end (the
    work queue's, the endpoint's restarts, why the gates were not judged)."""
    return dataclasses.replace(info, ended_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                               status=done.status, counts=done.counts,
                               gates=tuple(v.to_dict() for v in done.verdicts),
                               stopped_early=stopper.to_dict() if stopper is not None else {},
                               summaries=summaries_record(done.summaries),
                               versions=resources.versions(),
                               notes=info.notes + (resources.fleet.notes() if resources.fleet else ())
                               + tuple(resources.endpoint_restarts)
                               + ((f"gates not judged: {done.partial}",) if done.partial else ()))


def publish_end(publisher: Any, settings: Any, info: Any, summaries: Mapping[str, Any], verdicts: Sequence[Any],
                status: str | None, counts: Mapping[str, int]) -> None:
    """One ``batch.completed`` per environment (not for a shard: its merge is the run),
    then the run's final ``field.status``. A status the event's schema does not name yet
    (``partial``: a run that ended without playing all it selected) goes out as
    ``interrupted``, the wire's word for a run that did not play everything; run.json and
    the event's ``counts`` (``planned``) say the rest."""
    from pytest_agentgym.results.events import RUN_STATUSES, batch_completed, field_status

    for env, summary in summaries.items() if settings.shard is None else ():
        publisher.publish(batch_completed(settings.run_id, summary, [v for v in verdicts if v.env == env],
                                          node=settings.node, model=info.model, checkpoint=settings.checkpoint))
    publisher.publish(field_status(info, status if status in RUN_STATUSES else "interrupted", dict(counts)))


def write_report(run_dir: Path, comparison: Any = None) -> tuple[Path | None, str | None]:
    """report.html of ``run_dir``: its path, or None and what went wrong (the results are
    safe either way); then the reports directory's index.html, whatever became of the report."""
    from pytest_agentgym.report.index import refresh_index
    from pytest_agentgym.report.render import render_run_dir

    try:
        return render_run_dir(run_dir, comparison=comparison), None
    except Exception as exc:  # noqa: BLE001 - say what went wrong, keep the run's exit status
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        refresh_index(run_dir)  # reports/index.html lists this run too; never raises


def crash_record(settings: Any, info: Any, nodeid: str, message: str) -> EpisodeRecord | None:
    """The error record (``harness:WorkerCrashed``) of the episode an xdist worker was
    running when it died; None when ``nodeid`` names no episode."""
    from pytest_agentgym.config.suites import parse_item_name

    parsed = parse_item_name(nodeid.rsplit("::", 1)[-1])
    if parsed is None:
        return None
    env, task, repeat = parsed
    error = ErrorInfo("WorkerCrashed", f"{message}; the episode was lost with its worker (see the "
                      f"worker's output above); resume the run to play it again", "harness")
    return EpisodeRecord.errored(
        settings.run_id, env, task, repeat, error,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), nodeid=nodeid,
        model=info.model if info else "none", node=settings.node, checkpoint=settings.checkpoint)


def partial_reason(status: str | None, abort_reason: str | None, played: int, planned: int) -> str | None:
    """Why a run's gates cannot be judged, or None when the run played what it planned.
    A run is partial when it was interrupted, crashed or stopped (a full disk), or when
    planned episodes have no record (``-x``, ``--maxfail``)."""
    of = f"{played} of {planned} episodes" if planned else f"{played} episodes"
    if abort_reason is not None:
        return f"run stopped after {of} ({abort_reason.splitlines()[0]})"
    if status in ("interrupted", "crashed"):
        return f"run {status} after {of}"
    if planned and played < planned:
        return f"run ended early after {of}"
    return None


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM while the block runs (the run's end is being written);
    yields the list of signals that arrived meanwhile, for the caller to act on after.
    Only the main thread can do this; elsewhere the block runs as it is."""
    arrived: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield arrived
        return
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda number, frame: arrived.append(number))
    try:
        yield arrived
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
