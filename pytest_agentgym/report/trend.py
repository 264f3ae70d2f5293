"""Trend: runs across checkpoints, each judged against the previous run and the best so far.

    from pytest_agentgym.report.trend import build_trend
    trend = build_trend(["reports/step-1000", "reports/step-1200", "reports/step-1400"])
    print("\\n".join(trend.lines())); sys.exit(trend.exit_code())

Runs are ordered by their checkpoint's step when every checkpoint path ends in
a number (``ckpt/step-1200``), else by start time. Per environment each run
shows its success rate and mean reward with their 95% intervals (from
:func:`~pytest_agentgym.results.aggregate.summarize`, as the report) and two verdicts
from :func:`~pytest_agentgym.compare.compare_runs`: against the previous run,
and against the best run so far (the earlier run with the highest value of the
metric; of equals, the latest). Each verdict comes from one comparison of two
runs over the environments both hold (for the best so far: those that share
that best run), Holm-adjusted across them, as ``pytest-agentgym compare`` does.
Each run is read once (without its turns) and every comparison starts from what was read.

Only the last run against the previous run decides the exit status
(:meth:`Trend.exit_code`): one comparison, Holm across its environments, so an
unchanged model fails the trend with probability at most alpha however many
checkpoints and environments there are. Earlier steps are shown, not judged
again. The best so far is picked as the highest *observed* value, so the last
run tends to fall short of it by chance (the winner's curse): its verdict is shown as
information and never decides the exit status. benchmarks/gates/trend_calibration.py
measures both rates.

One run of the trend and one row of an environment's trend are
:mod:`~pytest_agentgym.report.trend_data`; the page of ``trend --html`` is
:func:`pytest_agentgym.report.trend_page.write_trend_html`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

from pytest_agentgym.compare import METRICS, CompareError, Comparison, EnvComparison, compare_runs
from pytest_agentgym.compare.runs import LoadedRun, load_run
from pytest_agentgym.report.trend_data import TrendEntry, TrendRun
from pytest_agentgym.report.trend_table import trend_table
from pytest_agentgym.results.aggregate import summarize
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE
from pytest_agentgym.results.records import RunInfo

#: The verdicts of the last run that make ``trend`` exit 1.
FAILING = ("regressed", "error")
_STEP = re.compile(r"(\d+)/*$")


def checkpoint_step(checkpoint: str | None) -> int | None:
    """The number a checkpoint path ends in (``ckpt/step-1200`` -> 1200), else None."""
    match = _STEP.search(checkpoint.strip()) if checkpoint else None
    return int(match.group(1)) if match else None


def _start_time(info: RunInfo, given: str) -> datetime:
    try:
        moment = datetime.fromisoformat(info.started_at)
    except (TypeError, ValueError):
        raise CompareError(f"run {given} has started_at {info.started_at!r} in its run.json, not an ISO "
                           f"time, and its checkpoint gives no step: the runs cannot be ordered; fix "
                           f"run.json or leave the run out") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Trend:
    runs: tuple[TrendRun, ...]
    #: ``checkpoint step`` or ``start time``
    order: str
    #: why the runs are in this order, in words
    order_note: str
    metric: str
    margin: float
    alpha: float
    envs: dict[str, list[TrendEntry]]
    #: settings that differ between two runs compared, let through by allow_mismatch
    mismatches: tuple[str, ...] = ()

    @property
    def last(self) -> TrendRun:
        return self.runs[-1]

    def last_failures(self, env: str | None = None) -> list[str]:
        """``BabyAI: regressed against step-1200 (the previous run)``, one per failing verdict
        of the last run against the previous run (of ``env`` alone when given): the verdicts
        that decide the exit status. The verdict against the best so far is not among them."""
        found = []
        for name, entries in self.envs.items():
            if env is not None and name != env:
                continue
            entry = entries[-1]
            if entry.run is not self.last:
                continue
            judged, other = entry.vs_previous, entry.previous
            if judged is not None and other is not None and judged.verdict in FAILING:
                found.append(f"{name}: {judged.verdict} against {other.run_id} (the previous run)")
        return found

    def best_notes(self) -> list[str]:
        """``BabyAI: regressed against step-1000 (the best so far; informational)``, one per
        environment whose last run is judged regressed (or error) against a best so far that
        is not the previous run. Shown, never deciding the exit status."""
        found = []
        for name, entries in self.envs.items():
            entry = entries[-1]
            if entry.run is not self.last or entry.vs_best is None or entry.best is None:
                continue
            if entry.best is entry.previous or entry.vs_best.verdict not in FAILING:
                continue
            found.append(f"{name}: {entry.vs_best.verdict} against {entry.best.run_id} "
                         f"(the best so far; informational)")
        return found

    def exit_code(self) -> int:
        """1 when the last run regressed (or errored) against the previous run in any
        environment; the best so far never decides it (see the module docstring)."""
        return 1 if self.last_failures() else 0

    def last_judged(self) -> dict[str, EnvComparison]:
        """Per environment of the last run that the previous run also holds: their comparison
        (the one that decides the exit status)."""
        return {name: entries[-1].vs_previous for name, entries in self.envs.items()
                if entries[-1].run is self.last and entries[-1].vs_previous is not None}

    def verdict_line(self) -> str:
        """One short line: OK or REGRESSED, and how many environments decided it (the
        environments themselves are :meth:`last_run_lines`, one line each)."""
        if len(self.runs) == 1:
            return f"trend: OK ({self.last.run_id} is the only run)"
        judged = self.last_judged()
        counts = [(verdict, sum(1 for c in judged.values() if c.verdict == verdict)) for verdict in FAILING]
        if any(n for _, n in counts):
            said = ", ".join(f"{verdict} in {n}" for verdict, n in counts if n)
            return (f"trend: REGRESSED ({self.last.run_id} against {self.runs[-2].run_id}, the previous run: "
                    f"{said} of {len(judged)} environment{'s' if len(judged) != 1 else ''})")
        return f"trend: OK ({self.last.run_id} did not regress against the previous run)"

    def last_run_lines(self) -> list[str]:
        """The comparison that decides the exit status, one line per environment (compare's line:
        the two values, Δ with its interval, the verdict), or why an environment is not judged.
        Empty for a trend of one run."""
        if len(self.runs) == 1:
            return []
        last, previous = self.last, self.runs[-2]
        out = [f"{last.run_id} against {previous.run_id}, the previous run (this decides the exit status):"]
        for name, entries in self.envs.items():
            entry = entries[-1]
            if entry.run is not last:
                if name in previous.summaries:
                    out.append(f"  {name}: not in {last.run_id}; not judged")
            elif entry.vs_previous is None:
                out.append(f"  {name}: not in {previous.run_id}; not judged")
            else:
                out.append(f"  {entry.vs_previous.line()}")
        return out

    def lines(self) -> list[str]:
        """The terminal output: the order, one table per environment, the last run against
        the previous run (one line per environment), the verdict in one short line."""
        out = [f"trend: {len(self.runs)} run(s) ordered by {self.order} ({self.order_note}); "
               f"{self.metric}, margin {self.margin:g}, alpha {self.alpha:g}"]
        out += [f"settings differ (allowed): {line}" for line in self.mismatches]
        for env, entries in self.envs.items():
            out += ["", env, *trend_table(entries)]
        notes = self.best_notes()
        if notes:
            out += ["", "against the best so far (picked as the highest observed value, so a drop is "
                        "expected by chance; does not decide the exit status):", *(f"  {n}" for n in notes)]
        last = self.last_run_lines()
        return out + ["", *last, self.verdict_line()]


def load_trend_runs(paths: Sequence[str | Path]) -> tuple[list[TrendRun], str, str]:
    """The runs in trend order, with the order's name and the reason for it."""
    runs, order, note, _ = _load_runs(paths)
    return runs, order, note


