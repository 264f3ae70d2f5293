"""Group-sequential boundaries for the paired test of a drop, exact for its discrete null.

The baseline comparison's test of a drop (compare/judgement.py) is a sign-flip test over
tasks: under "no change" each task's difference ``candidate - baseline`` is as likely with
either sign, and the p-value is P(sum of the randomly signed sizes <= the observed sum).
McNemar's exact test is the case of one 0/1 episode per task (sizes 1 on the discordant
tasks, 0 on the others). Given the sizes ``|d|`` of the tasks in play order, the signs are
independent fair coins, so the sums at the looks form a random walk whose law is known
exactly: this module computes it.

An environment looked at after ``n_1 < n_2 < ... < n_K`` of its ``N`` tasks (in play order)
spends its ``level`` along an O'Brien-Fleming-shaped spending function (Lan and DeMets'
approach, Kim and DeMets' power family): ``spend(t) = level * t^4`` at the information
fraction ``t = n / N``, so ``spend(1) = level``. At look ``k`` the boundary ``b_k`` is the
largest sum whose walk paths, among those that crossed no earlier boundary, have null mass at most what
``spend(t_k)`` leaves: the look calls a regression when the sum of its first ``n_k``
differences is ``<= b_k``. A boundary uses only the sizes of the tasks played by its look,
so the chance of a false alarm at any look up to ``k``, given every size, is at most
``spend(t_k)``; averaged over the sizes it still is. The final look gets what the interim
looks left: :func:`escaped` is the null mass of the paths that crossed at an interim look
and yet end above the final test's level, the only part of the interim spend the final
comparison must give up (a path that crossed early usually ends low too).

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
from typing import Sequence

from pytest_agentgym.compare.exact import half_binomial_pmfs
from pytest_agentgym.compare.statistics import on_lattice

#: Sign vectors drawn when the walk's law cannot be computed on a lattice.
DRAWS = 20_000
#: Their seed: the same differences always give the same boundaries.
SEED = 20_240_611
#: Lattices whose walk would need more cells than this are drawn instead.
LATTICE_CELLS = 2_000_000
#: Null mass below this is taken as zero (floating-point sums of exact probabilities).
SLACK = 1e-12
#: The exponent of the spending function (Kim and DeMets 1987; 3 is close to O'Brien-Fleming's).
#: 4 with looks at each eighth up to 3/4 (compare/sequential.LOOKS): on BabyAI's 90 tasks, 4,000
#: batteries a cell (benchmarks/gates/sequential_frontier.py), it plays about as many episodes at
#: 20- and 30-point drops as 3 with looks at quarters did and loses less power against the
#: fixed-size comparison (at most 0.8 points against 1.0).
RHO = 4.0


def spend(t: float, level: float) -> float:
    """The one-sided level spent by information fraction ``t``: ``level * t ** RHO`` (0 at 0,
    ``level`` at 1), the power family of Kim and DeMets, O'Brien-Fleming-shaped (little early)."""
    return level * min(1.0, max(0.0, t)) ** RHO


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

    @property
    def final_level(self) -> float:
        """The nominal level of the last look: a p-value at most this rejects there."""
        return self.nominal[-1]


def lattice_of(differences: Sequence[float], scales: Sequence[int]) -> tuple[list[int], int] | None:
    """``differences`` as integers on the lattice ``1/L`` (``L`` the least common multiple of
    ``scales``: the repeat counts behind success fractions), and ``L``; None when one is off it."""
    ints = on_lattice(differences, scales)
    return None if ints is None else (ints, math.lcm(*scales) if scales else 1)


def design(steps: Sequence[Sequence[float]], fractions: Sequence[float], level: float,
           scales: Sequence[int] = (1,)) -> Design:
    """The boundaries of looks ``k = 0..K-1``: ``steps[k]`` holds the absolute differences of
    the tasks that look adds (in play order), ``fractions[k]`` its information fraction
    ``n_k / N`` (the last 1 for the final look), ``level`` the one-sided alpha the design
    spends in all. On the lattice of ``scales`` the law is exact, else simulated."""
    if len(steps) != len(fractions) or not steps:
        raise ValueError("one step of sizes per look, and at least one look")
    spent_by = [spend(t, level) for t in fractions]
    flat = [abs(d) for step in steps for d in step]
    on = lattice_of(flat, scales)
    if on is not None and 2 * sum(on[0]) + 1 <= LATTICE_CELLS:
        ints, step = on
        cut = 0
        int_steps = []
        for sizes in steps:
            int_steps.append(ints[cut:cut + len(sizes)])
            cut += len(sizes)
        return _exact(int_steps, spent_by, step)
    return _simulated(steps, spent_by)


