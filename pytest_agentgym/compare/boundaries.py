"""Group-sequential boundaries for the paired test of a drop, exact for its discrete null.

The baseline comparison's test of a drop (compare/judgement.py) is a sign-flip test over
tasks: under "no change" each task's difference ``candidate - baseline`` is as likely with
either sign, and the p-value is P(sum of the randomly signed sizes <= the observed sum).
McNemar's exact test is the case of one 0/1 episode per task (sizes 1 on the discordant
tasks, 0 on the others). Given the sizes ``|d|`` of the tasks in play order, the signs are
independent fair coins, so the sums at the looks form a random walk whose law is known
exactly: this module computes it.

An environment looked at after ``n_1 < n_2 < ... < n_K`` of its ``N`` tasks (in play order)
spends its ``level`` along an O'Brien-Fleming-shaped function (Lan and DeMets):
``spend(t) = 2 - 2 Phi(z_{1-level/2} / sqrt(t))`` at the information fraction ``t = n / N``,
so ``spend(1) = level``. At look ``k`` the boundary ``b_k`` is the largest sum whose walk
paths, among those that crossed no earlier boundary, have null mass at most what
``spend(t_k)`` leaves: the look calls a regression when the sum of its first ``n_k``
differences is ``<= b_k``. A boundary uses only the sizes of the tasks played by its look,
so the chance of a false alarm at any look up to ``k``, given every size, is at most
``spend(t_k)``; averaged over the sizes it still is. The final look gets what the interim
looks left (:attr:`Design.final_level`: the largest nominal p-value the last look may
reject at), which is more than ``level`` minus the interim spend because a path that
crossed early usually ends low too.

When the differences do not lie on one lattice (rewards that are not success fractions),
or the lattice would be too fine, the law is drawn by simulation instead:
:data:`DRAWS` sign vectors from a fixed seed, with each boundary taken where the share of
draws crossing it, one draw added to the hits (as the Monte Carlo p-value does), stays
within the spend.

Plain numbers in and out; numpy is imported when a design is computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

#: Sign vectors drawn when the walk's law cannot be computed on a lattice.
DRAWS = 20_000
#: Their seed: the same differences always give the same boundaries.
SEED = 20_240_611
#: Lattices whose walk would need more cells than this are drawn instead.
LATTICE_CELLS = 2_000_000
#: Null mass below this is taken as zero (floating-point sums of exact probabilities).
SLACK = 1e-12


def obf_spend(t: float, level: float) -> float:
    """The Lan-DeMets O'Brien-Fleming spending function: the one-sided level spent by
    information fraction ``t`` (0 at 0, ``level`` at 1)."""
    if t <= 0:
        return 0.0
    if t >= 1:
        return level
    z = NormalDist().inv_cdf(1 - level / 2)
    return 2 * (1 - NormalDist().cdf(z / math.sqrt(t)))


@dataclass(frozen=True)
class Design:
    """The boundaries of one environment's looks, given the sizes played so far."""

    #: per look: the largest sum that calls a regression (None: no sum can, within the spend)
    bounds: tuple[float | None, ...]
    #: per look: the null mass of the paths that crossed at that look (not before)
    spent: tuple[float, ...]
    #: per look: the nominal one-sided p-value of its boundary, P0(S_k <= b_k) (0: none)
    nominal: tuple[float, ...]
    #: how the law was found: ``exact`` or ``simulated (N draws)``
    how: str

    #: the smallest p-value the last look's test can attain above its nominal level (1 when
    #: none): any level below it rejects no more there than the design does
    final_next: float = 1.0

    @property
    def final_level(self) -> float:
        """The nominal level of the last look: a p-value at most this rejects there."""
        return self.nominal[-1]


def lattice_of(differences: Sequence[float], scales: Sequence[int]) -> tuple[list[int], int] | None:
    """``differences`` as integers on the lattice ``1/L`` (``L`` the least common multiple of
    ``scales``: the repeat counts behind success fractions), and ``L``; None when one is off it."""
    step = math.lcm(*scales) if scales else 1
    ints = [round(d * step) for d in differences]
    if all(abs(i - d * step) < 1e-6 for i, d in zip(ints, differences)):
        return ints, step
    return None


def design(steps: Sequence[Sequence[float]], fractions: Sequence[float], level: float,
           scales: Sequence[int] = (1,)) -> Design:
    """The boundaries of looks ``k = 0..K-1``: ``steps[k]`` holds the absolute differences of
    the tasks that look adds (in play order), ``fractions[k]`` its information fraction
    ``n_k / N`` (the last 1 for the final look), ``level`` the one-sided alpha the design
    spends in all. On the lattice of ``scales`` the law is exact, else simulated."""
    if len(steps) != len(fractions) or not steps:
        raise ValueError("one step of sizes per look, and at least one look")
    spend = [obf_spend(t, level) for t in fractions]
    flat = [abs(d) for step in steps for d in step]
    on = lattice_of(flat, scales)
    if on is not None and 2 * sum(on[0]) + 1 <= LATTICE_CELLS:
        ints, step = on
        cut = 0
        int_steps = []
        for sizes in steps:
            int_steps.append(ints[cut:cut + len(sizes)])
            cut += len(sizes)
        return _exact(int_steps, spend, step)
    return _simulated(steps, spend)


