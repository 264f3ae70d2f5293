"""The compare view: a candidate run against its baseline, per environment.

    from pytest_agentgym.compare import compare_runs
    from pytest_agentgym.report.compare_view import write_compare_html
    write_compare_html(compare_runs("reports/step-1000", "reports/step-1200"), "compare.html")

It is a section of the HTML report when the run has a readable baseline
(:func:`baseline_view`), and a page of its own from ``pytest-agentgym compare
BASE CAND --html FILE`` (:func:`write_compare_html`). Per environment it shows
the comparison's verdict line (:mod:`pytest_agentgym.compare` decides; nothing
is computed again here), the flip grid (:mod:`~pytest_agentgym.report.flips`)
and the list of the episodes whose state changed; each opens the two
trajectories side by side with the first divergent turn marked
(:mod:`~pytest_agentgym.report.divergence`).

Like the report, the page is self-contained and escaped the same way; the
changed episodes' trajectories are packed into data chunks by the report's own
:func:`~pytest_agentgym.report.render.build_payload` (gzip above its size
threshold) and parsed only when a pair is opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from markupsafe import Markup

from pytest_agentgym.compare import Comparison, CompareError, EnvComparison, compare_runs
from pytest_agentgym.compare.runs import load_run
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
from pytest_agentgym.results.jsonl import finite_json
from pytest_agentgym.results.redact import redact_data
from pytest_agentgym.report import flips as flip_grid
from pytest_agentgym.report.divergence import first_divergence
from pytest_agentgym.report.page import assets, environment, script_json, write_page
from pytest_agentgym.report.payload import TURN_FIELDS, Chunk, build_payload
from pytest_agentgym.results.records import EpisodeRecord, RunInfo


@dataclass(frozen=True)
class FlipRow:
    """One changed (task, repeat) key as the list shows it."""

    id: str
    task_index: int
    repeat: int
    kind: str
    base: str
    cand: str
    base_reward: float | None
    cand_reward: float | None
    #: where the two trajectories first differ, in words (None: they do not, or one is absent)
    divergence: str | None

    @property
    def label(self) -> str:
        return flip_grid.FLIP_LABELS[self.kind]


@dataclass(frozen=True)
class EnvView:
    env: str
    judged: EnvComparison
    grid: Markup
    tasks: int
    #: keys per flip kind
    counts: dict[str, int]
    #: the changed keys, worst kind first, then by task and repeat
    rows: list[FlipRow]


@dataclass(frozen=True)
class CompareView:
    comparison: Comparison
    base_info: RunInfo
    cand_info: RunInfo
    envs: list[EnvView]
    chunks: list[Chunk]
    data_json: Markup
    legend: Markup = field(default_factory=flip_grid.flip_legend)
    #: flip kind -> its words, in the legend's order
    labels: dict[str, str] = field(default_factory=lambda: dict(flip_grid.FLIP_LABELS))


def build_view(comparison: Comparison, *, compress: bool | None = None) -> CompareView:
    """The view of ``comparison``: the runs it was judged on (read again from the directories
    it names when it does not carry them), and the trajectories of the keys whose state
    changed, read whole by key (the runs hold their records without turns)."""
    base_run, cand_run = comparison.runs or (load_run(comparison.base, "baseline"),
                                             load_run(comparison.candidate, "candidate"))
    base_keys, cand_keys = base_run.keys, cand_run.keys
    envs, pairs, packed = [], {}, []
    for env, judged in comparison.environments.items():
        rows = []
        counts: dict[str, int] = {}
        for flip in judged.flips:
            kind = flip_grid.flip_kind(flip)
            counts[kind] = counts.get(kind, 0) + 1
            if not flip_grid.changed(flip):
                continue
            key = (env, flip.task_index, flip.repeat)
            base = base_run.whole(key) if key in base_keys else None
            cand = cand_run.whole(key) if key in cand_keys else None
            divergence = first_divergence(base.turns, cand.turns) if base and cand else None
            row = FlipRow(flip_grid.pair_id(env, flip), flip.task_index, flip.repeat, kind, flip.base,
                          flip.cand, flip.base_reward, flip.cand_reward,
                          divergence.describe() if divergence else None)
            rows.append(row)
            pairs[row.id] = {"env": env, "t": row.task_index, "r": row.repeat, "k": kind, "label": row.label,
                             "b": _side(base, flip.base, packed), "c": _side(cand, flip.cand, packed),
                             "d": divergence.to_json() if divergence else None}
        rows.sort(key=lambda r: (flip_grid.FLIP_KINDS.index(r.kind), r.task_index, r.repeat))
        cells = flip_grid.flip_cells(env, judged.flips)
        envs.append(EnvView(env, judged, flip_grid.flip_grid(env, cells), len(cells), counts, rows))
    chunks = _pack(packed, list(comparison.environments), compress)
    data = {"base_run_id": base_run.info.run_id, "candidate_run_id": cand_run.info.run_id,
            "turn_fields": list(TURN_FIELDS), "pairs": pairs}
    return CompareView(comparison, _redacted(base_run.info), _redacted(cand_run.info), envs, chunks,
                       script_json(data))


def _side(record: EpisodeRecord | None, state: str,
          packed: list[tuple[EpisodeRecord, dict[str, Any]]]) -> dict[str, Any] | None:
    """One side of a pair; :func:`_pack` adds where its trajectory sits (chunk, position)."""
    if record is None:
        return None
    side = {"s": state, "w": finite_json(record.reward), "x": record.stop_reason, "n": record.rounds}
    packed.append((record, side))
    return side


def _pack(packed: list[tuple[EpisodeRecord, dict[str, Any]]], envs: Sequence[str],
          compress: bool | None) -> list[Chunk]:
    index, chunks, _ = build_payload([record for record, _ in packed], envs, compress)
    for (_, side), row in zip(packed, index):
        side["c"], side["p"] = row["c"], row["p"]
    return chunks


def _redacted(info: RunInfo) -> RunInfo:
    return RunInfo.from_dict(redact_data(info.to_dict()))


# --------------------------------------------------------------------------- pages


def write_compare_html(comparison: Comparison, path: str | Path, *, compress: bool | None = None) -> Path:
    """Write the compare view of ``comparison`` as one self-contained page at ``path``."""
    view = build_view(comparison, compress=compress)
    template = environment().get_template("compare_page.html.j2")
    parts = template.generate(
        view=view, c=comparison, style=assets("report.css", "compare.css"),
        script=assets("trajectory.js", "compare.js"),
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
    return write_page(parts, Path(path))


def baseline_view(info: RunInfo, run_path: Path, baseline: Path | None, compress: bool | None = None, *,
                  comparison: Comparison | None = None) -> tuple[CompareView | None, str]:
    """The report's compare section: ``comparison`` when given (the run's own), else
    this run against ``baseline``, judged as the run's settings in run.json say
    (``baseline_metric``, ``max_drop``, ``max_error_rate``; else success, 0.05,
    0.05). Settings that differ are let through and listed (the run itself refused
    them unless it was told to allow them). Returns (view, "") or (None, why there
    is no view)."""
    settings = info.settings or {}
    margin, rate = settings.get("max_drop"), settings.get("max_error_rate")
    try:
        if comparison is None:
            comparison = compare_runs(
                baseline if baseline is not None else Path(info.baseline or ""), run_path,
                metric=settings.get("baseline_metric") or "success", margin=0.05 if margin is None else margin,
                max_error_rate=DEFAULT_MAX_ERROR_RATE if rate is None else rate, allow_mismatch=True)
        return build_view(comparison, compress=compress), ""
    except (CompareError, OSError) as exc:
        return None, f"this run could not be compared with its baseline {baseline or info.baseline}: {exc}"
