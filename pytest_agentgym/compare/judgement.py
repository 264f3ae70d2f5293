"""compare_runs: a candidate run judged against a baseline run, per environment.

Per environment: pair the keys (:mod:`~pytest_agentgym.compare.pairing`), test
for a drop and estimate the change with its interval
(:mod:`~pytest_agentgym.compare.statistics`), adjust the p-values across the
environments with a step-down for discrete tests (Holm's, charging each
environment only what its exact test can attain), and give one of four verdicts:

* ``error``: no key was scored in both runs, or the keys that errored in either
  run exceed the error budget, or (within it) the errors decide the verdict: counted
  against the candidate they would make it ``regressed`` (:func:`_errors_decide`; an
  ``ok`` they could turn into a possible drop is ``inconclusive``);
* ``regressed``: the adjusted p < alpha, delta < -margin and there is an
  interval (never without one: too few tasks give ``inconclusive``);
* ``ok``: the interval's lower end > -margin (a drop larger than the margin is ruled out);
* ``inconclusive``: neither; ``needed_for_margin`` says how many paired tasks would do.

Comparisons with the margin forgive :data:`TOLERANCE`, so that representation
noise (0.020 - 0.070 = -0.05000000000000001) never flips a verdict.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from pytest_agentgym.results.aggregate import mixed_models, shipped_reward_ranges
from pytest_agentgym.compare import statistics as stats
from pytest_agentgym.compare.comparison import Comparison, EnvComparison, worst
from pytest_agentgym.compare.error import CompareError
from pytest_agentgym.compare.error_rule import budget_reason, errors_decide
from pytest_agentgym.compare.pairing import METRICS, EnvPairs, one_sided_error, pair_env
from pytest_agentgym.compare.runs import LoadedRun, load_run, unreadable_note
from pytest_agentgym.compare.settings_check import settings_differences
from pytest_agentgym.config.tasks import describe_keys
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE, TOLERANCE
from pytest_agentgym.results.records import EpisodeRecord
from pytest_agentgym.results.resumption import resume_command
from pytest_agentgym.results.store import RunDir


@dataclasses.dataclass(frozen=True)
class _Estimate:
    """One environment's figures before Holm."""

    base_value: float
    cand_value: float
    delta: float
    ci: tuple[float, float] | None
    p_raw: float
    method: str
    #: the p-values the test can attain on these tasks (None: treated as continuous)
    support: tuple[float, ...] | None = None


def _number(value: object, name: str, low: float, high: float, *, open_low: bool = False,
            open_high: bool = False, why: str = "") -> float:
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
    number = float(value) if ok_type else math.nan  # type: ignore[arg-type]
    inside = (math.isfinite(number) and (number > low if open_low else number >= low)
              and (number < high if open_high else number <= high))
    if not inside:
        span = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise CompareError(f"{name} must be a number in {span}, not {value!r}{why if number >= high else ''}")
    return number


def _select_envs(base: LoadedRun, cand: LoadedRun, envs: Iterable[str] | None) -> list[str]:
    present = list(dict.fromkeys([r.env for r in base.records] + [r.env for r in cand.records]))
    if envs is None:
        return present
    wanted = list(dict.fromkeys(envs))
    unknown = [e for e in wanted if e not in present]
    if unknown:
        raise CompareError(f"environment(s) {', '.join(unknown)} are in neither run; the runs hold "
                           f"{', '.join(present) or 'none'}")
    return wanted


def _only(info_fingerprint: dict, names: list[str]) -> dict:
    envs = info_fingerprint.get("envs") or {}
    return {**info_fingerprint, "envs": {k: v for k, v in envs.items() if k in names}} if envs else info_fingerprint


def _zero_one(pairs: EnvPairs) -> bool:
    """Every matched value is exactly 0 or 1 (success always; reward when it is binary)."""
    return all(v in (0.0, 1.0) for b, c in pairs.units.values() for v in (*b, *c))


def _discordant(pairs: EnvPairs) -> tuple[int, int]:
    """(1 -> 0, 0 -> 1) over the matched keys of 0/1 values (pass->fail, fail->pass)."""
    drops = gains = 0
    for b, c in pairs.units.values():
        for x, y in zip(b, c):
            drops += x == 1.0 and y == 0.0
            gains += x == 0.0 and y == 1.0
    return drops, gains


def _reward_span(pairs: EnvPairs) -> float:
    """The reward's range: the shipped range of the environment when known, else the
    span of the rewards seen in both runs, at least 1."""
    if pairs.env in shipped_reward_ranges():
        low, high = shipped_reward_ranges()[pairs.env]
        return high - low
    values = [v for b, c in pairs.units.values() for v in (*b, *c)]
    return max(1.0, max(values) - min(values)) if values else 1.0


