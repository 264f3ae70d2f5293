"""Render a run directory's results into one self-contained ``report.html``.

The page is built from ``run.json`` and ``episodes.jsonl`` alone (read through
:class:`pytest_agentgym.results.store.RunDir`), so ``pytest-agentgym report RUN_DIR``
gives the same page as the end of the run. Everything is inside the file: CSS,
script and SVG charts are inlined and nothing is fetched, so it opens from
disk, a CI artifact or an e-mail attachment on a machine without network.

How the page stays fast with 10,000 episodes:

* The server-rendered part (header, per-environment summary, gate verdicts,
  charts) is small. The full episode list is also server-rendered, inside
  ``<noscript>``: a browser with scripts on keeps it as unparsed text, one
  with scripts off shows it as a table.
* With scripts on, the episode table is drawn one page at a time from a
  compact index (``<script type="application/json" id="episode-index">``) and
  sorts and filters there.
* Trajectories sit in separate data chunks of about 256 KB that are parsed
  only when an episode is opened (``#episode=<id>`` in the URL). Above
  :data:`COMPRESS_ABOVE` bytes of trajectories the chunks are gzip-compressed
  and base64-encoded; the page inflates them with ``DecompressionStream``.

Nothing on the page carries a credential: run.json, error messages and
trajectories go through :mod:`pytest_agentgym.results.redact` before they are rendered
(the files are redacted when written; this also covers older runs).

Everything that comes from models and servers is escaped: jinja2 autoescapes
HTML, :func:`~pytest_agentgym.report.page.script_json` turns ``<``, ``>`` and ``&`` inside embedded JSON
into ``\\u003c`` etc. so that a ``</script>`` in a reply cannot end the data
block, and the page's script writes data with ``textContent`` only.
"""

from __future__ import annotations

import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import jinja2
from markupsafe import Markup, escape

from pytest_agentgym.report import charts
from pytest_agentgym.report.compare_view import baseline_view
from pytest_agentgym.report.page import assets, environment, format_duration, script_json, write_page
from pytest_agentgym.report.payload import (  # noqa: F401  (re-exported: the page's data)
    CHUNK_BYTES,
    COMPRESS_ABOVE,
    TURN_FIELDS,
    Chunk,
    PackedRun,
    build_payload,
    escape_json_text,
    outcome_of,
    read_for_report,
    trajectory_json,
)
from pytest_agentgym.results.aggregate import EnvSummary, summarize
from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.gates import NOT_JUDGED
from pytest_agentgym.results.jsonl import finite_json
from pytest_agentgym.results.records import EpisodeRecord, RunInfo, parse_time
from pytest_agentgym.results.redact import redact_data, redact_text
from pytest_agentgym.results.store import RunDir

REPORT_FILE = "report.html"
#: Episodes per page of the script-driven episode table.
PAGE_SIZE = 100

def render_run_dir(run_dir: str | Path, output: str | Path | None = None, *,
                   compress: bool | None = None, comparison: Any = None) -> Path:
    """Write the report of ``run_dir`` to ``output`` (default ``RUN_DIR/report.html``).

    ``compress``: None picks gzip for large runs (see :data:`COMPRESS_ABOVE`);
    True or False forces it on or off. ``comparison``: the run's
    :class:`~pytest_agentgym.compare.Comparison` with its baseline when the caller
    has it (the run's own gate); else the report compares the run with the
    baseline named in run.json. Returns the path written.
    """
    run = RunDir(run_dir)
    info = run.read_info()
    # records without their turns; their trajectories packed as they are read
    packed = read_for_report(run.episodes_file, compress)
    skipped, duplicates = packed.skipped, packed.duplicates
    for line in sorted([*skipped, *duplicates], key=lambda found: found.line or 0):
        warnings.warn(str(line), stacklevel=2)
    episodes = current_records(packed.records)  # a resumed run: the newest generation of each episode
    packed = packed.current(episodes)
    baseline, baseline_note = load_baseline(info, run.path)
    compare, compare_note = None, ""
    if baseline is not None or comparison is not None:
        compare, compare_note = baseline_view(info, run.path, find_baseline_dir(info, run.path), compress,
                                              comparison=comparison)
    parts = page_parts(info, episodes, baseline=baseline, baseline_note=baseline_note,
                       compress=compress, source=str(run.path), skipped=[str(line) for line in skipped],
                       duplicates=[str(d) for d in duplicates], compare=compare, compare_note=compare_note,
                       packed=packed)
    return write_page(parts, Path(output) if output is not None else run.path / REPORT_FILE)


