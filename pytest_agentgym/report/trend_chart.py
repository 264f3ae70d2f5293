"""The trend page's line chart: one metric of one environment across runs, with its
interval as a band. Inline SVG, no script; every text is escaped (see charts.py).

A point that regressed (against the previous run or the best so far) is drawn
as a vermillion downward triangle instead of a dot, with its verdict in its
tooltip; a run that has no figure for the environment leaves a gap.

The x labels (a checkpoint step, or a run id kept short by the page) are turned
by :data:`LABEL_ANGLE` and the margins are made wide enough for the longest of
them, so none is cut at the chart's edge; each label's tooltip names its run whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from markupsafe import Markup, escape

from pytest_agentgym.report.charts import _num, _svg, _text, reward_domain

_LINE = "#0072B2"
_BAND = "#0072B2"
_REGRESSED = "#D55E00"
_AXIS = "#57606a"
_GRID = "#d0d7de"
#: How far the x labels are turned (degrees, counter-clockwise), and their font size.
LABEL_ANGLE = 40.0
_LABEL_SIZE = 10
#: A generous width of one character of a label at :data:`_LABEL_SIZE` (the system sans fonts'
#: digits and letters are narrower), so the margins made from it hold every label.
_CHAR_W = 6.4


@dataclass(frozen=True)
class TrendPoint:
    """One run's figure: value and interval (None: nothing scored), and what its tooltip says."""

    label: str
    value: float | None
    interval: tuple[float, float] | None
    tip: str
    regressed: bool = False
    #: the x label's tooltip (the run id whole); the label itself when empty
    title: str = ""


def _segments(points: Sequence[TrendPoint]) -> list[list[int]]:
    """Runs of consecutive positions that have a value (a gap splits the line)."""
    runs: list[list[int]] = [[]]
    for position, point in enumerate(points):
        if point.value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(position)
    return [r for r in runs if r]


def trend_chart(title: str, axis: str, points: Sequence[TrendPoint], *, percent: bool = False) -> Markup:
    """``axis`` names the metric (y); ``percent`` writes the ticks as percentages."""
    lo, hi = reward_domain([p.value for p in points if p.value is not None])
    span = hi - lo or 1.0
    step = 70.0 if len(points) <= 12 else max(18.0, 840.0 / len(points))
    plot_w = max(240.0, step * max(len(points) - 1, 1))
    plot_h = 170.0

    def x_from_left(position: int) -> float:
        return plot_w / 2 if len(points) == 1 else plot_w * position / (len(points) - 1)

    # A label ends at its point and runs down to the left: the bottom margin holds the longest,
    # the left margin the one that reaches furthest left (46 holds the y axis' ticks and title).
    angle = math.radians(LABEL_ANGLE)
    widths = [_CHAR_W * len(p.label) for p in points]
    reach = max((w * math.cos(angle) - x_from_left(n) for n, w in enumerate(widths)), default=0.0)
    left, right, top = max(46.0, reach + 4.0), 16.0, 12.0
    bottom = max(40.0, 14.0 + max(widths, default=0.0) * math.sin(angle) + _LABEL_SIZE + 6.0)
    width, height = left + plot_w + right, top + plot_h + bottom

    def x_of(position: int) -> float:
        return left + x_from_left(position)

    def y_of(value: float) -> float:
        return top + plot_h * (1 - (min(max(value, lo), hi) - lo) / span)

    parts = []
    for tick in range(6):
        value = lo + span * tick / 5
        y = y_of(value)
        parts.append(f'<line x1="{_num(left)}" y1="{_num(y)}" x2="{_num(left + plot_w)}" y2="{_num(y)}" '
                     f'stroke="{_GRID}"/>')
        parts.append(_text(left - 5, y + 3, f"{value:.0%}" if percent else f"{value:.3g}", "end", 10))
    middle = _num(top + plot_h / 2)
    parts.append(f'<text x="12" y="{middle}" font-size="10" text-anchor="middle" class="axis-label" '
                 f'transform="rotate(-90 12 {middle})">{escape(axis)}</text>')
    for segment in _segments(points):
        band = [p for p in segment if points[p].interval is not None]
        if len(band) > 1:
            upper = " ".join(f"{_num(x_of(p))},{_num(y_of(points[p].interval[1]))}" for p in band)  # type: ignore[index]
            lower = " ".join(f"{_num(x_of(p))},{_num(y_of(points[p].interval[0]))}" for p in reversed(band))  # type: ignore[index]
            parts.append(f'<polygon class="band" points="{upper} {lower}" fill="{_BAND}" fill-opacity="0.15"/>')
        for p in band:
            low, high = points[p].interval  # type: ignore[misc]
            parts.append(f'<line class="whisker" x1="{_num(x_of(p))}" y1="{_num(y_of(low))}" x2="{_num(x_of(p))}" '
                         f'y2="{_num(y_of(high))}" stroke="{_BAND}" stroke-opacity="0.5"/>')
        if len(segment) > 1:
            line = " ".join(f"{_num(x_of(p))},{_num(y_of(points[p].value))}" for p in segment)  # type: ignore[arg-type]
            parts.append(f'<polyline class="line" points="{line}" fill="none" stroke="{_LINE}" stroke-width="2"/>')
    for position, point in enumerate(points):
        x = x_of(position)
        label_y = _num(top + plot_h + 14)
        parts.append(f'<g class="x-label"><title>{escape(point.title or point.label)}</title>'
                     f'<text x="{_num(x)}" y="{label_y}" font-size="{_LABEL_SIZE}" text-anchor="end" '
                     f'transform="rotate(-{_num(LABEL_ANGLE)} {_num(x)} {label_y})">{escape(point.label)}</text></g>')
        if point.value is None:
            continue
        y, tip = y_of(point.value), escape(point.tip)
        if point.regressed:
            parts.append(f'<polygon class="point regressed" points="{_num(x - 6)},{_num(y - 5)} {_num(x + 6)},'
                         f'{_num(y - 5)} {_num(x)},{_num(y + 6)}" fill="{_REGRESSED}"><title>{tip}</title></polygon>')
        else:
            parts.append(f'<circle class="point" cx="{_num(x)}" cy="{_num(y)}" r="4" fill="{_LINE}">'
                         f'<title>{tip}</title></circle>')
    return _svg(width, height, title, parts, "trend-chart")


def trend_legend() -> Markup:
    return Markup(
        '<span class="legend trend-legend">'
        f'<span class="key"><span class="swatch" style="background:{_LINE}"></span>value</span>'
        f'<span class="key"><span class="swatch" style="background:{_BAND};opacity:.25"></span>95% interval</span>'
        f'<span class="key"><span style="color:{_REGRESSED}">▼</span> regressed against the previous run '
        'or the best so far</span></span>')
