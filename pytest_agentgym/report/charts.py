"""Inline SVG charts for the HTML report: no scripts, no external files.

Each function returns a :class:`markupsafe.Markup` string holding one ``<svg>``
element that the template inserts as is. Every piece of text that reaches the
SVG goes through :func:`markupsafe.escape`, so environment names or task ids
that contain markup cannot break out of the chart. Charts carry a ``<title>``
and ``role="img"`` with an ``aria-label`` so that they read sensibly without
their colours; outcome colours also have a text legend next to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from markupsafe import Markup, escape

#: Fill colours per outcome, the colours the rest of the report and the terminal give
#: them: an unsolved episode is amber, never a failure's red (chosen to stay apart for
#: the common colour-vision deficiencies; the legend and tooltips name each outcome in
#: words as well). A task whose repeats ended differently is blue.
OUTCOME_COLOURS = {
    "passed": "#2da44e",
    "unsolved": "#d4a72c",
    "failed": "#cf222e",
    "error": "#8250df",
    "mixed": "#218bff",
}

_AXIS = "#57606a"
_GRID = "#d0d7de"
_BAR = "#0969da"
_SUCCESS = "#2da44e"


def _num(value: float) -> str:
    """Compact coordinate text (two decimals at most)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _svg(width: float, height: float, label: str, body: Iterable[str], css_class: str,
         attributes: str = "") -> Markup:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css_class}"{attributes} '
        f'viewBox="0 0 {_num(width)} {_num(height)}" width="{_num(width)}" height="{_num(height)}" '
        f'role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
    )
    return Markup(head + "".join(body) + "</svg>")


def _text(x: float, y: float, text: object, anchor: str = "start", size: int = 11,
          css_class: str = "") -> str:
    cls = f' class="{css_class}"' if css_class else ""
    return (f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}"'
            f'{cls}>{escape(str(text))}</text>')


# --------------------------------------------------------------------------- histogram


def reward_domain(values: Iterable[float]) -> tuple[float, float]:
    """The x range of a reward chart: [0, 1] widened to take in every value."""
    values = [v for v in values if math.isfinite(v)]
    lo = min([0.0, *values])
    hi = max([1.0, *values])
    return lo, hi


def histogram_counts(values: Sequence[float], bins: int, lo: float, hi: float) -> list[int]:
    """How many values fall in each of ``bins`` equal bins over [lo, hi].

    The last bin is closed on the right, so a reward of exactly ``hi`` (1.0
    for most environments) counts in the top bin.
    """
    counts = [0] * bins
    width = (hi - lo) / bins
    for value in values:
        if not math.isfinite(value):
            continue
        index = int((value - lo) / width) if width > 0 else 0
        counts[min(max(index, 0), bins - 1)] += 1
    return counts