def find_baseline_dir(info: RunInfo, run_path: Path) -> Path | None:
    """The baseline run directory named in ``run.json``, if it is still there.

    A relative path is tried from the working directory, then next to the run
    directory.
    """
    if not info.baseline:
        return None
    given = Path(info.baseline)
    candidates = [given] if given.is_absolute() else [given, run_path.parent / given,
                                                      run_path.parent / given.name]
    return next((candidate for candidate in candidates if (candidate / "run.json").is_file()), None)


def load_baseline(info: RunInfo, run_path: Path) -> tuple[dict[str, EnvSummary] | None, str]:
    """Summaries of the baseline run named in ``run.json``, if it can still be read
    (see :func:`find_baseline_dir`). When it cannot be read the report says so and
    shows only the baseline gate verdicts recorded in ``run.json``.
    """
    if not info.baseline:
        return None, ""
    found = find_baseline_dir(info, run_path)
    if found is None:
        return None, (f"baseline run {info.baseline} was not found from here; "
                      "showing the baseline verdicts recorded in run.json only")
    try:
        return summarize(current_records(RunDir(found).read_episodes())), ""
    except (OSError, ValueError) as exc:
        return None, f"baseline run {found} could not be read ({exc})"


# --------------------------------------------------------------------------- view model


def _stop_lines(stopped_early: dict[str, dict[str, Any]]) -> list[str]:
    """One sentence per environment that stopped early (run.json's ``stopped_early``)."""
    lines = []
    for env, d in stopped_early.items():
        lines.append(f"{env} stopped after {d.get('episodes')} of {d.get('planned_episodes')} episodes "
                     f"({d.get('tasks')} of {d.get('planned_tasks')} tasks): {d.get('verdict')}: {d.get('why')}")
    return lines


def _header(info: RunInfo) -> dict[str, Any]:
    start, end = parse_time(info.started_at), parse_time(info.ended_at)
    if info.ended_at is None:
        duration = "unfinished (no end time recorded yet)"
    elif start and end:
        duration = format_duration((end - start).total_seconds())
    else:
        duration = "—"
    counts = info.counts or {}
    planned, played = counts.get("planned"), counts.get("episodes", 0)
    stopped = info.status in ("interrupted", "crashed")
    # a gate an early stop left open (--agentgym-stop-when-decided) does not make the run partial
    partial = next((g.get("detail") for g in info.gates if g.get("outcome") == NOT_JUDGED
                    and not str(g.get("detail", "")).startswith("stopped early:")), None)
    if partial is None and stopped:  # also a run.json written before gates were left unjudged on a partial run
        partial = f"run {info.status} after {played}" + (f" of {planned}" if planned else "") + " episodes"
    return {
        "date": start.strftime("%Y-%m-%d %H:%M:%S %Z") if start else info.started_at,
        "duration": duration,
        "running": info.status == "running",
        "stopped": stopped,
        "partial": partial,
        "planned": planned,
        "played": played,
    }


#: How each gate outcome is shown: the terminal's word (``GATE ERROR: ...``, results/gates.py
#: ``GateVerdict.word``) and the class that gives it the terminal's colour (an error in the
#: report's colour for errors, as errored episodes have).
GATE_SHOWN = {"passed": ("PASSED", "pass"), "failed": ("FAILED", "fail"), "error": ("ERROR", "error"),
              "inconclusive": ("INCONCLUSIVE", "warn"), NOT_JUDGED: ("NOT JUDGED", "warn")}


def gate_outcome(gate: dict[str, Any], partial: str | None) -> str:
    """A gate verdict's outcome as the page shows it: run.json's ``outcome`` (passed, failed,
    error, inconclusive, not-judged); from ``passed`` alone for a run.json written before
    outcomes were recorded. On a partial run a gate that says it passed is not judged (a
    run.json written before gates were left unjudged on a partial run)."""
    outcome = str(gate.get("outcome") or ("passed" if gate.get("passed") else "failed"))
    if partial and gate.get("passed"):
        return NOT_JUDGED
    return outcome


def _gate_views(gates: Sequence[dict[str, Any]], partial: str | None) -> list[dict[str, Any]]:
    """run.json's gate verdicts, each with ``word`` and ``css``: how the page shows its outcome."""
    views = []
    for gate in gates:
        outcome = gate_outcome(gate, partial)
        word, css = GATE_SHOWN.get(outcome, (outcome.upper(), "pass" if gate.get("passed") else "fail"))
        views.append({**gate, "shown": outcome, "word": word, "css": css})
    return views


