"""The trend's table, one row per run of an environment: the same cells in the
terminal (:func:`trend_table`) and on the trend page (:func:`table_rows`). Each row
names the run's model and checkpoint, so a trend of runs of different models says
which is which."""

from __future__ import annotations

from typing import Sequence

from pytest_agentgym.compare import EnvComparison
from pytest_agentgym.report.trend_data import TrendEntry, TrendRun
from pytest_agentgym.results.aggregate import EnvSummary

COLUMNS = ("run", "model", "checkpoint", "success (95% CI)", "mean reward (95% CI)", "vs previous",
           "vs best so far")
#: The columns that hold a verdict (the page colours them): the last two.
VERDICT_COLUMNS = 2


def success_cell(summary: EnvSummary | None) -> str:
    if summary is None or summary.success_rate is None:
        return "—"
    interval = f" [{summary.success_ci95[0]:.1%}, {summary.success_ci95[1]:.1%}]" if summary.success_ci95 else ""
    return f"{summary.success_rate:.1%}{interval}"


def reward_cell(summary: EnvSummary | None) -> str:
    if summary is None or summary.mean_reward is None:
        return "—"
    interval = f" [{summary.reward_ci95[0]:.3f}, {summary.reward_ci95[1]:.3f}]" if summary.reward_ci95 else ""
    return f"{summary.mean_reward:.3f}{interval}"


def verdict_cell(judged: EnvComparison | None, against: TrendRun | None = None) -> str:
    """``regressed Δ-0.09`` (``vs <run id>`` added when ``against`` is given); ``—`` for none."""
    if judged is None:
        return "—"
    text = judged.verdict + (f" Δ{judged.delta:+.2f}" if judged.delta is not None else "")
    return text + (f" vs {against.run_id}" if against is not None else "")


def table_rows(entries: Sequence[TrendEntry]) -> list[tuple[str, ...]]:
    """The cells of :data:`COLUMNS` for each entry, in trend order."""
    return [(e.run.run_id, e.run.info.model or "—", e.run.info.checkpoint or "—", success_cell(e.summary),
             reward_cell(e.summary), verdict_cell(e.vs_previous), verdict_cell(e.vs_best, e.best))
            for e in entries]


def trend_table(entries: Sequence[TrendEntry]) -> list[str]:
    """The table as aligned text lines (a header, then one line per run)."""
    rows = [COLUMNS, *table_rows(entries)]
    widths = [max(len(row[n]) for row in rows) for n in range(len(COLUMNS))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
