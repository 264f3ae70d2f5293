"""Deciding an environment before its last episode (``--agentgym-stop-when-decided``).

A run that compares with a baseline plays each environment's tasks in a seeded
random order (:func:`play_order`), so that the tasks played at any point are a
random sample of the planned ones and the comparison on them estimates the same
change. At a few *looks* (after 1/4, 1/2 and 3/4 of the planned tasks,
:meth:`SequentialPlan.look_points`) the comparison so far is judged with a small
share of alpha; when it is decided the environment stops, and the rest of its
episodes are not played. The looks spend alpha by a union bound (a Bonferroni
split over the looks, in the manner of Haybittle and Peto): each interim look may
call a regression at ``alpha * share / m`` (``m`` environments compared together)
and ``ok`` with an interval whose lower end errs with chance ``alpha * share / 2``;
the final comparison of the environments that played to the end uses what is
left, ``alpha * (1 - looks * share)`` (0.047 at alpha 0.05). However the looks
fall, the chance of a false alarm over the whole run stays at most alpha, and the
chance of a wrong ``ok`` at most alpha / 2, as for the fixed-size comparison; the
price is the slightly smaller final alpha. Measured:
benchmarks/gates/gate_calibration.py --sequential.

A threshold gate (``success_rate >= 0.8``) is decided exactly, with no
statistics (:func:`gate_decided`): when no score of the episodes left could
change its outcome.

Plain functions on records; the plugin decides when to look and what to skip.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pytest_agentgym.compare.pairing import EnvPairs, pair_env
from pytest_agentgym.results.gates import TOLERANCE, Gate
from pytest_agentgym.results.records import EpisodeRecord

#: The interim looks, as fractions of an environment's planned tasks.
LOOKS = (0.25, 0.5, 0.75)
#: The share of alpha each interim look spends: on a regression (one-sided), and on an
#: ``ok`` (its two-sided interval, so half of it on the side that matters).
SHARE = 0.02


@dataclass(frozen=True)
class SequentialPlan:
    """How the looks of one run spend its alpha."""

    alpha: float
    margin: float
    #: environments compared together (the Holm family of the final comparison)
    n_envs: int = 1
    looks: tuple[float, ...] = LOOKS
    share: float = SHARE

    @property
    def regressed_level(self) -> float:
        """The raw one-sided p-value an interim look needs to call a regression."""
        return self.alpha * self.share / max(1, self.n_envs)

    @property
    def ok_alpha(self) -> float:
        """The two-sided level of the interval an interim look needs above -margin (its
        lower end errs with chance half of it)."""
        return self.alpha * self.share

    @property
    def final_alpha(self) -> float:
        """The alpha of the final comparison of the environments that played to the end:
        what the looks left on the regression side (alpha - looks * alpha * share), which
        also leaves the final interval's lower end alpha / 2 minus what the looks spent."""
        return self.alpha * (1 - len(self.looks) * self.share)

    def look_points(self, planned_tasks: int) -> tuple[int, ...]:
        """The numbers of completed tasks at which an environment of ``planned_tasks`` is
        looked at (each fewer than all of them)."""
        points = {math.ceil(f * planned_tasks - 1e-9) for f in self.looks}
        return tuple(sorted(p for p in points if 0 < p < planned_tasks))


def play_order(tasks: Iterable[int], seed: int | str) -> list[int]:
    """``tasks`` in the seeded random order an environment plays them in when it may
    stop early: any prefix is a random sample of the tasks, so the comparison after
    a prefix estimates the change over all of them. The same seed gives the same order."""
    ordered = sorted(set(tasks))
    random.Random(f"agentgym-stop-when-decided:{seed}").shuffle(ordered)
    return ordered


