"""The commands that read finished runs: ``report``, ``export``, ``compare`` and ``trend``,
and how every gating command speaks: the readers' warnings once each on stderr
(:func:`reader_warnings`), an internal error as one line and exit 2, never 1, which CI
reads as a regression (:func:`internal_error`), a directory that is no run refused in one
line (:func:`not_a_run_dir`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Callable, Iterator

from pytest_agentgym.results.shown import shown_lines

def judging_options(command: argparse.ArgumentParser) -> None:
    """The options of a paired comparison, shared by compare and trend."""
    command.add_argument("--metric", choices=("success", "reward"), default="success",
                         help="success rate or mean reward (default: success)")
    command.add_argument("--margin", type=float, default=0.05,
                         help="the largest drop that is not a regression, in [0, 1] (default: 0.05)")
    command.add_argument("--alpha", type=float, default=0.05,
                         help="significance level, Holm-adjusted across environments (default: 0.05)")
    command.add_argument("--max-error-rate", type=float, default=None, metavar="X",
                         help="share of episodes that may error in either run (default: 0.05)")
    command.add_argument("--allow-mismatch", action="store_true",
                         help="compare runs whose settings differ (the differences are listed)")
    command.add_argument("--reports", default="reports", help="where run ids and latest are looked up "
                                                               "(default: reports)")


@contextlib.contextmanager
def reader_warnings(command: str) -> Iterator[None]:
    """The readers' warnings (a line of episodes.jsonl skipped, a duplicate left out) as one
    line each on stderr, ``pytest-agentgym compare: warning: <what>``, each once however
    often the run is read."""
    import warnings

    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        text = str(message)
        if text not in shown:
            shown.add(text)
            print(shown_lines(f"pytest-agentgym {command}: warning: {text}"), file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def internal_error(command: str, run: Callable[[], int]) -> int:
    """``run()``, with any exception it lets out turned into one line on stderr and exit 2:
    exit 1 means "regressed" (or a gate failed) to CI, so a crash must never read as it."""
    try:
        return run()
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the last line of defence of a gating command
        from pytest_agentgym.compare.error import describe_internal_error

        print(f"pytest-agentgym {command}: internal error: {describe_internal_error(exc)}; "
              f"this is a bug in pytest-agentgym, not a verdict (exit 2): please report it with the "
              f"command line", file=sys.stderr)
        return 2


def report_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.ledger import settle_crashed
    from pytest_agentgym.report.render import render_run_dir
    from pytest_agentgym.results.store import RunDir

    if _refused("report", args.run_dir):
        return 2
    info = settle_crashed(RunDir(args.run_dir))  # a run left "running" by a dead process
    if info is not None and info.status == "crashed":
        print(f"run {info.run_id} crashed (its process is gone); resume it with "
              f"pytest ... --agentgym-resume={args.run_dir}", file=sys.stderr)
    with reader_warnings("report"):
        path = render_run_dir(args.run_dir, output=args.output, compress=args.compress)
    print(path)
    return 0


def export_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.results.export import ExportError, export_run
    from pytest_agentgym.results.jsonl import ResultsWriteError

    if _refused("export", args.run_dir):
        return 2
    try:
        with reader_warnings("export"):
            result = export_run(args.run_dir, format=args.format, only=args.only, output=args.output)
    except (ResultsWriteError, ExportError) as exc:
        print(f"pytest-agentgym export: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # -o - into a reader that stopped reading (| head): it has what it wanted
        with contextlib.suppress(OSError, ValueError):
            import os
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 0
    for line in result.skipped_lines:
        print(f"pytest-agentgym export: skipped {line}", file=sys.stderr)
    print(result.summary(), file=sys.stderr if args.output == "-" else sys.stdout)  # stdout holds the rows
    if result.rows == 0:
        print("pytest-agentgym export: nothing to export (exit 1)", file=sys.stderr)
        return 1
    return 0


def _refused(command: str, run_dir: str) -> bool:
    """Whether ``run_dir`` is refused as no run directory (then said in one line on stderr)."""
    refusal = not_a_run_dir(Path(run_dir))
    if refusal is not None:
        print(shown_lines(f"pytest-agentgym {command}: {refusal}"), file=sys.stderr)
    return refusal is not None


def not_a_run_dir(path: Path) -> str | None:
    """Why ``path`` is not a run directory to render, or None. A verifiers output
    directory (``vf-eval -o``: traces.jsonl, at its top or one level down) is named as
    such, with the way to get a run directory of the same episodes."""
    if not path.exists():
        return f"{path} does not exist; give a run directory (e.g. reports/latest)"
    if not path.is_dir():
        return f"{path} is a file, not a run directory; give a run directory (e.g. reports/latest)"
    if (path / "run.json").is_file():
        return None
    if (path / "traces.jsonl").is_file() or any(path.glob("*/traces.jsonl")):
        return (f"{path} is a verifiers output directory (vf-eval -o: traces.jsonl), not a pytest-agentgym run "
                f"directory; for a report of these episodes run the suite through pytest (a suite naming the "
                f"verifiers environment, docs/training.md) and render its reports/<run_id>")
    return (f"{path} has no run.json: it is not a pytest-agentgym run directory; give one that holds run.json "
            f"and episodes.jsonl (e.g. reports/latest)")


def compare_command(args: argparse.Namespace) -> int:
    def run() -> int:
        with reader_warnings("compare"):
            return _compare_runs(args)

    return internal_error("compare", run)


def _compare_runs(args: argparse.Namespace) -> int:
    import json

    from pytest_agentgym.compare import CompareError, compare_runs
    from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir

    reports = Path(args.reports)
    try:
        base = resolve_run_dir(args.base, reports)
        candidate = resolve_run_dir(args.candidate, reports)
        comparison = compare_runs(
            base, candidate, metric=args.metric, margin=args.margin, alpha=args.alpha,
            allow_mismatch=args.allow_mismatch,
            max_error_rate=DEFAULT_MAX_ERROR_RATE if args.max_error_rate is None else args.max_error_rate)
    except (LedgerError, CompareError) as exc:
        print(shown_lines(f"pytest-agentgym compare: {exc}"), file=sys.stderr)
        return 2
    if args.html is not None:
        from pytest_agentgym.report.compare_view import write_compare_html

        written = _write_html("compare", args.html, lambda target: write_compare_html(comparison, target))
        if written is None:
            return 2
        print(f"compare view: {written}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(comparison.to_json(), indent=2, ensure_ascii=False))
    else:
        for mismatch in comparison.mismatches:
            print(shown_lines(f"settings differ (allowed): {mismatch}"))
        print(shown_lines("\n".join(comparison.lines())))
        print(shown_lines(f"compare: {comparison.verdict.upper()} ({comparison.candidate_run_id} against "
                          f"{comparison.base_run_id})"))
    return comparison.exit_code(strict=args.strict)


def _write_html(command: str, path: str, write: Callable[[Path], Path]) -> Path | None:
    """``write(path)`` a page for --html; None after saying on stderr why it could not be written."""
    target = Path(path)
    if target.is_dir():
        print(f"pytest-agentgym {command}: --html {path} is a directory; give the path of the "
              f"page to write (e.g. {target / (command + '.html')})", file=sys.stderr)
        return None
    try:
        return write(target)
    except OSError as exc:
        print(f"pytest-agentgym {command}: cannot write --html {path} ({exc.strerror or exc}); "
              f"give a path in a writable directory", file=sys.stderr)
        return None


def trend_command(args: argparse.Namespace) -> int:
    from pytest_agentgym.compare import CompareError
    from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
    from pytest_agentgym.results.ledger import LedgerError, resolve_run_dir
    from pytest_agentgym.report.trend import build_trend
    from pytest_agentgym.report.trend_page import write_trend_html

    reports = Path(args.reports)
    try:
        runs = [resolve_run_dir(run, reports) for run in args.runs]
        with reader_warnings("trend"):  # each run's skipped lines once, as compare says them
            trend = build_trend(
                runs, metric=args.metric, margin=args.margin, alpha=args.alpha, allow_mismatch=args.allow_mismatch,
                max_error_rate=DEFAULT_MAX_ERROR_RATE if args.max_error_rate is None else args.max_error_rate)
    except (LedgerError, CompareError) as exc:
        print(shown_lines(f"pytest-agentgym trend: {exc}"), file=sys.stderr)
        return 2
    print(shown_lines("\n".join(trend.lines())))
    if args.html is not None:
        written = _write_html("trend", args.html, lambda target: write_trend_html(trend, target))
        if written is None:
            return 2
        print(f"trend page: {written}")
    return trend.exit_code()