def _load_runs(paths: Sequence[str | Path]) -> tuple[list[TrendRun], str, str, list[LoadedRun]]:
    """:func:`load_trend_runs`, and each run as read (in the same order): every run is read
    once, and compared from what was read."""
    if not paths:
        raise CompareError("give at least one run directory")
    seen: dict[Path, str] = {}
    runs = []
    for given in paths:
        loaded = load_run(given, "run")
        where = loaded.path.resolve()
        if where in seen:
            raise CompareError(f"run {given} is given twice (also as {seen[where]}); give each run once")
        seen[where] = str(given)
        runs.append((TrendRun(str(given), loaded.path, loaded.info, summarize(loaded.records),
                              checkpoint_step(loaded.info.checkpoint)), loaded))
    stepless = [r for r, _ in runs if r.step is None]
    if not stepless:
        runs.sort(key=lambda pair: pair[0].step)  # stable: equal steps keep the order given
        order, note = "checkpoint step", "every checkpoint path ends in a number"
    else:
        times = {id(r): _start_time(r.info, r.given) for r, _ in runs}
        runs.sort(key=lambda pair: times[id(pair[0])])
        named = ", ".join(f"{r.run_id} ({r.info.checkpoint or 'no checkpoint'})" for r in stepless[:3])
        more = f" and {len(stepless) - 3} more" if len(stepless) > 3 else ""
        order, note = "start time", f"no step number in the checkpoint of {named}{more}"
    return [r for r, _ in runs], order, note, [loaded for _, loaded in runs]


