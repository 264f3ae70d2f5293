"""The error rule of a comparison: when errored episodes leave an environment unjudged, and
what the errors may do to its verdict.

An episode that errored (an infrastructure error, or a reward that is not a finite number)
says nothing about the model, so its key is left out of the test. Two questions remain,
each answered so that an unchanged model with ordinary infrastructure errors does not turn
CI red, while a drop recorded as errors is still caught (docs/compare.md, "Errors cannot
hide a drop"; measured in benchmarks/gates/errors_study.py):

* **The budget** (:func:`budget_reason`): too many errors to judge. A flat share failed
  small environments on chance alone (2 errored keys of 25 are 8%), so the budget is a
  test: the keys that errored in either run are too many when an infrastructure error
  rate of ``max_error_rate`` per run, independent per episode, would leave that many in
  fewer than :data:`BUDGET_LEVEL` of runs.
* **The decision** (:func:`errors_decide`): within the budget, keys that errored in one
  run and scored in the other are judged twice more. *Scored as failures* (the worst
  score in both runs, the baseline's errors too): for an unchanged model whose runs share
  an infrastructure that is a test at level alpha, and a drop recorded as errors is
  judged as played; when it is ``regressed`` (and the recorded one is not) the verdict is
  ``error``: the errors decide it, resume the run to play them. *Counted against the
  candidate* (its errors as the worst score, the baseline's as the best), the worst case
  the errors could hide: when that is worse than the recorded verdict, an ``ok`` or an
  ``inconclusive`` is ``inconclusive`` and says the errors leave it open (CI passes with a
  warning; ``--strict`` fails). An ``ok`` is never given that the errors could take away.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from pytest_agentgym.compare.comparison import ERRORS_OPEN, VERDICTS, EnvComparison
from pytest_agentgym.compare.pairing import EnvPairs, Flip, one_sided_error
from pytest_agentgym.config.tasks import describe_keys
from pytest_agentgym.results.error_budget import BUDGET_LEVEL, binomial_tail, most_errors_allowed  # noqa: F401

#: How the detail of an ``error`` that the errors decide begins.
ERRORS_DECIDE = "the errors decide the verdict"


def either_run_rate(max_error_rate: float) -> float:
    """The chance that a key errs in at least one of two runs, each erring at ``max_error_rate``."""
    return 1.0 - (1.0 - max_error_rate) ** 2


def errors_allowed(keys: int, max_error_rate: float) -> int:
    """The most of ``keys`` paired keys that may error in either run within the budget: the
    largest count that runs erring at ``max_error_rate`` each exceed in more than
    :data:`~pytest_agentgym.results.error_budget.BUDGET_LEVEL` of cases (0 at a budget of 0,
    every key at 1)."""
    return most_errors_allowed(keys, either_run_rate(max_error_rate))


def resume_advice(keys: Sequence[Flip], resume: Mapping[str, str] | None) -> str:
    """What to do about ``keys``' errors: resume the run(s) that hold them, with the command."""
    sides = [side for side, attr in (("candidate", "cand"), ("baseline", "base"))
             if any(getattr(f, attr) == "error" for f in keys)]
    if not resume:
        return "resume the run with the errors (--agentgym-resume) to play them again"
    return "play them again: " + "; ".join(f"resume the {side} with `{resume[side]}`" for side in sides)


def budget_reason(pairs: EnvPairs, max_error_rate: float, resume: Mapping[str, str] | None = None) -> str | None:
    """Why ``pairs``' errors leave the environment unjudged, or None (see the module): more
    errors than the budget allows, or every key in both runs errored in one of them (nothing
    scored to pair, whatever the budget: one errored key of one is within it)."""
    errored = pairs.errored
    both = len(pairs.matched) + len(errored)
    allowed = errors_allowed(both, max_error_rate)
    if errored and not pairs.matched:
        return (f"no episode was scored in both runs: all {both} in both errored in one of them (tasks "
                f"{describe_keys((f.task_index, f.repeat) for f in errored)}), so nothing is left to compare; "
                f"fix the errors (see each run's logs/) and {_advice(errored, resume)}")
    if len(errored) <= allowed:
        return None
    where = describe_keys((f.task_index, f.repeat) for f in errored)
    return (f"{len(errored)} of {both} episodes errored in either run ({len(errored) / both:.1%}; tasks {where}): "
            f"more than an error rate of {max_error_rate:.1%} per run (the error budget) leaves in "
            f"{1 - BUDGET_LEVEL:.0%} of runs (at most {allowed} of {both}); fix the errors (see each run's "
            f"logs/) and {_advice(errored, resume)}")


def _advice(errored: Sequence[Flip], resume: Mapping[str, str] | None) -> str:
    return resume_advice(errored, resume) if resume else "resume the run that has them with --agentgym-resume"


def errors_decide(recorded: EnvComparison, as_failures: EnvComparison, against: EnvComparison,
                  pairs: EnvPairs, resume: Mapping[str, str] | None = None) -> EnvComparison:
    """The verdict when some keys errored in one run and scored in the other (see the
    module): ``error`` when scored as failures in both runs they make it ``regressed`` and
    the recorded verdict is not; ``inconclusive`` (the errors leave it open) when counted
    against the candidate they make an ``ok`` or an ``inconclusive`` worse; else as recorded."""
    rank = VERDICTS.index
    if as_failures.verdict == "regressed" and recorded.verdict != "regressed":
        verdict, decisive, why = "error", as_failures, ERRORS_DECIDE
        how = "scored as failures in both runs"
    elif recorded.verdict in ("ok", "inconclusive") and rank(against.verdict) > rank(recorded.verdict):
        verdict, decisive, why = "inconclusive", against, ERRORS_OPEN
        how = "counted against the candidate"
    else:
        return recorded
    keys = [f for f in pairs.flips if one_sided_error(f)]
    cand_side = sum(1 for f in keys if f.cand == "error")
    where = describe_keys((f.task_index, f.repeat) for f in keys)
    interval = f" [{decisive.ci[0]:.3f}, {decisive.ci[1]:.3f}]" if decisive.ci else ""
    detail = (f"{why}: {len(keys)} episode(s) errored in one run and scored in the other ({cand_side} in the "
              f"candidate; tasks {where}); left out, the verdict is {recorded.verdict}, {how} it is "
              f"{decisive.verdict} (Δ {decisive.delta:+.3f}{interval}): {resume_advice(keys, resume)}")
    return dataclasses.replace(recorded, verdict=verdict, detail=detail, needed_for_margin=None,
                               repeats_for_margin=None)