def _bounds(pairs: EnvPairs) -> tuple[float, float]:
    """(worst, best) value of the metric: 0 and 1 for success; for the reward the shipped
    range when known, else the lowest and highest reward either run scored."""
    if pairs.metric == "success":
        return 0.0, 1.0
    if pairs.env in shipped_reward_ranges():
        low, high = shipped_reward_ranges()[pairs.env]
        return float(low), float(high)
    rewards = [r for f in pairs.flips for r in (f.base_reward, f.cand_reward)
               if r is not None and math.isfinite(r)]
    return (min(rewards), max(rewards)) if rewards else (0.0, 1.0)


def _estimate(pairs: EnvPairs, alpha: float) -> _Estimate:
    """The test and the interval of one environment. Below
    :func:`~pytest_agentgym.compare.statistics.fewest_units_for_sign_flip` paired tasks no
    interval is claimed on any path (no exact two-sided test can reject there), so a drop
    there is ``inconclusive`` whether the values are 0/1 or continuous."""
    estimate = _estimate_any(pairs, alpha)
    if len(pairs.units) < stats.fewest_units_for_sign_flip(alpha) and estimate.ci is not None:
        return dataclasses.replace(estimate, ci=None)
    return estimate


def _estimate_any(pairs: EnvPairs, alpha: float) -> _Estimate:
    base_value, cand_value = pairs.mean(0), pairs.mean(1)
    assert base_value is not None and cand_value is not None
    delta = cand_value - base_value
    differences = pairs.differences
    level = f"{1 - alpha:.0%}"
    zero_one = pairs.metric == "success" or _zero_one(pairs)
    of = "" if pairs.metric == "success" else " (rewards all 0 or 1: the success path on reward == 1)"
    single = all(len(b) == 1 for b, _ in pairs.units.values())
    if zero_one and single:
        drops, gains = _discordant(pairs)
        ci = stats.paired_score_interval(drops, gains, pairs.paired_keys, alpha)
        return _Estimate(base_value, cand_value, delta, ci, stats.mcnemar_drop_p(drops, gains),
                         f"exact McNemar ({drops} pass->fail, {gains} fail->pass); "
                         f"{level} Tango score interval{of}", stats.mcnemar_support(drops + gains))
    if zero_one:
        p_raw, how, support = stats.sign_flip_test(differences, lattice=pairs.repeat_counts)
        drops, gains = _discordant(pairs)
        low, high = stats.paired_score_interval(drops, gains, pairs.paired_keys, alpha)
        by_task = stats.t_interval(differences, alpha)
        if by_task is not None:
            low, high = max(-1.0, min(low, by_task[0])), min(1.0, max(high, by_task[1]))
        return _Estimate(base_value, cand_value, delta, (low, high), p_raw,
                         f"sign-flip test over tasks, {how}; {level} interval: Tango score over "
                         f"episodes joined with Student t over tasks{of}", support)
    p_raw, how, support = stats.sign_flip_test(differences)
    span = _reward_span(pairs)
    ci = stats.floored_t_interval(differences, alpha, span, limit=span)
    return _Estimate(base_value, cand_value, delta, ci, p_raw,
                     f"sign-flip test over tasks, {how}; {level} Student t interval over tasks, "
                     f"half-width at least {span:g} z^2/(n + z^2)", support)


def _error_reason(pairs: EnvPairs, max_error_rate: float, resume: Mapping[str, str] | None = None) -> str | None:
    """Why the environment cannot be judged: nothing in both runs, or errors over the
    budget (:func:`~pytest_agentgym.compare.error_rule.budget_reason`); None when it can."""
    if len(pairs.matched) + len(pairs.errored) == 0:
        if pairs.only_base and not pairs.only_cand:
            return "not in the candidate run: nothing to compare"
        if pairs.only_cand and not pairs.only_base:
            return "not in the baseline run: nothing to compare"
        return "no episode is in both runs: nothing to compare"
    return budget_reason(pairs, max_error_rate, resume)


def _family(pairs: dict[str, EnvPairs], reasons: dict[str, str | None], *, margin: float,
            alpha: float) -> dict[str, EnvComparison]:
    """Judge every environment of one comparison: the test and interval of each, the
    p-values stepped down across them (discrete Holm), then each verdict."""
    estimates = {env: _estimate(p, alpha) for env, p in pairs.items() if reasons[env] is None}
    adjusted = stats.discrete_holm({env: e.p_raw for env, e in estimates.items()},
                                   {env: e.support for env, e in estimates.items()})
    return {env: _judge(p, estimates.get(env), adjusted.get(env), reasons[env], margin=margin, alpha=alpha)
            for env, p in pairs.items()}