def reward_histogram(env: str, rewards: Sequence[float], bins: int = 10) -> Markup:
    """Bars of how many scored episodes of ``env`` got each reward."""
    lo, hi = reward_domain(rewards)
    counts = histogram_counts(rewards, bins, lo, hi)
    width, height = 320.0, 150.0
    left, right, top, bottom = 34.0, 8.0, 10.0, 28.0
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(counts) if counts and max(counts) > 0 else 1
    bar_w = plot_w / bins
    parts = [
        f'<line x1="{_num(left)}" y1="{_num(top + plot_h)}" x2="{_num(left + plot_w)}" '
        f'y2="{_num(top + plot_h)}" stroke="{_AXIS}"/>',
        _text(left - 4, top + 8, peak, "end", 10),
        _text(left - 4, top + plot_h, 0, "end", 10),
    ]
    for index, count in enumerate(counts):
        low = lo + (hi - lo) * index / bins
        high = lo + (hi - lo) * (index + 1) / bins
        bar_h = plot_h * count / peak
        x = left + index * bar_w
        closing = "]" if index == bins - 1 else ")"
        parts.append(
            f'<rect x="{_num(x + 1)}" y="{_num(top + plot_h - bar_h)}" width="{_num(bar_w - 2)}" '
            f'height="{_num(bar_h)}" fill="{_BAR}"><title>{escape(f"reward [{low:.2f}, {high:.2f}{closing}: {count} episode(s)")}'
            f"</title></rect>"
        )
    for tick in range(0, bins + 1, max(1, bins // 5)):
        x = left + tick * bar_w
        parts.append(_text(x, height - 12, f"{lo + (hi - lo) * tick / bins:g}", "middle", 10))
    parts.append(_text(left + plot_w / 2, height - 1, "reward", "middle", 10, "axis-label"))
    label = f"{env}: reward distribution of {len(rewards)} scored episode(s)"
    return _svg(width, height, label, parts, "histogram")


# --------------------------------------------------------------------------- outcome grid


@dataclass
class TaskCell:
    """The episodes of one task index: how many ended in each outcome."""

    task_index: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """passed / unsolved / failed / error when all repeats agree, else mixed."""
        kinds = [k for k, n in self.counts.items() if n]
        if len(kinds) == 1:
            return kinds[0]
        if not kinds:
            return "error"
        return "mixed"

    def describe(self) -> str:
        order = list(OUTCOME_COLOURS)
        kinds = sorted(self.counts, key=lambda k: (order.index(k) if k in order else len(order), k))
        parts = [f"{self.counts[k]} {k}" for k in kinds if self.counts[k]]
        return f"task {self.task_index}: " + ", ".join(parts)


def task_cells(outcomes: Iterable[tuple[int, str]]) -> list[TaskCell]:
    """Group ``(task_index, outcome)`` pairs into cells sorted by task index."""
    cells: dict[int, TaskCell] = {}
    for task_index, outcome in outcomes:
        cell = cells.setdefault(task_index, TaskCell(task_index))
        cell.counts[outcome] = cell.counts.get(outcome, 0) + 1
    return [cells[k] for k in sorted(cells)]


def outcome_grid(env: str, cells: Sequence[TaskCell], env_number: int = 0) -> Markup:
    """One square per task index, in task order, coloured by the episodes' outcome
    (passed, unsolved, failed, error: the pytest outcome, as in the episode table).

    Each square has a tooltip with the counts of its repeats and a ``data-t``
    attribute with its task index; the page's script opens the worst repeat
    of a clicked square (``data-env`` on the ``<svg>`` names the environment
    by its position in the report's environment list). Runs with more than
    1,000 tasks get smaller squares, 100 to a row.
    """
    columns, size = (50, 11.0) if len(cells) <= 1000 else (100, 8.0)
    columns = max(1, min(columns, len(cells) or 1))
    rows = max(1, math.ceil(len(cells) / columns))
    gap = 2.0
    width = columns * (size + gap) + gap
    height = rows * (size + gap) + gap
    parts = []
    for number, cell in enumerate(cells):
        x = gap + (number % columns) * (size + gap)
        y = gap + (number // columns) * (size + gap)
        colour = OUTCOME_COLOURS.get(cell.state, OUTCOME_COLOURS["error"])
        parts.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(size)}" height="{_num(size)}" fill="{colour}" '
            f'data-t="{cell.task_index}"><title>{escape(cell.describe())}</title></rect>'
        )
    label = f"{env}: outcome by task index, {len(cells)} task(s)"
    return _svg(width, height, label, parts, "outcome-grid", f' data-env="{int(env_number)}"')


# --------------------------------------------------------------------------- environment bars


@dataclass(frozen=True)
class EnvBar:
    env: str
    mean_reward: float | None
    reward_ci95: tuple[float, float] | None
    success_rate: float | None
    success_ci95: tuple[float, float] | None = None


def env_bars(bars: Sequence[EnvBar]) -> Markup:
    """Per environment: mean reward with its 95% CI whisker, and success rate.

    Two bars per environment on a shared axis over [0, 1], widened to take in
    every mean reward. Confidence intervals do not widen it (with two episodes
    an interval can span ten units and would squash every bar): a whisker that
    goes past the axis is cut at the edge and ends in an arrow; its tooltip
    gives the full interval.
    """
    lo, hi = reward_domain([v for bar in bars for v in (bar.mean_reward, bar.success_rate)
                            if v is not None])
    span = hi - lo or 1.0
    label_w, right, top, row_h, bar_h = 110.0, 60.0, 22.0, 34.0, 12.0
    plot_w = 360.0
    width = label_w + plot_w + right
    height = top + row_h * max(1, len(bars)) + 22

    def x_of(value: float) -> float:
        return label_w + plot_w * (min(max(value, lo), hi) - lo) / span

    parts = [
        f'<rect x="{_num(label_w)}" y="4" width="10" height="10" fill="{_BAR}"/>',
        _text(label_w + 14, 13, "mean reward (95% CI)", size=10),
        f'<rect x="{_num(label_w + 150)}" y="4" width="10" height="10" fill="{_SUCCESS}"/>',
        _text(label_w + 164, 13, "success rate", size=10),
    ]
    for tick in range(6):
        value = lo + span * tick / 5
        x = x_of(value)
        parts.append(f'<line x1="{_num(x)}" y1="{_num(top)}" x2="{_num(x)}" '
                     f'y2="{_num(height - 18)}" stroke="{_GRID}"/>')
        parts.append(_text(x, height - 6, f"{value:.3g}", "middle", 10))
    zero = x_of(0.0)
    for row, bar in enumerate(bars):
        y = top + row * row_h + 4
        parts.append(_text(label_w - 6, y + bar_h + 2, bar.env, "end", 11))
        if bar.mean_reward is None:
            parts.append(_text(label_w + 4, y + bar_h, "no scored episode", size=10))
            continue
        x0, x1 = sorted((zero, x_of(bar.mean_reward)))
        tip = escape(_reward_tip(bar))
        parts.append(
            f'<rect x="{_num(x0)}" y="{_num(y)}" width="{_num(max(x1 - x0, 1))}" height="{_num(bar_h)}" '
            f'fill="{_BAR}"><title>{tip}</title></rect>'
        )
        label_x = max(x1, x_of(bar.mean_reward))
        if bar.reward_ci95:
            parts.append(_whisker(x_of(bar.reward_ci95[0]), x_of(bar.reward_ci95[1]), y, bar_h,
                                  bar.reward_ci95[0] < lo, bar.reward_ci95[1] > hi, tip))
            label_x = x_of(bar.reward_ci95[1])
        parts.append(_text(label_x + 4, y + bar_h - 2, f"{bar.mean_reward:.3f}", size=10))
        if bar.success_rate is not None:
            sy = y + bar_h + 2
            s1 = x_of(bar.success_rate)
            parts.append(
                f'<rect x="{_num(zero)}" y="{_num(sy)}" width="{_num(max(s1 - zero, 1))}" height="{_num(bar_h - 4)}" '
                f'fill="{_SUCCESS}"><title>{escape(f"{bar.env}: success rate {bar.success_rate:.1%}")}</title></rect>'
            )
            parts.append(_text(s1 + 4, sy + bar_h - 5, f"{bar.success_rate:.0%}", size=10))
    return _svg(width, height, "mean reward with 95% CI and success rate per environment",
                parts, "env-bars")


def _whisker(c0: float, c1: float, y: float, bar_h: float, cut_low: bool, cut_high: bool,
             tip: str) -> str:
    """A CI line with end caps; an end cut at the axis edge gets an arrowhead instead."""
    mid, top, bottom = y + bar_h / 2, y + 1, y + bar_h - 1
    path = f"M{_num(c0)} {_num(mid)}H{_num(c1)}"
    path += (f"M{_num(c0 + 5)} {_num(top)}L{_num(c0)} {_num(mid)}L{_num(c0 + 5)} {_num(bottom)}" if cut_low
             else f"M{_num(c0)} {_num(top)}V{_num(bottom)}")
    path += (f"M{_num(c1 - 5)} {_num(top)}L{_num(c1)} {_num(mid)}L{_num(c1 - 5)} {_num(bottom)}" if cut_high
             else f"M{_num(c1)} {_num(top)}V{_num(bottom)}")
    return (f'<path d="{path}" stroke="#1f2328" stroke-width="1.5" fill="none">'
            f"<title>{tip}</title></path>")


def _reward_tip(bar: EnvBar) -> str:
    text = f"{bar.env}: mean reward {bar.mean_reward:.3f}"
    if bar.reward_ci95:
        text += f" (95% CI {bar.reward_ci95[0]:.3f} to {bar.reward_ci95[1]:.3f})"
    return text


#: What the grid's colours mean, in words (the outcomes as the episode table names them).
GRID_LABELS = {"passed": "passed", "unsolved": "unsolved", "failed": "failed", "error": "error",
               "mixed": "repeats differ"}


def outcome_legend() -> Markup:
    """A small key of the outcome grid's colours, in words."""
    items = [
        f'<span class="key"><span class="swatch" style="background:{colour}"></span>'
        f'{escape(GRID_LABELS.get(name, name))}</span>'
        for name, colour in OUTCOME_COLOURS.items()
    ]
    return Markup('<span class="legend">' + "".join(items) + "</span>")