def _binomial_kernel(count: int):  # type: ignore[no-untyped-def]
    """P(j heads of ``count`` fair coins), j = 0..count, in floats from log-gamma."""
    import numpy as np

    j = np.arange(count + 1)
    logs = (math.lgamma(count + 1) - np.array([math.lgamma(x + 1) + math.lgamma(count - x + 1) for x in j])
            - count * math.log(2))
    return np.exp(logs)


def _exact(steps: Sequence[Sequence[int]], spend: Sequence[float], scale: int) -> Design:
    """The walk's law on the integer lattice: ``probs[i]`` is the null mass of sum ``low + i``
    among the paths that crossed no boundary yet."""
    import numpy as np

    probs, low = np.ones(1), 0
    spent_total = 0.0
    bounds: list[float | None] = []
    spent: list[float] = []
    nominal: list[float] = []
    marginal, marginal_low = np.ones(1), 0  # the unrestricted law, for the nominal levels
    for sizes, target in zip(steps, spend):
        counts: dict[int, int] = {}
        for size in sizes:
            if size:
                counts[size] = counts.get(size, 0) + 1
        for size, count in sorted(counts.items()):
            kernel = _binomial_kernel(count)  # sum of count signed sizes: size * (2j - count)
            spread = np.zeros(2 * size * count + 1)
            spread[::2 * size] = kernel
            probs, low = np.convolve(probs, spread), low - size * count
            marginal, marginal_low = np.convolve(marginal, spread), marginal_low - size * count
        cumulative = np.cumsum(probs)
        allowed = target - spent_total + SLACK
        fits = np.nonzero(cumulative <= allowed)[0]
        fits = fits[probs[fits] > 0] if len(fits) else fits
        if len(fits) == 0:
            bounds.append(None)
            spent.append(0.0)
            nominal.append(0.0)
            continue
        cut = int(fits[-1])
        bound = low + cut
        mass = float(cumulative[cut])
        spent_total += mass
        probs = probs.copy()
        probs[:cut + 1] = 0.0
        bounds.append(bound / scale)
        spent.append(mass)
        upto = bound - marginal_low
        nominal.append(float(min(1.0, np.sum(marginal[:upto + 1]))) if upto >= 0 else 0.0)
    last = bounds[-1]
    upto = (int(round(last * scale)) - marginal_low) if last is not None else -1
    above = np.nonzero(marginal[upto + 1:] > 0)[0]
    following = float(min(1.0, np.sum(marginal[:upto + 2 + int(above[0])]))) if len(above) else 1.0
    return Design(tuple(bounds), tuple(spent), tuple(nominal), "exact", following)


def _simulated(steps: Sequence[Sequence[float]], spend: Sequence[float]) -> Design:
    """The walk drawn :data:`DRAWS` times; a boundary counts one hit more than it drew."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    alive = np.ones(DRAWS, dtype=bool)
    sums = np.zeros(DRAWS)
    finals = np.zeros(DRAWS)
    hits_total = 0
    bounds: list[float | None] = []
    spent: list[float] = []
    nominal: list[float] = []
    for sizes, target in zip(steps, spend):
        sizes_arr = np.abs(np.asarray(list(sizes), dtype=float))
        if len(sizes_arr):
            signs = rng.integers(0, 2, size=(DRAWS, len(sizes_arr)), dtype=np.int8) * 2 - 1
            sums = sums + signs @ sizes_arr
        finals = sums
        ordered = np.sort(sums[alive])
        room = math.floor(target * (1 + DRAWS) + 1e-9) - 1 - hits_total  # hits this look may add
        best = None
        if room >= 1 and len(ordered):
            value = ordered[min(room, len(ordered)) - 1]
            if np.searchsorted(ordered, value + 1e-9, side="right") > room:  # ties past the room
                below = int(np.searchsorted(ordered, value - 1e-9, side="left"))
                value = ordered[below - 1] if below else None
            if value is not None:
                best = (float(value), int(np.searchsorted(ordered, value + 1e-9, side="right")))
        if best is None:
            bounds.append(None)
            spent.append(0.0)
            nominal.append(0.0)
            continue
        value, hits = best
        hits_total += hits
        alive &= ~(sums <= value + 1e-9)
        bounds.append(float(value))
        spent.append(hits / DRAWS)
        nominal.append(float((1 + np.sum(finals <= value + 1e-9)) / (1 + DRAWS)))
    # treated as continuous: the final level itself (with none, the smallest drawn p-value)
    following = nominal[-1] if bounds[-1] is not None else 1 / (1 + DRAWS)
    return Design(tuple(bounds), tuple(spent), tuple(nominal), f"simulated ({DRAWS} draws)", following)
