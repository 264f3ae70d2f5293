"""The runs index of a reports directory: one row per run, for picking runs to compare.

    from pytest_agentgym.report.index import read_index, write_index
    rows = read_index("reports")        # newest first; never raises for a broken run
    write_index("reports")              # reports/index.html

A training team keeps one run per checkpoint, so ``reports/`` fills with run
directories (``reports/<run_id>/``, the shards of a run under
``reports/<run_id>/shard-I-of-N/``, merged runs). The index lists them, one
:class:`~pytest_agentgym.report.run_rows.RunRow` each: model, checkpoint, node, status, per-environment success
rate and mean reward, gates, episode counts, start time. It is shown three
ways: ``reports/index.html`` written beside the runs at the end of every run
(:func:`refresh_index`), the live page of ``pytest-agentgym view``
(:mod:`~pytest_agentgym.report.view`), and ``pytest-agentgym runs`` in a terminal.

How each row is read, kept fresh while its run runs, and told crashed from running is
:mod:`~pytest_agentgym.report.run_rows`.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from pytest_agentgym.report.run_rows import SHARD_DIR, RowCache, RunRow
from pytest_agentgym.results.records import parse_time
from pytest_agentgym.results.store import EPISODES_FILE, LATEST, RUN_FILE

__all__ = ["INDEX_FILE", "find_runs", "read_index", "refresh_index", "reports_root", "write_index"]

INDEX_FILE = "index.html"


# --------------------------------------------------------------------------- finding runs


def _is_run(path: Path) -> bool:
    return (path / RUN_FILE).is_file() or (path / EPISODES_FILE).is_file()


def find_runs(reports: str | Path) -> Iterator[tuple[str, Path]]:
    """``(key, directory)`` of every run under ``reports``: each directory that holds
    run.json or episodes.jsonl, and the ``shard-I-of-N`` directories of a sharded run
    (whose own directory holds a run only once merged). Symbolic links (``latest``) are
    not followed: every run is listed once, and nothing outside ``reports`` is read."""
    root = Path(reports)
    try:
        children = sorted(root.iterdir())
    except OSError:
        return
    for child in children:
        if child.is_symlink() or not child.is_dir() or child.name.startswith("."):
            continue
        if _is_run(child):
            yield child.name, child
        try:
            numbered = [(match, s) for s in child.iterdir() if (match := SHARD_DIR.fullmatch(s.name))]
        except OSError:
            continue
        for _, shard in sorted(numbered, key=lambda found: (int(found[0][2]), int(found[0][1]))):
            if not shard.is_symlink() and shard.is_dir() and _is_run(shard):
                yield f"{child.name}/{shard.name}", shard


def _latest(root: Path) -> str | None:
    """The directory name ``reports/latest`` points to (a link, or latest.txt)."""
    link = root / LATEST
    try:
        if link.is_symlink():
            return Path(os.readlink(link)).name
        named = root / f"{LATEST}.txt"
        if named.is_file():
            return named.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return None


# --------------------------------------------------------------------------- the index


def read_index(reports: str | Path, cache: RowCache | None = None) -> list[RunRow]:
    """Every run under ``reports`` (:func:`find_runs`), newest first (by start time; the
    broken ones, which have none, last). Never raises for a run it cannot read."""
    root = Path(reports)
    cache = cache if cache is not None else RowCache()
    latest = _latest(root)
    found = list(find_runs(root))
    rows = []
    for key, path in found:
        row = cache.row(key, path)
        row.latest = key == latest
        rows.append(row)
    cache.forget(key for key, _ in found)
    rows.sort(key=lambda r: (parse_time(r.started_at) is not None,
                             parse_time(r.started_at) or datetime.min.replace(tzinfo=timezone.utc), r.key),
              reverse=True)
    return rows


# --------------------------------------------------------------------------- the page


def _columns(rows: Iterable[RunRow]) -> list[str]:
    """The environments of every row, in the order they first appear: one column each."""
    return list(dict.fromkeys(env for row in rows for env in row.envs))


def _filters(rows: list[RunRow]) -> dict[str, list[str]]:
    return {name: sorted({getattr(row, name) for row in rows if getattr(row, name)})
            for name in ("model", "node", "status")}


def table_html(rows: list[RunRow], *, live: bool) -> str:
    """The table of the runs (its own template, so the live page can fetch it alone)."""
    from pytest_agentgym.report.page import environment

    return environment().get_template("index_table.html.j2").render(rows=rows, envs=_columns(rows), live=live)


def index_parts(rows: list[RunRow], reports: Path, *, live: bool) -> Iterator[str]:
    """The index page as a stream of text: ``live`` for ``pytest-agentgym view`` (links to
    its pages, compare and trend buttons, refreshing), else the static reports/index.html
    (links to each report.html, the shell commands for compare and trend)."""
    from markupsafe import Markup

    from pytest_agentgym.report.page import assets, environment

    template = environment().get_template("index.html.j2")
    return template.generate(
        rows=rows, reports=str(reports), live=live, filters=_filters(rows),
        table=Markup(table_html(rows, live=live)), style=assets("report.css", "index.css"),
        script=assets("index.js"), running=sum(1 for r in rows if r.running),
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))


def reports_root(run_dir: str | Path) -> Path:
    """The reports directory a run directory sits in (a shard's is two levels up)."""
    path = Path(run_dir)
    return path.parent.parent if SHARD_DIR.fullmatch(path.name) else path.parent


def write_index(reports: str | Path, rows: list[RunRow] | None = None) -> Path:
    """Write ``reports/index.html``: the index as one self-contained page (filters,
    sorting, links to each run's report.html). Returns its path."""
    from pytest_agentgym.report.page import write_page

    root = Path(reports)
    rows = read_index(root) if rows is None else rows
    return write_page(index_parts(rows, root, live=False), root / INDEX_FILE)


def refresh_index(run_dir: str | Path) -> tuple[Path | None, str | None]:
    """Write the index of the reports directory holding ``run_dir`` (at the end of a run,
    beside its report.html): its path, or None and what went wrong. Never raises: the
    index is a convenience, and a failure to write it never changes a run's outcome."""
    try:
        return write_index(reports_root(run_dir)), None
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return None, f"{type(exc).__name__}: {exc}"