def _gate_badge(gates: Sequence[dict[str, Any]], partial: str | None) -> tuple[str, str]:
    """The header's gate badge (text, class): the worst of the run's gate outcomes, counted
    (a failure or an error first, then gates left unjudged; all passed only when all did)."""
    if not gates:
        return "no gates declared", "neutral"
    if partial:
        return f"GATES NOT JUDGED: {partial}", "warn"
    total = len(gates)
    failed = sum(1 for g in gates if g["shown"] == "failed" or (g["shown"] not in GATE_SHOWN and not g.get("passed")))
    errors = sum(1 for g in gates if g["shown"] == "error")
    open_ = sum(1 for g in gates if g["shown"] == NOT_JUDGED)
    inconclusive = sum(1 for g in gates if g["shown"] == "inconclusive")
    if failed and errors:
        return f"GATES FAILED: {failed}, ERROR: {errors} of {total}", "fail"
    if failed:
        return f"GATES FAILED: {failed} of {total}", "fail"
    if errors:
        return f"GATES ERROR: {errors} of {total}", "error"
    if open_:
        return f"GATES NOT JUDGED: {open_} of {total}", "warn"
    return f"all {total} gates passed" + (f" ({inconclusive} inconclusive)" if inconclusive else ""), "pass"


def _env_order(info: RunInfo, episodes: Sequence[EpisodeRecord]) -> list[str]:
    order = list(dict.fromkeys(info.environments))
    for record in episodes:
        if record.env not in order:
            order.append(record.env)
    return order


def _env_rows(envs: Sequence[str], summaries: dict[str, EnvSummary],
              gates: Sequence[dict[str, Any]], baseline: dict[str, EnvSummary] | None) -> list[dict[str, Any]]:
    rows = []
    for env in envs:
        summary = summaries.get(env)
        verdicts = [g for g in gates if g.get("env") == env]
        base = baseline.get(env) if baseline else None
        delta = None
        if base and base.mean_reward is not None and summary and summary.mean_reward is not None:
            delta = summary.mean_reward - base.mean_reward
        rows.append({"env": env, "s": summary, "gates": verdicts, "baseline": base, "delta": delta,
                     "failed_gates": sum(1 for g in verdicts if g["shown"] in ("failed", "error"))})
    return rows


def _charts(envs: Sequence[str], episodes: Sequence[EpisodeRecord]) -> list[dict[str, Any]]:
    result = []
    by_env: dict[str, list[EpisodeRecord]] = {}
    for record in episodes:
        by_env.setdefault(record.env, []).append(record)
    for number, env in enumerate(envs):
        mine = by_env.get(env, [])
        if not mine:
            continue
        rewards = [r.reward for r in mine if r.error is None and finite_json(r.reward) is not None]
        # the episodes' outcomes, as the table and the terminal name them: unsolved is amber, not a failure
        cells = charts.task_cells((r.task_index, outcome_of(r)) for r in mine)
        result.append({"env": env, "histogram": charts.reward_histogram(env, rewards),
                       "grid": charts.outcome_grid(env, cells, number), "tasks": len(cells)})
    return result


def _bars(envs: Sequence[str], summaries: dict[str, EnvSummary]) -> Markup | None:
    bars = [charts.EnvBar(env, summaries[env].mean_reward, summaries[env].reward_ci95,
                          summaries[env].success_rate, summaries[env].success_ci95)
            for env in envs if env in summaries]
    return charts.env_bars(bars) if bars else None


def _noscript_rows(listing: Sequence[tuple[dict[str, Any], EpisodeRecord]], envs: Sequence[str],
                   jinja: jinja2.Environment) -> Markup:
    """The rows of the episode table shown without scripts, as the template would write them,
    built here: through the template, 10,000 rows of 11 cells took about 0.6 s of a report."""
    truncate = jinja.filters["truncate"]  # the page's own, so long messages are cut as before
    names = [escape(name) for name in envs]
    rows = []
    for r, record in listing:
        reward = "—" if r["w"] is None else format(r["w"], ".3f")
        error = ""
        if record.error:
            error = f"{escape(r['err'])}: {escape(truncate(jinja, redact_text(record.error.message), 200))}"
        rows.append(f'<tr class="o-{escape(r["o"])}"><td>{names[r["e"]]}</td><td>{r["t"]}</td><td>{r["r"]}</td>'
                    f'<td class="outcome {escape(r["o"])}">{escape(r["o"])}</td><td>{reward}</td><td>{r["n"]}</td>'
                    f'<td>{escape(r["x"])}</td><td>{r["k"]}</td><td>{r["d"]}</td><td>{r["a"]}</td><td>{error}</td></tr>\n')
    return Markup("".join(rows))