@dataclass(frozen=True)
class Decision:
    """An environment decided before its last planned episode."""

    env: str
    #: ``regressed`` or ``ok`` (the baseline comparison), ``failed`` or ``passed`` (its gates)
    verdict: str
    #: completed tasks and recorded episodes when it was decided
    tasks: int
    episodes: int
    planned_tasks: int
    planned_episodes: int
    #: one sentence: what was decided on which figures
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "tasks": self.tasks, "episodes": self.episodes,
                "planned_tasks": self.planned_tasks, "planned_episodes": self.planned_episodes,
                "why": self.why}

    @property
    def line(self) -> str:
        """``BabyAI stopped after 45 of 90 tasks (45 of 90 episodes): regressed: ...``"""
        return (f"{self.env} stopped after {self.tasks} of {self.planned_tasks} tasks "
                f"({self.episodes} of {self.planned_episodes} episodes): {self.verdict}: {self.why}")


def completed_tasks(records: Sequence[EpisodeRecord], planned: dict[int, int]) -> list[int]:
    """Tasks of ``planned`` (task -> repeats) whose every repeat has a record."""
    seen: dict[int, set[int]] = {}
    for r in records:
        seen.setdefault(r.task_index, set()).add(r.repeat)
    return [t for t, repeats in planned.items() if len(seen.get(t, ())) >= repeats]


def decide_against_baseline(env: str, baseline: Sequence[EpisodeRecord], candidate: Sequence[EpisodeRecord],
                            tasks: Sequence[int], plan: SequentialPlan, *, metric: str,
                            max_error_rate: float) -> tuple[str, str] | None:
    """``(verdict, why)`` when the comparison on ``tasks`` (completed by the candidate)
    is decided at an interim look, else None. ``regressed``: a drop larger than the
    margin, significant at :attr:`SequentialPlan.regressed_level`; ``ok``: the
    interval at :attr:`SequentialPlan.ok_alpha`, with every key that errored in one
    run counted against the candidate, lies above -margin. Over the error budget
    nothing is decided."""
    from pytest_agentgym.compare.judgement import _bounds, _error_reason, _estimate

    wanted = set(tasks)
    base = [r for r in baseline if r.env == env and r.task_index in wanted]
    cand = [r for r in candidate if r.env == env and r.task_index in wanted]
    pairs = pair_env(env, base, cand, metric)
    if not pairs.units or _error_reason(pairs, max_error_rate) is not None:
        return None
    recorded = _estimate(pairs, plan.ok_alpha)
    if (recorded.ci is not None and recorded.p_raw <= plan.regressed_level
            and recorded.delta < -plan.margin - TOLERANCE):
        return "regressed", (f"{metric} fell by {-recorded.delta:.3f} over {len(pairs.units)} paired tasks "
                             f"(p={recorded.p_raw:.2g} <= {plan.regressed_level:.2g}, the level of an "
                             f"interim look)")
    worst_case: EnvPairs = pair_env(env, base, cand, metric, against_candidate=_bounds(pairs))
    against = _estimate(worst_case, plan.ok_alpha)
    if plan.margin > 0 and against.ci is not None and against.ci[0] > -plan.margin + TOLERANCE:
        return "ok", (f"the {1 - plan.ok_alpha:.1%} interval [{against.ci[0]:.3f}, {against.ci[1]:.3f}] "
                      f"over {len(worst_case.units)} paired tasks rules out a drop larger than the "
                      f"margin {plan.margin:g}")
    return None


def gate_decided(gate: Gate, values: Sequence[float], remaining: int, low: float, high: float) -> bool | None:
    """Whether ``gate`` passes whatever the ``remaining`` episodes score, given the
    scored ``values`` so far (rewards, or 1/0 for success) and the range [low, high]
    one episode can score: True (passes either way), False (fails either way), None
    (still open). The gate's value on the played episodes alone then has the same
    outcome (for <, <=, >, >=), so it can be judged on them. ``==`` is never decided early."""
    if gate.op == "==" or not values:
        return None
    total = len(values) + remaining
    lowest = (math.fsum(values) + remaining * low) / total
    highest = (math.fsum(values) + remaining * high) / total
    holds = {">=": lambda v: v >= gate.threshold - TOLERANCE, ">": lambda v: v > gate.threshold + TOLERANCE,
             "<=": lambda v: v <= gate.threshold + TOLERANCE, "<": lambda v: v < gate.threshold - TOLERANCE}[gate.op]
    at_low, at_high = holds(lowest), holds(highest)
    return at_low if at_low == at_high else None
