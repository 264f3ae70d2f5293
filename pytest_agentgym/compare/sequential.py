"""Deciding an environment before its last episode (``--agentgym-stop-when-decided``).

A run that compares with a baseline plays each environment's tasks in a seeded
random order (:func:`play_order`), so that the tasks played at any point are a
random sample of the planned ones and the comparison on them estimates the same
change. At a few *looks* (after each eighth of the planned tasks up to three quarters,
:meth:`SequentialPlan.look_points`) the comparison of exactly the first ``n`` tasks
of that order is judged; when it is decided the environment stops, and the rest of
its episodes are not played.

The regression side is a group-sequential test (compare/boundaries.py): each
environment of a family of ``m`` spends ``alpha / m`` along an O'Brien-Fleming-shaped
Lan-DeMets function, with boundaries computed exactly for the discrete test (the
sign-flip walk; McNemar's on 0/1 tasks) given the tasks played by each look. The
final comparison of the environments that play to the end (compare_runs, Holm across
them) runs at :func:`final_alpha`: alpha less what the interim looks spent on paths that
its own first Holm step would not have rejected (computed exactly given the differences
played), and at most ``alpha * (1 - OK_SHARE)``. The ``ok`` side spends ``alpha * OK_SHARE`` over the
interim looks in the same shape (the interval's lower end at look ``k`` errs with
chance half of :meth:`SequentialPlan.ok_alpha`), so a wrong ``ok`` stays at most
alpha / 2 by a union bound. Measured: benchmarks/gates/sequential_study.py.

A threshold gate (``success_rate >= 0.8``) is decided exactly, with no
statistics (:func:`gate_decided`): when no score of the episodes left could
change its outcome.

Plain functions on records; the plugin decides when to look and what to skip.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from pytest_agentgym.compare.boundaries import Design, design, escaped, spend
from pytest_agentgym.compare.pairing import EnvPairs, pair_env
from pytest_agentgym.results.gates import TOLERANCE, Gate
from pytest_agentgym.results.records import EpisodeRecord

Key = tuple[str, int, int]
T = TypeVar("T")

#: The interim looks, as fractions of an environment's planned tasks: after each eighth up to
#: three quarters. Looks at eighths stop a clearly worse checkpoint sooner than looks at quarters;
#: a look at 7/8 would save the fewest episodes and cost the most power (a path that crosses so
#: late often ends above the final level, which then pays for it). Measured with the spending's
#: exponent (boundaries.RHO): benchmarks/gates/sequential_frontier.py.
LOOKS = tuple(k / 8 for k in range(1, 7))
#: The share of alpha the interim ``ok`` looks spend, in all, on their two-sided intervals;
#: the final comparison runs at no more than what is left. Small: at a battery's sizes an
#: interim ``ok`` is rare (it needs a narrow interval early), while every share spent here
#: is taken from the final comparison's power.
OK_SHARE = 0.02


@dataclass(frozen=True)
class SequentialPlan:
    """How the looks of one run spend its alpha."""

    alpha: float
    margin: float
    #: environments compared together (the Holm family of the final comparison)
    n_envs: int = 1
    looks: tuple[float, ...] = LOOKS
    ok_share: float = OK_SHARE

    @property
    def regressed_level(self) -> float:
        """The one-sided alpha each environment's looks (the final one included) spend on a
        regression: its Bonferroni share of the family."""
        return self.alpha / max(1, self.n_envs)

    def ok_alpha(self, fraction: float, before: float = 0.0) -> float:
        """The two-sided level of the interval of a look at information ``fraction`` whose
        previous look was at ``before``: the ``ok`` budget spent in the O'Brien-Fleming shape
        (its lower end errs with chance half of it)."""
        budget = self.alpha * self.ok_share
        return budget * (spend(fraction, self.alpha) - spend(before, self.alpha)) / self.alpha

    @property
    def final_alpha(self) -> float:
        """The most the final comparison may use (what the ``ok`` looks left); the run's
        figure is :func:`final_alpha` of the environments that play to the end."""
        return self.alpha * (1 - self.ok_share)

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


def seeded_order(items: Sequence[T], key_of: Callable[[T], Key | None], seed: int | str) -> list[T]:
    """``items`` with each environment's items in :func:`play_order` of its tasks (all
    repeats of a task together, in repeat order). Each environment keeps the positions
    its items had, so the other environments' items (and anything that is not an
    episode: ``key_of`` gives None) stay where they were."""
    slots: dict[str, list[int]] = {}
    by_env: dict[str, list[T]] = {}
    for position, item in enumerate(items):
        key = key_of(item)
        if key is not None:
            slots.setdefault(key[0], []).append(position)
            by_env.setdefault(key[0], []).append(item)
    ordered = list(items)
    for env, env_items in by_env.items():
        rank = {task: n for n, task in enumerate(play_order((key_of(i)[1] for i in env_items), seed))}
        env_items = sorted(env_items, key=lambda i: (rank[key_of(i)[1]], key_of(i)[2]))
        for position, item in zip(slots[env], env_items):
            ordered[position] = item
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


def _steps(pairs: EnvPairs, order: Sequence[int], points: Sequence[int]) -> list[list[float]]:
    """The differences of the tasks each look adds, in play order (tasks with no matched
    unit add nothing: an error, or not played)."""
    differences = dict(zip(pairs.units, pairs.differences))
    edges = [0, *points]
    return [[differences[t] for t in order[start:stop] if t in differences] for start, stop in zip(edges, edges[1:])]


def regression_design(pairs: EnvPairs, order: Sequence[int], points: Sequence[int], plan: SequentialPlan,
                      planned: int) -> Design:
    """The exact boundaries of looks at ``points`` (counts of tasks in play ``order``; the
    last may be ``planned``, the final look) of an environment of ``planned`` tasks."""
    return design(_steps(pairs, order, points), [p / planned for p in points], plan.regressed_level,
                  scales=pairs.repeat_counts or (1,))


@dataclass(frozen=True)
class FinalLooks:
    """One environment that played to the end, as the final comparison sees it: the
    differences each of its looks added (the last one the final look's), the looks'
    information fractions (the last 1), its lattice, the size of its Holm family in the
    final comparison and the level its looks spend (:attr:`SequentialPlan.regressed_level`)."""

    steps: tuple[tuple[float, ...], ...]
    fractions: tuple[float, ...]
    scales: tuple[int, ...]
    family: int
    level: float


def final_looks(pairs: EnvPairs, order: Sequence[int], plan: SequentialPlan, family: int) -> FinalLooks:
    """:class:`FinalLooks` of an environment whose every planned task (``order``) was played."""
    planned = len(order)
    points = (*plan.look_points(planned), planned)
    return FinalLooks(tuple(tuple(step) for step in _steps(pairs, order, points)),
                      tuple(p / planned for p in points), tuple(pairs.repeat_counts or (1,)), family,
                      plan.regressed_level)


def final_alpha(finals: Sequence[FinalLooks], plan: SequentialPlan, *, stopped: Sequence[float] = ()) -> float:
    """The alpha of the final comparison of the environments that play to the end (``finals``;
    ``stopped``: the levels of the environments of the family that stopped at a look). A false alarm happens at an interim
    look or in the final comparison; the final comparison's first Holm step at ``x`` rejects
    every path whose final p-value is at most ``x / family``, so the interim looks cost it
    only what they spent on paths ending above that (:func:`~pytest_agentgym.compare.
    boundaries.escaped`, exact given the differences), and a stopped environment at most
    what its looks could spend. The answer is the largest ``x`` with ``x`` plus those costs
    at most alpha (found by bisection), and at most :attr:`SequentialPlan.final_alpha`."""
    interim = [spend(f.fractions[-2], f.level) if len(f.fractions) > 1 else 0.0 for f in finals]
    stopped_cost = math.fsum(spend(plan.looks[-1], level) for level in stopped)

    def room(x: float) -> float:  # alpha - costs - x: >= 0 where x is a valid final alpha
        cost = math.fsum(escaped(f.steps, f.fractions, f.level, x / max(1, f.family), f.scales)
                         if len(f.steps) > 1 else 0.0 for f in finals)
        return plan.alpha - stopped_cost - cost - x

    cap = plan.final_alpha
    low = max(0.0, min(cap, plan.alpha - stopped_cost - math.fsum(interim)))  # costs never exceed the spends
    if room(cap) >= 0:
        return cap
    high = cap
    for _ in range(14):
        middle = (low + high) / 2
        if room(middle) >= 0:
            low = middle
        else:
            high = middle
    return low


def decide_against_baseline(env: str, baseline: Sequence[EpisodeRecord], candidate: Sequence[EpisodeRecord],
                            order: Sequence[int], points: Sequence[int], plan: SequentialPlan, *, metric: str,
                            max_error_rate: float) -> tuple[str, str] | None:
    """``(verdict, why)`` when the comparison at the look of ``points[-1]`` tasks (the first
    ones of the play ``order`` of the environment's planned tasks; ``points``: every look
    up to this one) is decided, else None. ``regressed``: a drop larger than the margin
    whose sum of differences crosses the exact O'Brien-Fleming boundary of this look;
    ``ok``: the interval at :meth:`SequentialPlan.ok_alpha`, with every key that errored in
    one run counted against the candidate, lies above -margin. Over the error budget
    nothing is decided."""
    from pytest_agentgym.compare.judgement import _bounds, _error_reason, _estimate

    planned = len(order)
    wanted = set(order[:points[-1]])
    base = [r for r in baseline if r.env == env and r.task_index in wanted]
    cand = [r for r in candidate if r.env == env and r.task_index in wanted]
    pairs = pair_env(env, base, cand, metric)
    if not pairs.units or _error_reason(pairs, max_error_rate) is not None:
        return None
    before = points[-2] / planned if len(points) > 1 else 0.0
    ok_alpha = plan.ok_alpha(points[-1] / planned, before)
    recorded = _estimate(pairs, ok_alpha)
    found = regression_design(pairs, order, points, plan, planned)
    bound = found.bounds[-1]
    if (bound is not None and recorded.ci is not None and math.fsum(pairs.differences) <= bound + 1e-9
            and recorded.delta < -plan.margin - TOLERANCE):
        return "regressed", (f"{metric} fell by {-recorded.delta:.3f} over {len(pairs.units)} paired tasks "
                             f"(p={recorded.p_raw:.2g} <= {found.nominal[-1]:.2g}, the O'Brien-Fleming "
                             f"boundary of the look at {points[-1]} of {planned} tasks, {found.how})")
    worst_case: EnvPairs = pair_env(env, base, cand, metric, against_candidate=_bounds(pairs))
    against = _estimate(worst_case, ok_alpha)
    if plan.margin > 0 and against.ci is not None and against.ci[0] > -plan.margin + TOLERANCE:
        return "ok", (f"the {1 - ok_alpha:.3%} interval [{against.ci[0]:.3f}, {against.ci[1]:.3f}] "
                      f"over {len(worst_case.units)} paired tasks rules out a drop larger than the "
                      f"margin {plan.margin:g} (the look at {points[-1]} of {planned} tasks)")
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
