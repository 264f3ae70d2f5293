"""The trend page of ``pytest-agentgym trend --html FILE`` (:func:`write_trend_html`):
self-contained, no script.

Per environment: the success rate and the mean reward across the runs, each a
line with its 95% interval as a band (:mod:`~pytest_agentgym.report.trend_chart`),
and the terminal's table (:mod:`~pytest_agentgym.report.trend_table`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from pytest_agentgym.report.page import assets, environment, write_page
from pytest_agentgym.report.trend import Trend
from pytest_agentgym.report.trend_chart import TrendPoint, trend_chart, trend_legend
from pytest_agentgym.report.trend_data import TrendEntry, TrendRun
from pytest_agentgym.report.trend_table import COLUMNS, table_rows, verdict_cell


def _label(trend: Trend, run: TrendRun) -> str:
    return str(run.step) if trend.order == "checkpoint step" else run.run_id


def _point(trend: Trend, run: TrendRun, entry: TrendEntry | None, metric: str) -> TrendPoint:
    label = _label(trend, run)
    summary = entry.summary if entry else None
    if summary is None:
        return TrendPoint(label, None, None, f"{run.run_id}: not in this run")
    value, interval = ((summary.success_rate, summary.success_ci95) if metric == "success"
                       else (summary.mean_reward, summary.reward_ci95))
    shown = "—" if value is None else (f"{value:.1%}" if metric == "success" else f"{value:.3f}")
    if interval and value is not None:
        shown += (f" [{interval[0]:.1%}, {interval[1]:.1%}]" if metric == "success"
                  else f" [{interval[0]:.3f}, {interval[1]:.3f}]")
    tip = (f"{run.run_id} ({run.info.checkpoint or 'no checkpoint'}): "
           f"{'success rate' if metric == 'success' else 'mean reward'} {shown}; "
           f"vs previous: {verdict_cell(entry.vs_previous)}; vs best so far: {verdict_cell(entry.vs_best, entry.best)}")
    return TrendPoint(label, value, interval, tip, regressed="regressed" in entry.verdicts)


def _env_part(trend: Trend, env: str, entries: list[TrendEntry]) -> dict[str, Any]:
    by_run = {id(e.run): e for e in entries}
    charts = {}
    for metric, axis in (("success", "success rate"), ("reward", "mean reward")):
        points = [_point(trend, run, by_run.get(id(run)), metric) for run in trend.runs]
        charts[metric] = trend_chart(f"{env}: {axis} across {len(points)} run(s)", axis, points,
                                     percent=metric == "success")
    return {"env": env, "success": charts["success"], "reward": charts["reward"], "rows": table_rows(entries),
            "failures": trend.last_failures(env)}


def trend_page_parts(trend: Trend) -> Iterator[str]:
    template = environment().get_template("trend.html.j2")
    return template.generate(
        trend=trend, envs=[_env_part(trend, env, entries) for env, entries in trend.envs.items()],
        columns=COLUMNS, legend=trend_legend(), style=assets("report.css", "compare.css"),
        failures=trend.last_failures(), verdict_line=trend.verdict_line(),
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


def write_trend_html(trend: Trend, path: str | Path) -> Path:
    """The trend as one self-contained page: per environment, line charts of the success
    rate and the mean reward with their interval bands, and the table."""
    return write_page(trend_page_parts(trend), Path(path))
