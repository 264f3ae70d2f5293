"""Pairing two runs' episodes of one environment by (task, repeat).

Each key's state in each run is ``pass`` (the episode succeeded by its
environment's rule), ``fail``, ``error`` (an infrastructure error, or a reward
that is not a finite number: nothing to score) or ``missing`` (the run has no
such key). The keys scored in both runs are *matched*; the test and the
interval use only those, with the repeats of a task averaged into one paired
unit per task. A key that errored in either run is counted, never dropped
silently.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

from pytest_agentgym.results.records import EpisodeRecord

METRICS = ("success", "reward")
#: The states a key can have in one run.
STATES = ("pass", "fail", "error", "missing")


@dataclass(frozen=True)
class Flip:
    """One (task, repeat) key of one environment, as each run left it.

    ``base`` / ``cand``: ``pass``, ``fail``, ``error`` or ``missing``; for both
    metrics pass means success by the environment's rule (the reward metric
    compares ``base_reward`` and ``cand_reward``)."""

    task_index: int
    repeat: int
    base: str
    cand: str
    base_reward: float | None
    cand_reward: float | None

    @property
    def matched(self) -> bool:
        return self.base in ("pass", "fail") and self.cand in ("pass", "fail")

    @property
    def errored(self) -> bool:
        """Present in both runs and errored in at least one."""
        return "missing" not in (self.base, self.cand) and "error" in (self.base, self.cand)


def state(record: EpisodeRecord | None) -> str:
    if record is None:
        return "missing"
    if record.error is not None or record.reward is None or not math.isfinite(record.reward):
        return "error"
    return "pass" if record.success else "fail"


def _value(flip_state: str, reward: float | None, metric: str) -> float:
    return (1.0 if flip_state == "pass" else 0.0) if metric == "success" else float(reward)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EnvPairs:
    """The paired view of one environment."""

    env: str
    metric: str
    flips: tuple[Flip, ...]
    #: task -> (baseline values, candidate values) of its matched keys, repeat order
    units: dict[int, tuple[tuple[float, ...], tuple[float, ...]]]
    #: the baseline's variance of one episode within a task, averaged (see baseline_variance)
    baseline_variance: float | None

    @cached_property
    def _matched(self) -> tuple[Flip, ...]:
        return tuple(f for f in self.flips if f.matched)

    @cached_property
    def _errored(self) -> tuple[Flip, ...]:
        return tuple(f for f in self.flips if f.errored)

    @property
    def matched(self) -> list[Flip]:
        return list(self._matched)  # computed once (pair_env leaves it ready), a new list each time

    @property
    def errored(self) -> list[Flip]:
        return list(self._errored)

    @property
    def paired_keys(self) -> int:
        """Keys behind the units: the matched ones, and with ``errors_as`` the errored keys
        paired with a value (Tango's interval counts these, not only the matched)."""
        return sum(len(b) for b, _ in self.units.values())

    @property
    def only_base(self) -> int:
        return sum(1 for f in self.flips if f.cand == "missing" and f.base != "missing")

    @property
    def only_cand(self) -> int:
        return sum(1 for f in self.flips if f.base == "missing" and f.cand != "missing")

    @property
    def differences(self) -> list[float]:
        """Per task, candidate mean - baseline mean over its matched repeats."""
        return [math.fsum(c) / len(c) - math.fsum(b) / len(b) for b, c in self.units.values()]

    def mean(self, side: int) -> float | None:
        """Metric over the matched units, each task weighing one (0: baseline, 1: candidate)."""
        if not self.units:
            return None
        return math.fsum(math.fsum(u[side]) / len(u[side]) for u in self.units.values()) / len(self.units)

    @property
    def repeats(self) -> int:
        """Matched repeats per task (the most common count)."""
        counts = [len(b) for b, _ in self.units.values()]
        return max(set(counts), key=counts.count) if counts else 1

    @property
    def repeat_counts(self) -> list[int]:
        return sorted({len(b) for b, _ in self.units.values()})

    @property
    def binary(self) -> bool:
        """Success metric and one key per task: every unit is a single pass or fail."""
        return self.metric == "success" and all(len(b) == 1 for b, _ in self.units.values())

    def discordant(self) -> tuple[int, int]:
        """(pass->fail, fail->pass) over the matched keys."""
        matched = self.matched
        return (sum(1 for f in matched if f.base == "pass" and f.cand == "fail"),
                sum(1 for f in matched if f.base == "fail" and f.cand == "pass"))


def baseline_variance(records: Sequence[EpisodeRecord], metric: str) -> float | None:
    """The baseline's variance of one episode's metric within a task, averaged over
    its tasks: each task's sample variance over its scored repeats (unbiased) where
    tasks have two or more; with one repeat a task cannot show it, and the variance
    across all scored episodes is used instead (for success: the Bernoulli variance
    p(1 - p) of the pooled rate), which bounds it from above."""
    by_task: dict[int, list[float]] = defaultdict(list)
    for record in records:
        flip_state = state(record)
        if flip_state in ("pass", "fail"):
            by_task[record.task_index].append(_value(flip_state, record.reward, metric))
    return _averaged_variance(by_task, metric)


def _averaged_variance(by_task: dict[int, list[float]], metric: str) -> float | None:
    """baseline_variance of the scored values grouped by task."""
    values = [v for vs in by_task.values() for v in vs]
    if not values:
        return None
    repeated = [vs for vs in by_task.values() if len(vs) >= 2]
    if repeated:
        return math.fsum(_sample_variance(vs) for vs in repeated) / len(repeated)
    if metric == "success":
        rate = math.fsum(values) / len(values)
        return rate * (1 - rate)
    return _sample_variance(values) if len(values) >= 2 else 0.0


def _sample_variance(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def pair_env(env: str, base: Iterable[EpisodeRecord], cand: Iterable[EpisodeRecord],
             metric: str, *, against_candidate: tuple[float, float] | None = None,
             errors_as: tuple[float, float] | None = None) -> EnvPairs:
    """Pair one environment's current records of the two runs.

    ``errors_as``: ``(candidate's, baseline's)`` values given to a key that errored in
    one run and scored in the other, which is then paired too: the candidate's value
    where the candidate errored, the baseline's where the baseline did (see
    :mod:`~pytest_agentgym.compare.error_rule`). ``against_candidate``: ``(worst, best)``
    values of the metric, the same as ``errors_as=(worst, best)``: each such key counted
    against the candidate, the worst case the errors could hide. Keys that errored in
    both runs are left out either way."""
    if against_candidate is not None:
        errors_as = against_candidate
    base_by_key = {(r.task_index, r.repeat): r for r in base if r.env == env}
    cand_by_key = {(r.task_index, r.repeat): r for r in cand if r.env == env}
    success = metric == "success"
    flips, matched, errored = [], [], []
    units: dict[int, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    scored: dict[int, list[float]] = {}  # task -> the baseline's scored values (baseline_variance)
    # One pass over the keys in order: a task's keys are adjacent, so its unit is complete
    # (and made tuples) when the next task begins.
    task, unit_b, unit_c = None, [], []
    for key in sorted(base_by_key.keys() | cand_by_key.keys()):
        b, c = base_by_key.get(key), cand_by_key.get(key)
        b_state, c_state = state(b), state(c)
        b_reward, c_reward = (b.reward if b else None), (c.reward if c else None)
        flip = _new_flip(key[0], key[1], b_state, c_state, b_reward, c_reward)
        flips.append(flip)
        b_scored, c_scored = b_state in _SCORED, c_state in _SCORED
        if b_scored:
            scored.setdefault(key[0], []).append(
                (1.0 if b_state == "pass" else 0.0) if success else float(b_reward))  # type: ignore[arg-type]
        if flip.matched:  # Flip's own rules, so the pairing and the report's flips agree
            matched.append(flip)
        elif flip.errored:
            errored.append(flip)
            if errors_as is None or not (b_scored or c_scored):
                continue
        else:
            continue
        if key[0] != task:
            if unit_b:
                units[task] = (tuple(unit_b), tuple(unit_c))  # type: ignore[index]
            task, unit_b, unit_c = key[0], [], []
        unit_b.append(errors_as[1] if b_state == "error" else _value(b_state, b_reward, metric))  # type: ignore[index]
        unit_c.append(errors_as[0] if c_state == "error" else _value(c_state, c_reward, metric))  # type: ignore[index]
    if unit_b:
        units[task] = (tuple(unit_b), tuple(unit_c))  # type: ignore[index]
    pairs = EnvPairs(env=env, metric=metric, flips=tuple(flips), units=units,
                     baseline_variance=_averaged_variance(scored, metric))
    vars(pairs).update(_matched=tuple(matched), _errored=tuple(errored))  # the cached properties, ready
    return pairs


_SCORED = ("pass", "fail")
_new = object.__new__


def _new_flip(task_index: int, repeat: int, base: str, cand: str, base_reward: float | None,
              cand_reward: float | None) -> Flip:
    """``Flip(...)`` without the frozen dataclass's ``__init__`` (one per key: the most
    frequent object of a large comparison); equal to it in every way."""
    flip = _new(Flip)
    vars(flip).update(task_index=task_index, repeat=repeat, base=base, cand=cand,
                      base_reward=base_reward, cand_reward=cand_reward)
    return flip


def one_sided_error(flip: Flip) -> bool:
    """The key errored in one run and was scored in the other."""
    return {flip.base, flip.cand} in ({"error", "pass"}, {"error", "fail"})