def in_task_order(episodes: Sequence[EpisodeRecord], envs: Sequence[str], packed: PackedRun | None
                  ) -> tuple[list[EpisodeRecord], PackedRun | None]:
    """The episodes in task order (environment as ``envs`` lists them, task index, repeat), not
    in the order they finished, which is how episodes.jsonl holds them; ``packed`` (whose slots
    go with ``episodes``) in the same order. The page's table starts in this order, and its
    sort is stable, so equal values keep it."""
    from pytest_agentgym.results.records import task_order

    key = task_order(envs)
    if packed is None:
        return sorted(episodes, key=key), None
    pairs = sorted(zip(episodes, packed.slots), key=lambda pair: key(pair[0]))
    records = [record for record, _ in pairs]
    return records, PackedRun(records, [slot for _, slot in pairs], packed.packer, packed.skipped,
                              packed.duplicates)


def render_html(info: RunInfo, episodes: Sequence[EpisodeRecord], **options: Any) -> str:
    """The report page as one string; ``options`` are those of :func:`page_parts`."""
    return "".join(page_parts(info, episodes, **options))


def page_parts(info: RunInfo, episodes: Sequence[EpisodeRecord], *,
               baseline: dict[str, EnvSummary] | None = None, baseline_note: str = "",
               compress: bool | None = None, source: str = "", skipped: Sequence[str] = (),
               duplicates: Sequence[str] = (), compare: Any = None, compare_note: str = "",
               packed: PackedRun | None = None) -> Iterator[str]:
    """The report page as a stream of text pieces (see the module docstring for its parts).

    ``baseline`` holds the baseline run's summaries (see :func:`load_baseline`),
    ``source`` the run directory, shown with the command that renders it again,
    ``skipped`` the lines of episodes.jsonl that could not be read (shown as a notice),
    ``duplicates`` the lines left out as a second record of an episode (another notice),
    ``compare`` the compare view against the baseline
    (:class:`~pytest_agentgym.report.compare_view.CompareView`), or ``compare_note``
    saying why there is none. ``packed``: ``episodes`` were read by
    :func:`~pytest_agentgym.report.payload.read_for_report` (without their turns).
    """
    info = RunInfo.from_dict(redact_data(info.to_dict()))
    envs = _env_order(info, episodes)
    episodes, packed = in_task_order(episodes, envs, packed)
    summaries = summarize(episodes)
    head = _header(info)
    gates = _gate_views(info.gates, head["partial"])
    index, chunks, zipped = build_payload(episodes, envs, compress, info.run_id, packed)
    outcomes = {k: 0 for k in ("passed", "unsolved", "failed", "error")}
    for row in index:
        outcomes[row["o"]] = outcomes.get(row["o"], 0) + 1
    meta = {"run_id": info.run_id, "envs": envs, "page_size": PAGE_SIZE, "encoding":
            "gzip-base64" if zipped else "json", "turn_fields": list(TURN_FIELDS)}
    jinja = environment()
    template = jinja.get_template("report.html.j2")
    return template.generate(
        info=info, head=head, envs=envs, gate_badge=_gate_badge(gates, head["partial"]),
        stops=[redact_text(line) for line in _stop_lines(info.stopped_early)],
        env_rows=_env_rows(envs, summaries, gates, baseline),
        gates=gates,
        baseline_summaries=baseline, baseline_note=baseline_note,
        bars=_bars(envs, summaries), env_charts=_charts(envs, episodes),
        legend=charts.outcome_legend(), episodes=episodes,
        noscript_rows=_noscript_rows(list(zip(index, episodes)), envs, jinja),
        outcomes=outcomes, skipped=[redact_text(line) for line in skipped],
        duplicates=[redact_text(line) for line in duplicates],
        chunks=chunks, index_json=script_json(index), meta_json=script_json(meta),
        compare=compare, compare_note=compare_note,
        style=assets("report.css", *(("compare.css",) if compare else ())),
        script=assets("trajectory.js", "report.js", *(("compare.js",) if compare else ())), source=source,
        rerender=f"pytest-agentgym report {source}" if source else "pytest-agentgym report RUN_DIR",
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