def build_trend(paths: Sequence[str | Path], *, metric: str = "success", margin: float = 0.05,
                alpha: float = 0.05, allow_mismatch: bool = False,
                max_error_rate: float = DEFAULT_MAX_ERROR_RATE) -> Trend:
    """Read, order and judge the runs (see the module docstring). Raises
    :class:`~pytest_agentgym.compare.CompareError` for bad input: a path that is not
    a run directory with results, a run given twice, a bad option, runs whose
    settings differ (unless ``allow_mismatch``)."""
    if metric not in METRICS:
        raise CompareError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    for name, value, low_open in (("margin", margin, False), ("alpha", alpha, True)):
        inside = 0 < value < 1 if low_open else 0 <= value < 1  # compare_runs refuses margin 1 too
        if not inside:
            raise CompareError(f"{name} must be a number in {'(0, 1)' if low_open else '[0, 1)'}, not {value!r}")
    runs, order, note, loaded = _load_runs(paths)
    cache: dict[tuple[int, int, tuple[str, ...]], Comparison] = {}

    def judged(base: int, cand: int, envs: Iterable[str]) -> Comparison:
        key = (base, cand, tuple(sorted(envs)))
        if key not in cache:
            cache[key] = compare_runs(loaded[base], loaded[cand], metric=metric, margin=margin,
                                      alpha=alpha, allow_mismatch=allow_mismatch,
                                      max_error_rate=max_error_rate, envs=key[2])
        return cache[key]

    names = list(dict.fromkeys(env for run in runs for env in run.summaries))
    entries: dict[str, list[TrendEntry]] = {env: [] for env in names}
    for number, run in enumerate(runs):
        previous = runs[number - 1] if number else None
        shared = [env for env in run.summaries if previous is not None and env in previous.summaries]
        against_previous = judged(number - 1, number, shared).environments if shared else {}
        against_best: dict[str, tuple[int, EnvComparison]] = {}
        groups: dict[int, list[str]] = {}
        for env in run.summaries:
            best = _best_before(runs, number, env, metric)
            if best == number - 1 and env in against_previous:
                against_best[env] = (best, against_previous[env])  # the same comparison, said once
            elif best is not None:
                groups.setdefault(best, []).append(env)
        against_best.update({env: (best, judged(best, number, group).environments[env])
                             for best, group in groups.items() for env in group})
        for env in names:
            if env not in run.summaries:
                continue
            best, vs_best = against_best.get(env, (None, None))
            entries[env].append(TrendEntry(
                run, run.summaries[env], vs_previous=against_previous.get(env),
                previous=previous if env in against_previous else None,
                vs_best=vs_best, best=runs[best] if best is not None else None))
    mismatches = dict.fromkeys(f"{runs[base].run_id} -> {runs[cand].run_id}: {line}"
                               for (base, cand, _), comparison in cache.items() for line in comparison.mismatches)
    return Trend(tuple(runs), order, note, metric, margin, alpha, entries, tuple(mismatches))


def _best_before(runs: Sequence[TrendRun], number: int, env: str, metric: str) -> int | None:
    """The earlier run with the highest value of ``metric`` for ``env`` (of equals, the latest)."""
    scored = [(run.value(env, metric), n) for n, run in enumerate(runs[:number])
              if run.value(env, metric) is not None]
    return max(scored)[1] if scored else None
