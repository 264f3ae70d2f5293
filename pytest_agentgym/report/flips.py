"""The flip grid of the compare view: one square per task, how its episodes changed.

A (task, repeat) key's *flip* is what the baseline and the candidate made of it,
from the comparison's :class:`~pytest_agentgym.compare.Flip` (success by the
environment's rule): ``pass-fail``, ``fail-pass``, ``both-pass``, ``both-fail``,
or ``error`` (errored or missing in either run). A task with repeats shows the
worst flip of its repeats (:data:`FLIP_KINDS` is worst first), as the report's
outcome grid shows the worst repeat; its tooltip counts every repeat.

Colours come from the Okabe-Ito set and were checked to stay apart (CIE76
ΔE > 20 between every two) for normal vision and simulated protanopia,
deuteranopia and tritanopia (tests/report/test_compare_view.py). They are never the
only cue: the two flips carry a white triangle (down for pass → fail, up for
fail → pass), every square has a tooltip in words and the legend names each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from markupsafe import Markup, escape

from pytest_agentgym.compare import Flip
from pytest_agentgym.report.charts import _num, _svg

#: Flip kinds, worst first (a task with repeats shows its worst).
FLIP_KINDS = ("pass-fail", "error", "both-fail", "fail-pass", "both-pass")
#: What each kind means, in the words of the legend and the tooltips.
FLIP_LABELS = {
    "pass-fail": "pass → fail",
    "fail-pass": "fail → pass",
    "both-pass": "both pass",
    "both-fail": "both fail",
    "error": "error or missing",
}
FLIP_COLOURS = {
    "pass-fail": "#D55E00",  # vermillion
    "fail-pass": "#0072B2",  # blue
    "both-pass": "#A6D9C4",  # pale bluish green
    "both-fail": "#57606A",  # dark grey
    "error": "#F0E442",  # yellow
}
#: Kinds whose two episodes differ in success: these are the flips the view lists.
CHANGED = ("pass-fail", "fail-pass")


def flip_kind(flip: Flip) -> str:
    """``pass-fail``, ``fail-pass``, ``both-pass``, ``both-fail`` or ``error``."""
    if not flip.matched:
        return "error"
    if flip.base == flip.cand:
        return f"both-{flip.base}"
    return f"{flip.base}-{flip.cand}"


def changed(flip: Flip) -> bool:
    """The key's state differs between the runs (a flip, or an error or a gap on one side)."""
    return flip.base != flip.cand


def pair_id(env: str, flip: Flip) -> str:
    """How a page names one key of the comparison: ``<env>:<task>:r<repeat>``."""
    return f"{env}:{flip.task_index}:r{flip.repeat}"


@dataclass
class FlipCell:
    """The keys of one task: how many of its repeats flipped which way."""

    task_index: int
    counts: dict[str, int] = field(default_factory=dict)
    #: the pair a click opens: the worst of the task's changed keys, if any
    opens: str | None = None
    _opens_rank: int = len(FLIP_KINDS)

    @property
    def kind(self) -> str:
        return min(self.counts, key=FLIP_KINDS.index)

    def describe(self) -> str:
        parts = [f"{self.counts[k]} {FLIP_LABELS[k]}" for k in FLIP_KINDS if self.counts.get(k)]
        return f"task {self.task_index}: " + ", ".join(parts)


def flip_cells(env: str, flips: Iterable[Flip]) -> list[FlipCell]:
    """One cell per task index, in task order."""
    cells: dict[int, FlipCell] = {}
    for flip in flips:
        cell = cells.setdefault(flip.task_index, FlipCell(flip.task_index))
        kind = flip_kind(flip)
        cell.counts[kind] = cell.counts.get(kind, 0) + 1
        if changed(flip) and FLIP_KINDS.index(kind) < cell._opens_rank:
            cell.opens, cell._opens_rank = pair_id(env, flip), FLIP_KINDS.index(kind)
    return [cells[k] for k in sorted(cells)]


def _marker(kind: str, x: float, y: float, size: float) -> str:
    """A white triangle inside a flipped square: down for pass → fail, up for fail → pass."""
    if kind not in CHANGED:
        return ""
    left, right, mid = x + size * 0.22, x + size * 0.78, x + size / 2
    top, bottom = y + size * 0.25, y + size * 0.75
    points = (f"{_num(left)},{_num(top)} {_num(right)},{_num(top)} {_num(mid)},{_num(bottom)}"
              if kind == "pass-fail" else
              f"{_num(left)},{_num(bottom)} {_num(right)},{_num(bottom)} {_num(mid)},{_num(top)}")
    return f'<polygon points="{points}" fill="#fff" pointer-events="none"/>'


def flip_grid(env: str, cells: Sequence[FlipCell]) -> Markup:
    """One square per task, coloured by its worst flip, with a class ``flip-<kind>``.

    A square whose task has a changed key carries ``data-pair`` (the key its
    click opens, side by side). Above 1,000 tasks the squares are smaller.
    """
    columns, size = (50, 11.0) if len(cells) <= 1000 else (100, 8.0)
    columns = max(1, min(columns, len(cells) or 1))
    rows = max(1, math.ceil(len(cells) / columns))
    gap = 2.0
    parts = []
    for number, cell in enumerate(cells):
        x = gap + (number % columns) * (size + gap)
        y = gap + (number // columns) * (size + gap)
        kind = cell.kind
        opens = f' data-pair="{escape(cell.opens)}"' if cell.opens else ""
        parts.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(size)}" height="{_num(size)}" '
            f'fill="{FLIP_COLOURS[kind]}" class="flip-{kind}" data-t="{cell.task_index}"{opens}>'
            f'<title>{escape(cell.describe())}</title></rect>{_marker(kind, x, y, size)}'
        )
    label = f"{env}: baseline to candidate by task index, {len(cells)} task(s)"
    return _svg(columns * (size + gap) + gap, rows * (size + gap) + gap, label, parts, "flip-grid")


def flip_legend() -> Markup:
    """The flip grid's colours, in words (triangles as in the grid)."""
    marks = {"pass-fail": " ▼", "fail-pass": " ▲"}
    items = [
        f'<span class="key flip-key-{kind}"><span class="swatch" style="background:{FLIP_COLOURS[kind]}">'
        f'</span>{escape(FLIP_LABELS[kind])}{marks.get(kind, "")}</span>'
        for kind in ("pass-fail", "fail-pass", "both-pass", "both-fail", "error")
    ]
    return Markup('<span class="legend flip-legend">' + "".join(items) + "</span>")
