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
from pytest_agentgym.report.trend_table import COLUMNS, VERDICT_COLUMNS, table_rows, verdict_cell

#: The longest x label of a chart; a longer run id keeps its start and end around an ellipsis
#: (the point's and the label's tooltips give it whole).
LABEL_CHARS = 20


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut in the middle to ``limit`` characters: ``20261121-120000-eval-a1b2`` -> ``20261121-1…eval-a1b2``."""
    if len(text) <= limit:
        return text
    head = limit // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


def _label(trend: Trend, run: TrendRun) -> str:
    """A run's x label: its checkpoint step when the runs are ordered by step, else its run id,
    shortened (:func:`short_label`)."""
    return str(run.step) if trend.order == "checkpoint step" else short_label(run.run_id)


def _title(run: TrendRun) -> str:
    """What an x label's tooltip says: the run id whole, its checkpoint and model."""
    return f"{run.run_id} ({run.info.checkpoint or 'no checkpoint'}; model {run.info.model or '—'})"


def _point(trend: Trend, run: TrendRun, entry: TrendEntry | None, metric: str) -> TrendPoint:
    label, title = _label(trend, run), _title(run)
    summary = entry.summary if entry else None
    if summary is None:
        return TrendPoint(label, None, None, f"{run.run_id}: not in this run", title=title)
    value, interval = ((summary.success_rate, summary.success_ci95) if metric == "success"
                       else (summary.mean_reward, summary.reward_ci95))
    shown = "—" if value is None else (f"{value:.1%}" if metric == "success" else f"{value:.3f}")
    if interval and value is not None:
        shown += (f" [{interval[0]:.1%}, {interval[1]:.1%}]" if metric == "success"
                  else f" [{interval[0]:.3f}, {interval[1]:.3f}]")
    tip = (f"{run.run_id} ({run.info.checkpoint or 'no checkpoint'}): "
           f"{'success rate' if metric == 'success' else 'mean reward'} {shown}; "
           f"vs previous: {verdict_cell(entry.vs_previous)}; vs best so far: {verdict_cell(entry.vs_best, entry.best)}")
    return TrendPoint(label, value, interval, tip, regressed="regressed" in entry.verdicts, title=title)


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
        failures=trend.last_failures(), verdict_line=trend.verdict_line(), last_lines=trend.last_run_lines(),
        verdict_columns=VERDICT_COLUMNS,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


def write_trend_html(trend: Trend, path: str | Path) -> Path:
    """The trend as one self-contained page: per environment, line charts of the success
    rate and the mean reward with their interval bands, and the table."""
    return write_page(trend_page_parts(trend), Path(path))
