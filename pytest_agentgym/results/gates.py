"""Aggregate gates: per-environment thresholds and comparison with a baseline run.

A suite declares gates such as ``mean_reward >= 0.5`` or ``success_rate >= 0.8``
per environment. Each gate gives a :class:`GateVerdict`: ``passed``, ``failed``,
or ``error`` when more of the environment's episodes ended in errors than its
error budget allows (``max_error_rate``, default 0.05, as a binomial test:
results/error_budget.py): a rate computed on the few episodes that scored says
nothing about the model. Within the budget a gate is judged on the scored episodes,
unless the errors decide it (:func:`errors_decide`): then it is an ``error`` too. The comparison with a
baseline run (pytest_agentgym.compare, wired in verdicts.py) gives verdicts of
the same shape, and one more outcome: ``inconclusive``. Any verdict but
``passed`` (and ``inconclusive`` unless gates are strict) fails the run.

Comparisons forgive a difference of 1e-9, so that a success rate of 17/20 meets
``>= 0.85`` although the two are different floating-point numbers in general.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from pytest_agentgym.results.aggregate import EnvSummary
from pytest_agentgym.results.error_budget import BUDGET_LEVEL, most_errors_allowed

METRICS = ("mean_reward", "success_rate")
_GATE = re.compile(r"^\s*(mean_reward|success_rate)\s*(>=|>|<=|<|==)\s*(-?\d+(?:\.\d+)?)\s*$")
#: Within this of each other, a value and a threshold count as equal.
TOLERANCE = 1e-9
_OPS = {
    ">=": lambda v, t: v >= t - TOLERANCE,
    ">": lambda v, t: v > t + TOLERANCE,
    "<=": lambda v, t: v <= t + TOLERANCE,
    "<": lambda v, t: v < t - TOLERANCE,
    "==": lambda v, t: abs(v - t) <= TOLERANCE,
}
#: The rate of infrastructure errors per episode an environment's error budget
#: allows (suite key and node limit ``max_error_rate``; the budget is a test at it).
DEFAULT_MAX_ERROR_RATE = 0.05


#: The outcome of every gate of a run that stopped before all its episodes were played.
NOT_JUDGED = "not-judged"


class GateError(ValueError):
    """A gate that cannot be parsed; the message shows the accepted form."""


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> "Gate":
        match = _GATE.match(str(text))
        if not match:
            raise GateError(
                f"gate {text!r} is not of the form '<metric> <op> <number>' with metric one of "
                f"{', '.join(METRICS)} and op one of >=, >, <=, <, == (e.g. 'success_rate >= 0.8')"
            )
        metric, op, number = match.groups()
        return cls(metric, op, float(number))

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class GateVerdict:
    env: str
    gate: str
    value: float | None
    passed: bool
    detail: str
    #: passed, failed, error (the error budget was exceeded: the gate was not judged),
    #: inconclusive (a baseline comparison with too little data; passed unless gates are
    #: strict), or not-judged (the run stopped before all its episodes were played)
    outcome: str = ""

    def __post_init__(self) -> None:
        if not self.outcome:
            object.__setattr__(self, "outcome", "passed" if self.passed else "failed")

    @property
    def word(self) -> str:
        """How the terminal names it: GATE PASSED, GATE FAILED, GATE ERROR, GATE NOT JUDGED."""
        return f"GATE {self.outcome.upper().replace('-', ' ')}"

    def not_judged(self, why: str) -> "GateVerdict":
        """This gate on a partial run: no value, not passed, ``why`` says how far the run got."""
        return GateVerdict(self.env, self.gate, None, False, why, outcome=NOT_JUDGED)

    def to_dict(self) -> dict:
        return asdict(self)


def error_budget_exceeded(summary: EnvSummary, max_error_rate: float) -> str | None:
    """Why ``summary``'s environment cannot be judged, or None when its errors fit the
    budget: at most as many as episodes erring at ``max_error_rate`` leave in 99% of runs
    (:func:`~pytest_agentgym.results.error_budget.most_errors_allowed`; 4 of 25, 10 of 90 at
    5%), so ordinary infrastructure errors do not fail a run on chance alone (issue 40)."""
    if summary.episodes == 0:
        return None
    allowed = most_errors_allowed(summary.episodes, max_error_rate)
    if summary.errors <= allowed:
        return None
    return (f"only {summary.scored} of {summary.episodes} episodes scored ({summary.errors} error(s), "
            f"{summary.errors / summary.episodes:.1%}): more than an error rate of {max_error_rate:.1%} per "
            f"episode (the error budget) leaves in {1 - BUDGET_LEVEL:.0%} of runs (at most {allowed} of "
            f"{summary.episodes}); the gate cannot be judged: fix the errors (see the error items and logs/) "
            f"and resume the run")


def errors_decide(gate: Gate, summary: EnvSummary, max_error_rate: float, resume: str | None = None) -> str | None:
    """Why ``gate``, met by ``summary``'s scored episodes within the error budget, is
    decided by the errors instead (or None): the errored episodes beyond the
    ``episodes * max_error_rate`` the budget's rate expects, counted as the gate's failures
    (no success and the lowest reward of the range for ``>=``/``>``, the opposite for
    ``<=``/``<``, either for ``==``; the expected ones at the scored value), miss it. So
    failures recorded as errors cannot lift a rate over its floor (issue 40); the expected
    share is what keeps ordinary errors from failing runs: counting every error fails an
    unchanged run at a floor near its rate 8 points more often at 3% errors
    (benchmarks/gates/errors_study.py --study gates). ``resume``: the command that resumes
    the run (results/resumption.py), named in the reason."""
    value = getattr(summary, gate.metric)
    expected = math.floor(summary.episodes * max_error_rate + TOLERANCE)
    counted = summary.errors - expected
    if value is None or counted <= 0 or not _OPS[gate.op](value, gate.threshold):
        return None
    low, high = (0.0, 1.0) if gate.metric == "success_rate" else (summary.reward_range or (value, value))
    kept = value * (summary.scored + expected)
    for extreme in (low, high):
        worst = (kept + counted * extreme) / (summary.scored + summary.errors)
        if not _OPS[gate.op](worst, gate.threshold):
            how = f"`{resume}`" if resume else "the run's command with --agentgym-resume=<its run directory>"
            return (f"the errors decide this gate: {gate.metric} = {value:.3f} on the {summary.scored} scored of "
                    f"{summary.episodes} episodes meets {gate.op} {gate.threshold:g}, but {summary.errors} errored; "
                    f"counting the {counted} beyond the {expected} an error rate of {max_error_rate:.1%} per episode "
                    f"expects as failures gives {worst:.3f}, which misses it: fix the errors (see the error items "
                    f"and logs/) and resume the run: {how}")
    return None


def check_env(summary: EnvSummary, gates: tuple[Gate, ...], max_error_rate: float,
              resume: str | None = None) -> list[GateVerdict]:
    """The verdicts of one environment's gates. Over the error budget every gate is
    an ``error``; with no gate at all, the budget itself is reported as one. Within it, a
    gate the errors decide (:func:`errors_decide`) is an ``error`` too."""
    reason = error_budget_exceeded(summary, max_error_rate)
    if reason is None:
        verdicts = []
        for gate in gates:
            verdict = check(gate, summary)
            decided = errors_decide(gate, summary, max_error_rate, resume) if verdict.passed else None
            verdicts.append(verdict if decided is None else
                            GateVerdict(summary.env, str(gate), verdict.value, False, decided, outcome="error"))
        return verdicts
    names = [str(g) for g in gates] or [f"error_rate <= {max_error_rate:g}"]
    rate = summary.errors / summary.episodes
    return [GateVerdict(summary.env, name, rate, False, reason, outcome="error") for name in names]


def check(gate: Gate, summary: EnvSummary) -> GateVerdict:
    value = getattr(summary, gate.metric)
    if value is None:
        return GateVerdict(
            summary.env, str(gate), None, False,
            f"no scored episode of {summary.env} ({summary.errors} error(s)); the gate cannot be judged",
            outcome="error",
        )
    passed = _OPS[gate.op](value, gate.threshold)
    return GateVerdict(
        summary.env, str(gate), value, passed,
        f"{gate.metric} = {value:.3f} ({'meets' if passed else 'misses'} {gate.op} {gate.threshold:g})",
    )