def _judge(pairs: EnvPairs, estimate: _Estimate | None, p_value: float | None, reason: str | None, *,
           margin: float, alpha: float) -> EnvComparison:
    common = dict(env=pairs.env, metric=pairs.metric, n_matched=len(pairs.matched),
                  n_errors=len(pairs.errored), n_only_base=pairs.only_base, n_only_cand=pairs.only_cand,
                  margin=margin, flips=pairs.flips, n_tasks=len(pairs.units))
    if estimate is None:
        return EnvComparison(verdict="error", base_value=pairs.mean(0), cand_value=pairs.mean(1),
                             delta=None, ci=None, p_value=None, p_raw=None, needed_for_margin=None,
                             detail=reason or "", method="", **common)
    e, ci = estimate, estimate.ci
    needed = repeats_for_margin = None
    interval = f"the {1 - alpha:.0%} interval [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "no interval"
    if ci is not None and p_value is not None and p_value < alpha and e.delta < -margin - TOLERANCE:
        verdict = "regressed"
        detail = (f"{pairs.metric} fell by {-e.delta:.3f} over {len(pairs.units)} paired tasks: the drop "
                  f"is significant (p={p_value:.2g} after Holm, alpha {alpha:g}) and larger than the "
                  f"margin {margin:g}; {interval}")
    elif ci is not None and ci[0] > -margin + TOLERANCE:
        verdict = "ok"
        detail = f"{interval} rules out a drop larger than the margin {margin:g}"
        if p_value is not None and p_value < alpha and e.delta < 0:
            detail += f"; a drop of {-e.delta:.3f} is significant (p={p_value:.2g}) but within the margin"
    else:
        verdict = "inconclusive"
        needed = None if pairs.baseline_variance is None else stats.tasks_needed(
            pairs.baseline_variance, pairs.repeats, margin, alpha,
            binary=pairs.metric == "success" or _zero_one(pairs), differences=pairs.differences)
        if ci is None:
            why = (f"{len(pairs.units)} paired task(s) are too few for an interval (an exact test "
                   f"needs {stats.fewest_units_for_sign_flip(alpha)})")
        elif e.delta < -margin - TOLERANCE:
            why = (f"the drop of {-e.delta:.3f} is larger than the margin {margin:g} but not "
                   f"significant (p={p_value:.2g} after Holm); {interval}")
        else:
            why = f"{interval} reaches below -{margin:g}: a drop larger than the margin is not ruled out"
        more = ""
        if margin <= 0:
            more = ("; no finite sample can show ok at margin 0 (ok needs the whole interval above 0); "
                    "give a margin > 0 to ask whether a drop is small enough")
        elif needed is not None and needed > len(pairs.units):
            more = (f"; about {needed} paired tasks (at {pairs.repeats} repeat(s)) would settle it "
                    f"(80% chance of ok for an unchanged candidate)")
            repeats_for_margin = stats.repeats_needed(
                pairs.baseline_variance or 0.0, pairs.repeats, margin, alpha, len(pairs.units),
                binary=pairs.metric == "success" or _zero_one(pairs), differences=pairs.differences)
            if repeats_for_margin is not None:
                more += f", or {repeats_for_margin} repeats of the {len(pairs.units)} tasks"
        detail = why + more
    if pairs.errored:
        detail += (f"; {len(pairs.errored)} episode(s) errored in either run and were left out "
                   f"(tasks {describe_keys((f.task_index, f.repeat) for f in pairs.errored)})")
    if pairs.only_base or pairs.only_cand:
        detail += f"; {pairs.only_base + pairs.only_cand} episode(s) in one run only were left out"
    return EnvComparison(verdict=verdict, base_value=e.base_value, cand_value=e.cand_value, delta=e.delta,
                         ci=ci, p_value=p_value, p_raw=e.p_raw, needed_for_margin=needed, detail=detail,
                         method=e.method, repeats_for_margin=repeats_for_margin, **common)


