"""The terminal summary of a finished run: a table per environment, the gate
verdicts, warnings that change how the exit status should be read, and where
the results are. Plain lines with their markup; the plugin writes them."""

from __future__ import annotations

from typing import Any

Line = tuple[str, dict[str, bool]]

NO_ASSERTION = ("agentgym: no quality assertion: exit 0 means the run completed, not that the model "
                "is good (give the suites gates or a min_reward; see docs/suites.md)")


def _table(summaries: dict[str, Any]) -> list[Line]:
    lines: list[Line] = [(f"{'environment':<12} {'episodes':>8} {'mean reward (95% CI)':>26} {'success':>8} "
                          f"{'rounds':>6} {'errors':>6} {'tokens':>9} {'wall s':>8}", {"bold": True})]
    for env, s in summaries.items():
        reward = "-" if s.mean_reward is None else (
            f"{s.mean_reward:.3f} [{s.reward_ci95[0]:.3f}, {s.reward_ci95[1]:.3f}]")
        success = "-" if s.success_rate is None else f"{s.success_rate:.0%}"
        rounds = "-" if s.mean_rounds is None else f"{s.mean_rounds:.1f}"
        lines.append((f"{env:<12} {s.episodes:>8} {reward:>26} {success:>8} {rounds:>6} "
                      f"{s.errors:>6} {s.prompt_tokens + s.completion_tokens:>9} {s.wall_s:>8.1f}", {}))
    return lines


def summary_lines(run: Any) -> list[Line]:
    """``run`` is a finished :class:`~pytest_agentgym.run.EvaluationRun`."""
    lines: list[Line] = [("", {})]
    lines.extend(_table(run.summaries))
    for v in run.verdicts:
        lines.append((f"{v.word}: {v.env} {v.gate}: {v.detail}",
                      {"green": v.outcome == "passed", "red": v.outcome != "passed"}))
    if not run.asserts_quality and run.summaries:
        lines.append((NO_ASSERTION, {"yellow": True}))
    if run.abort_reason:
        lines.append((f"agentgym: RUN STOPPED: {run.abort_reason}", {"red": True}))
    for skipped in run.run_dir.skipped:
        lines.append((f"agentgym: {skipped}", {"yellow": True}))
    lines.append((f"agentgym results: {run.run_dir.episodes_file}", {}))
    stats = getattr(run, "publish_stats", None)
    if stats is not None and (getattr(stats, "outboxed", 0) or getattr(stats, "lost", 0)):
        lines.append((f"agentgym events: {stats.outboxed} kept in {run.run_dir.path / 'outbox.jsonl'}"
                      f" (deliver with `pytest-agentgym publish-outbox {run.run_dir.path}`)", {"yellow": True}))
    if getattr(run, "report_path", None):
        lines.append((f"agentgym report: {run.report_path}", {}))
    if getattr(run, "report_error", None):
        lines.append((f"agentgym report could not be written: {run.report_error}; "
                      f"render it later with `pytest-agentgym report {run.run_dir.path}`", {"yellow": True}))
    return lines


def status_line(run: Any) -> Line | None:
    """The very last line: how the run ended, in run.json's words."""
    if run.status is None:
        return None
    counts = run.info.counts if run.info else {}
    detail = ", ".join(f"{counts[k]} {k}" for k in ("episodes", "errors", "kept") if counts.get(k))
    markup = {"green": run.status == "finished", "yellow": run.status != "finished"}
    return (f"agentgym: run {run.settings.run_id} {run.status}" + (f" ({detail})" if detail else ""), markup)
