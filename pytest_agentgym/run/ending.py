"""What a run writes as it ends, beside run.json: the end events, the report, and the
record of an episode lost with a crashed xdist worker. No pytest."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo


def publish_end(publisher: Any, settings: Any, info: Any, summaries: Mapping[str, Any], verdicts: Sequence[Any],
                status: str | None, counts: Mapping[str, int]) -> None:
    """One ``batch.completed`` per environment (not for a shard: its merge is the run),
    then the run's final ``field.status``."""
    from pytest_agentgym.results.events import batch_completed, field_status

    for env, summary in summaries.items() if settings.shard is None else ():
        publisher.publish(batch_completed(settings.run_id, summary, [v for v in verdicts if v.env == env],
                                          node=settings.node, model=info.model, checkpoint=settings.checkpoint))
    publisher.publish(field_status(info, status, dict(counts)))


def write_report(run_dir: Path, comparison: Any = None) -> tuple[Path | None, str | None]:
    """report.html of ``run_dir``: its path, or None and what went wrong (the results are
    safe either way)."""
    from pytest_agentgym.report.render import render_run_dir

    try:
        return render_run_dir(run_dir, comparison=comparison), None
    except Exception as exc:  # noqa: BLE001 - say what went wrong, keep the run's exit status
        return None, f"{type(exc).__name__}: {exc}"


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