def compare_runs(base: str | Path | RunDir | LoadedRun, candidate: str | Path | RunDir | LoadedRun, *,
                 metric: str = "success",
                 margin: float = 0.05, alpha: float = 0.05, allow_mismatch: bool = False,
                 max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
                 envs: Iterable[str] | None = None) -> Comparison:
    """Judge ``candidate`` against ``base`` (run directories, or runs read already by
    :func:`~pytest_agentgym.compare.runs.load_run`: trend reads each run once), per environment.

    Raises :class:`CompareError` for a path that is not a readable run directory
    with results, a metric other than ``success``/``reward``, a margin outside
    [0, 1) (at 1 no verdict could mean anything), an alpha outside (0, 1), and, unless ``allow_mismatch``, runs whose
    settings differ (each difference on its own line; with ``allow_mismatch`` the
    comparison carries them in ``mismatches``)."""
    if metric not in METRICS:
        raise CompareError(f"metric {metric!r} is not one of {', '.join(METRICS)}")
    margin = _number(margin, "margin", 0.0, 1.0, open_high=True,
                     why="; no change is a drop larger than 1 of a success rate or of a [0, 1] reward, so at "
                         "margin 1 nothing could be regressed (and ok would say nothing)")
    alpha = _number(alpha, "alpha", 0.0, 1.0, open_low=True, open_high=True)
    max_error_rate = _number(max_error_rate, "max_error_rate", 0.0, 1.0)
    base_run, cand_run = load_run(base, "baseline"), load_run(candidate, "candidate")
    if base_run.path.resolve() == cand_run.path.resolve():
        raise CompareError(f"baseline and candidate are the same run directory ({base_run.path}); "
                           f"give two different runs")
    names = _select_envs(base_run, cand_run, envs)
    base_keys = {k for k in base_run.keys if k[0] in names}
    cand_keys = {k for k in cand_run.keys if k[0] in names}
    base_info = dataclasses.replace(base_run.info, fingerprint=_only(base_run.info.fingerprint, names))
    mismatches = settings_differences(base_info, base_keys, _only(cand_run.info.fingerprint, names),
                                      cand_keys, cand_run.version)
    if mismatches and not allow_mismatch:
        raise CompareError(
            f"the baseline ({base_run.given}) and the candidate ({cand_run.given}) were not run the same "
            f"way; these settings change what an episode means:\n  - " + "\n  - ".join(mismatches)
            + "\nrun the candidate with the baseline's settings, or compare anyway with "
              "--allow-mismatch (pytest: --agentgym-allow-mismatch)")
    resume = {"baseline": resume_command(base_run.info, base_run.path),
              "candidate": resume_command(cand_run.info, cand_run.path)}
    environments = judge_records(base_run.records, cand_run.records, names, metric=metric, margin=margin,
                                 alpha=alpha, max_error_rate=max_error_rate, resume=resume)
    for env, judged in environments.items():  # errored keys that are lines no reader could read
        note = unreadable_note(env, judged.flips, base_run, cand_run)
        if note:
            environments[env] = dataclasses.replace(judged, detail=f"{judged.detail}; {note}")
    return Comparison(base=base_run.given, candidate=cand_run.given, base_run_id=base_run.info.run_id,
                      candidate_run_id=cand_run.info.run_id, metric=metric, margin=margin, alpha=alpha,
                      verdict=worst([e.verdict for e in environments.values()]),
                      environments=environments, mismatches=tuple(mismatches), runs=(base_run, cand_run))


def judge_records(base: Sequence[EpisodeRecord], cand: Sequence[EpisodeRecord], names: Sequence[str], *,
                  metric: str, margin: float, alpha: float, max_error_rate: float,
                  resume: Mapping[str, str] | None = None) -> dict[str, EnvComparison]:
    """The verdict of each environment of ``names``: the current records of the two runs
    paired, the error budget, the family judged with the step-down, then the error rule
    (:mod:`~pytest_agentgym.compare.error_rule`) where a key errored in one run and scored
    in the other. ``resume``: ``baseline``/``candidate`` -> the command that resumes that
    run, named in the verdicts the errors leave open. compare_runs is this on two run
    directories; the calibration studies call it on records in memory."""
    pairs = {env: pair_env(env, base, cand, metric) for env in names}
    reasons = {env: _error_reason(p, max_error_rate, resume) for env, p in pairs.items()}
    for side, records in (("baseline", base), ("candidate", cand)):
        for env, why in mixed_models(r for r in records if r.env in names).items():
            reasons[env] = reasons[env] or f"the {side} run's {why}"  # a rate over two models is neither's
    environments = _family(pairs, reasons, margin=margin, alpha=alpha)
    hiding = [env for env, p in pairs.items()
              if reasons[env] is None and any(one_sided_error(f) for f in p.flips)]
    if not hiding:
        return environments

    def judged_with(scored: str) -> dict[str, EnvComparison]:
        """The family with the hiding environments' one-sided errors given values: both the
        worst (``failures``), or the candidate's the worst and the baseline's the best."""
        repaired = {}
        for env, p in pairs.items():
            low, high = _bounds(p)
            repaired[env] = (pair_env(env, base, cand, metric, errors_as=(low, low if scored == "failures" else high))
                             if env in hiding else p)
        return _family(repaired, reasons, margin=margin, alpha=alpha)

    as_failures, against = judged_with("failures"), judged_with("against the candidate")
    for env in hiding:
        environments[env] = errors_decide(environments[env], as_failures[env], against[env], pairs[env], resume)
    return environments