def _binomial_kernel(count: int):  # type: ignore[no-untyped-def]
    """P(j heads of ``count`` fair coins), j = 0..count (compare/exact.py's Binomial(n, 1/2))."""
    import numpy as np

    return np.array(half_binomial_pmfs(count))


def _exact(steps: Sequence[Sequence[int]], targets: Sequence[float], scale: int) -> Design:
    """The walk's law on the integer lattice: ``probs[i]`` is the null mass of sum ``low + i``
    among the paths that crossed no boundary yet."""
    import numpy as np

    probs, low = np.ones(1), 0
    spent_total = 0.0
    bounds: list[float | None] = []
    spent: list[float] = []
    nominal: list[float] = []
    marginal, marginal_low = np.ones(1), 0  # the unrestricted law, for the nominal levels
    for sizes, target in zip(steps, targets):
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
    return Design(tuple(bounds), tuple(spent), tuple(nominal), "exact")


def _simulated(steps: Sequence[Sequence[float]], targets: Sequence[float]) -> Design:
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
    for sizes, target in zip(steps, targets):
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
    return Design(tuple(bounds), tuple(spent), tuple(nominal), f"simulated ({DRAWS} draws)")


def escaped(steps: Sequence[Sequence[float]], fractions: Sequence[float], level: float, threshold: float,
            scales: Sequence[int] = (1,)) -> float:
    """The null mass of the paths that crossed an interim boundary of :func:`design` and end
    with a final p-value above ``threshold``: what the interim looks spent outside the final
    test's rejection region at ``threshold``. ``steps`` and ``fractions`` as for
    :func:`design`, the last of them the final look (fraction 1), whose boundary is not used."""
    import numpy as np

    interim = design(steps[:-1], fractions[:-1], level, scales) if len(steps) > 1 else None
    if interim is None or all(b is None for b in interim.bounds):
        return 0.0
    flat = [abs(d) for step in steps for d in step]
    on = lattice_of(flat, scales)
    if on is not None and 2 * sum(on[0]) + 1 <= LATTICE_CELLS:
        ints, scale = on
        alive, crossed, low, cut = np.ones(1), np.zeros(1), 0, 0
        for k, sizes in enumerate(steps):
            for size in ints[cut:cut + len(sizes)]:
                if size:
                    spread = np.zeros(2 * size + 1)
                    spread[0] = spread[-1] = 0.5
                    alive, crossed, low = np.convolve(alive, spread), np.convolve(crossed, spread), low - size
            cut += len(sizes)
            if k < len(steps) - 1 and interim.bounds[k] is not None:
                upto = int(round(interim.bounds[k] * scale)) - low
                if upto >= 0:
                    crossed[:upto + 1] += alive[:upto + 1]
                    alive[:upto + 1] = 0.0
        p_values = np.cumsum(alive + crossed)  # the final test's p-value at each sum
        return float(np.sum(crossed[p_values > threshold * (1 + 1e-12) + 1e-15]))
    rng = np.random.default_rng(SEED)
    sums, crossed = np.zeros(DRAWS), np.zeros(DRAWS, dtype=bool)
    for k, sizes in enumerate(steps):
        sizes_arr = np.abs(np.asarray(list(sizes), dtype=float))
        if len(sizes_arr):
            signs = rng.integers(0, 2, size=(DRAWS, len(sizes_arr)), dtype=np.int8) * 2 - 1
            sums = sums + signs @ sizes_arr
        if k < len(steps) - 1 and interim.bounds[k] is not None:
            crossed |= sums <= interim.bounds[k] + 1e-9
    ordered = np.sort(sums)
    p_values = (1 + np.searchsorted(ordered, sums + 1e-9, side="right")) / (1 + DRAWS)
    return float(np.mean(crossed & (p_values > threshold)))
