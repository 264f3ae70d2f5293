"""The pieces of a trend: one run read for it (:class:`TrendRun`) and one run of one
environment's trend with its two verdicts (:class:`TrendEntry`). Built by
:func:`~pytest_agentgym.report.trend.build_trend`; shown by the table
(:mod:`~pytest_agentgym.report.trend_table`) and the page
(:mod:`~pytest_agentgym.report.trend_page`). Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_agentgym.compare import EnvComparison
from pytest_agentgym.results.aggregate import EnvSummary
from pytest_agentgym.results.records import RunInfo

__all__ = ["TrendEntry", "TrendRun"]


@dataclass(frozen=True)
class TrendRun:
    given: str
    path: Path
    info: RunInfo
    summaries: dict[str, EnvSummary]
    step: int | None

    @property
    def run_id(self) -> str:
        return self.info.run_id

    def value(self, env: str, metric: str) -> float | None:
        summary = self.summaries.get(env)
        if summary is None:
            return None
        return summary.success_rate if metric == "success" else summary.mean_reward


@dataclass(frozen=True)
class TrendEntry:
    """One run of one environment's trend."""

    run: TrendRun
    summary: EnvSummary | None
    vs_previous: EnvComparison | None = None
    previous: TrendRun | None = None
    vs_best: EnvComparison | None = None
    best: TrendRun | None = None

    @property
    def verdicts(self) -> list[str]:
        return [c.verdict for c in (self.vs_previous, self.vs_best) if c is not None]
