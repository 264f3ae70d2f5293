"""The statistics of a paired comparison: the test for a drop, the interval of the
change, Holm's adjustment and the sample size a margin needs.

Every function takes plain numbers (per-task differences, counts of discordant
keys) and returns plain numbers. No scipy: the normal quantile is the standard
library's, the exact discrete distributions are compare/exact.py's (linear time at any
size, 1e-12 relative to the exact sums), roots are found by bisection and
the t quantile comes from a t distribution function computed here (scipy cost
the command line ~12 s of start-up for those four numbers). numpy is imported
when a sign-flip test runs, never at import time. Why these methods, and how well they are calibrated, is in
docs/compare.md.

Signs: a difference is ``candidate - baseline``, so a drop is negative.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Sequence

from pytest_agentgym.compare.exact import half_binomial_tails, half_binomial_upper_tail, lattice_sign_flip

from pytest_agentgym.results.distributions import (  # noqa: F401 - part of this module's API
    beta_quantile,
    bisect_root,
    regularized_beta,
    t_cdf,
    t_quantile,
)

#: Monte Carlo draws of the sign-flip test when it cannot be enumerated.
SIGN_FLIP_DRAWS = 20_000
#: Seed of those draws: the same runs always give the same p-value.
SIGN_FLIP_SEED = 20_240_611
#: Up to this many nonzero differences off a lattice, the sign flips are enumerated.
ENUMERATE_UP_TO = 16
#: Lattice tests whose distribution would need more cells than this use Monte Carlo.
LATTICE_CELLS = 2_000_000
#: Two numbers closer than this count as equal (representation noise).
EPS = 1e-9


# -- the test for a drop --------------------------------------------------------------------


def mcnemar_drop_p(pass_to_fail: int, fail_to_pass: int) -> float:
    """One-sided exact McNemar p-value for a drop: under "no change" each discordant
    key is pass->fail with probability 1/2; p = P(at least ``pass_to_fail`` of them)."""
    discordant = pass_to_fail + fail_to_pass
    if discordant == 0:
        return 1.0
    return binomial_upper_tail(pass_to_fail, discordant)


def binomial_upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), in O(n) (compare/exact.py; its tails are
    cached, so the support of the same test costs nothing more)."""
    return half_binomial_upper_tail(k, n)


def on_lattice(values: Sequence[float], scales: Sequence[int]) -> list[int] | None:
    """``values`` as integers on the smallest lattice ``1/L`` (``L`` the least common
    multiple of ``scales``) when they all lie on it, else None."""
    step = math.lcm(*scales) if scales else 1
    ints = [round(v * step) for v in values]
    if all(abs(i - v * step) < 1e-6 for i, v in zip(ints, values)):
        return ints
    return None


def sign_flip_drop_p(differences: Sequence[float], lattice: Sequence[int] = ()) -> tuple[float, str]:
    """One-sided p-value of the sign-flip permutation test for a drop, and how it was
    computed (:func:`sign_flip_test` without the attainable p-values)."""
    p, how, _ = sign_flip_test(differences, lattice)
    return p, how


def sign_flip_test(differences: Sequence[float], lattice: Sequence[int] = ()
                   ) -> tuple[float, str, tuple[float, ...] | None]:
    """One-sided p-value of the sign-flip permutation test for a drop, how it was
    computed, and the p-values the test can attain on these tasks (None when it is
    drawn by Monte Carlo: then it is treated as continuous). Under "no change" every
    task's difference is as likely with either sign; p = P(sum of randomly signed
    |d| <= observed sum).

    ``lattice``: the repeat counts behind the differences (success fractions k/m);
    when every difference is a multiple of 1/lcm(lattice) the null distribution is
    computed exactly by convolution. Otherwise the signs are enumerated when at
    most :data:`ENUMERATE_UP_TO` differences are nonzero, else drawn
    :data:`SIGN_FLIP_DRAWS` times with a fixed seed (p = (1 + hits) / (1 + draws)).
    """
    import numpy as np

    nonzero = [d for d in differences if abs(d) > EPS]
    if not nonzero:
        return 1.0, "exact (no task changed)", (1.0,)
    ints = on_lattice(nonzero, lattice) if lattice else None
    if ints is not None and sum(abs(i) for i in ints) * 2 + 1 <= LATTICE_CELLS:
        p, support = lattice_sign_flip(ints)
        return p, "exact", support
    sizes = np.abs(np.asarray(nonzero, dtype=float))
    observed = float(np.sum(nonzero))
    tolerance = EPS * max(1.0, float(sizes.sum()))
    if len(sizes) <= ENUMERATE_UP_TO:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(sizes))))
        sums = np.sort(signs @ sizes)
        # P(S <= s) at each attainable s, ties within the tolerance counted together
        support = tuple(sorted({float(np.searchsorted(sums, s + tolerance, side="right")) / len(sums)
                                for s in sums}))
        return float(np.mean(sums <= observed + tolerance)), "exact (enumerated)", support
    rng = np.random.default_rng(SIGN_FLIP_SEED)
    hits, rows = 0, _draw_rows(len(sizes))
    for start in range(0, SIGN_FLIP_DRAWS, rows):  # in blocks: 20,000 x tasks at once took gigabytes
        signs = rng.integers(0, 2, size=(min(rows, SIGN_FLIP_DRAWS - start), len(sizes)), dtype=np.int8) * 2 - 1
        hits += int(np.sum(signs @ sizes <= observed + tolerance))
    return (1 + hits) / (1 + SIGN_FLIP_DRAWS), f"Monte Carlo ({SIGN_FLIP_DRAWS} draws)", None


#: Sign-flip draws are made this many signs at a time (the same draws as all at once).
DRAW_BLOCK = 1 << 22


def _draw_rows(tasks: int) -> int:
    """Draws per block: a multiple of 4 so that the blocks consume the generator's 32-bit
    words exactly as one draw of every sign would (the same p-value)."""
    return max(4, (DRAW_BLOCK // max(tasks, 1)) // 4 * 4)


def mcnemar_support(discordant: int) -> tuple[float, ...]:
    """The p-values the exact McNemar test can attain with ``discordant`` discordant keys,
    in O(discordant) (it summed every tail in integers: 31.7 s at 1,000 keys)."""
    return tuple(sorted(set(half_binomial_tails(discordant))))


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of a family of p-values (one per environment): the
    k-th smallest is multiplied by (m - k + 1), and adjusted values never decrease
    along that order; capped at 1."""
    return discrete_holm(p_values, {})


def attainable_below(support: Sequence[float] | None, t: float) -> float:
    """F(t) = P(p <= t) under "no change" for a test whose attainable p-values are
    ``support``: the largest attainable value that is at most ``t`` (0 when none is).
    A test without a support (None) is taken as continuous: F(t) = t."""
    if support is None:
        return min(t, 1.0)
    at = bisect.bisect_right(support, t * (1 + 1e-12) + 1e-15)  # support is sorted
    return support[at - 1] if at else 0.0


def discrete_holm(p_values: dict[str, float], supports: dict[str, Sequence[float] | None]) -> dict[str, float]:
    """Holm's step-down for discrete tests (Westfall and Wolfinger's discrete
    Bonferroni, stepped down): the k-th smallest p-value is adjusted to the sum,
    over the hypotheses not yet rejected (itself and the larger ones), of the
    chance each test's p-value falls at or below it under "no change"
    (:func:`attainable_below`); adjusted values never decrease along that order;
    capped at 1. An environment whose exact test cannot reach small p-values (few
    changed tasks) costs the others nothing below its smallest attainable value,
    where Holm charges it a full share. With no support given (continuous tests)
    this is Holm's adjustment exactly. Its false-alarm rate and power against Holm:
    benchmarks/gates/gate_calibration.py --holm."""
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    running, adjusted = 0.0, {}
    for rank, (name, p) in enumerate(ordered):
        spent = math.fsum(attainable_below(supports.get(other), p) for other, _ in ordered[rank:])
        running = max(running, min(1.0, spent))
        adjusted[name] = running
    return adjusted


# -- the interval of the change ----------------------------------------------------------------


#: Below this alpha the quantiles are taken from the lower tail: 1 - alpha/2 loses alpha's
#: digits and is 1.0 below about 1.1e-16 (where the normal quantile raised StatisticsError).
SMALL_ALPHA = 1e-6


def _z(alpha: float) -> float:
    """The two-sided normal quantile z_{1 - alpha/2}, for any alpha in (0, 1)."""
    from statistics import NormalDist

    if alpha >= SMALL_ALPHA:
        return NormalDist().inv_cdf(1 - alpha / 2)
    return -NormalDist().inv_cdf(max(alpha / 2, math.ulp(0.0)))


def _t(alpha: float, df: float) -> float:
    """Student's two-sided quantile t_{1 - alpha/2, df}, for any alpha in (0, 1): below
    :data:`SMALL_ALPHA` by bisection on the upper tail itself."""
    if alpha >= SMALL_ALPHA:
        return t_quantile(1 - alpha / 2, df)
    half = max(alpha / 2, math.ulp(0.0))

    def tail(x: float) -> float:  # P(T > x), x >= 0, without forming 1 - P(T <= x)
        w = math.sqrt(df) / x if x > 0 else math.inf
        return 0.5 if x <= 0 else 0.5 * regularized_beta(df / 2, 0.5, w * w / (1 + w * w))

    high = 1.0
    while tail(high) > half and high < 1e300:
        high *= 2
    return bisect_root(lambda x: tail(x) - half, 0.0, high, xtol=1e-13 * high)


def tango_score(pass_to_fail: int, fail_to_pass: int, n: int, d: float) -> float:
    """Tango's score statistic for "the paired difference is ``d``": the observed
    difference minus ``d``, over its standard error with the discordant probabilities
    re-estimated under that hypothesis (their maximum-likelihood value given ``d``);
    +-inf where that standard error is 0."""
    b, c = pass_to_fail, fail_to_pass
    estimate = (c - b) / n
    if abs(d - estimate) < 1e-15:
        return 0.0
    linear = d * (2 * n + b - c) - (b + c)
    q = (-linear + math.sqrt(max(linear * linear + 8 * n * b * d * (1 - d), 0.0))) / (4 * n)
    variance = 2 * q + d * (1 - d)
    if variance <= 0:
        return math.copysign(math.inf, estimate - d)
    return (estimate - d) * math.sqrt(n / variance)


def paired_score_interval(pass_to_fail: int, fail_to_pass: int, n: int, alpha: float) -> tuple[float, float]:
    """Tango's score interval (1998) for the difference of two paired proportions,
    ``(fail_to_pass - pass_to_fail) / n``: the values d where the score statistic,
    with the discordant probabilities re-estimated under "the difference is d", is
    within the normal quantile. Stays inside [-1, 1]; with no discordant pair it is
    +-z^2/(n + z^2) (as wide as Wilson's interval for 0 of n), not a single point."""
    b, c, z = pass_to_fail, fail_to_pass, _z(alpha)
    estimate = (c - b) / n

    def score(d: float) -> float:
        return tango_score(b, c, n, d)

    edge = 1e-12
    low = -1.0 if estimate <= -1 + edge or score(-1 + edge) <= z else \
        bisect_root(lambda d: score(d) - z, -1 + edge, estimate)
    high = 1.0 if estimate >= 1 - edge or score(1 - edge) >= -z else \
        bisect_root(lambda d: score(d) + z, estimate, 1 - edge)
    return low, high


def t_interval(differences: Sequence[float], alpha: float) -> tuple[float, float] | None:
    """Student's t interval of the mean difference over tasks; None below two tasks."""
    n = len(differences)
    if n < 2:
        return None
    mean = math.fsum(differences) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    half = _t(alpha, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def floored_t_interval(differences: Sequence[float], alpha: float, span: float, *,
                       limit: float | None = None) -> tuple[float, float] | None:
    """The t interval of the mean difference, never narrower than ``span`` times
    z^2 / (n + z^2) on either side: the half-width the score interval has for a
    binary outcome with no discordant task. ``span`` is the reward's range. On
    near-constant rewards the plain t interval collapses to a point (every task
    tied) and a real drop is "ruled out"; the floor keeps its coverage (measured
    in benchmarks/gates/gate_calibration.py --reward). None below two tasks.

    ``limit``: the largest change the reward's range allows (its span); the interval is
    clipped to [-limit, limit], a limit widened to the largest difference observed (a
    reward outside the declared range never turns the interval inside out: clipped to a
    range the mean lies outside of, it printed [-1.00, -3.87])."""
    plain = t_interval(differences, alpha)
    if plain is None:
        return None
    n, z = len(differences), _z(alpha)
    mean, floor = (plain[0] + plain[1]) / 2, span * z * z / (n + z * z)
    half = max((plain[1] - plain[0]) / 2, floor)
    if limit is None:
        return mean - half, mean + half
    bound = max(limit, max(abs(d) for d in differences))
    return max(mean - half, -bound), min(mean + half, bound)


def fewest_units_for_sign_flip(alpha: float) -> int:
    """The fewest tasks at which the exact sign-flip test can reject at two-sided
    ``alpha`` (2 / 2^n < alpha): 6 at alpha 0.05. With fewer no interval can be claimed."""
    return math.ceil(math.log2(2 / alpha) + EPS)


# -- how many tasks a margin needs ---------------------------------------------------------------


#: The power the advised size is computed for. The aim is that an unchanged candidate is
#: judged ``ok`` at least 80% of the time at the advised size; computing for 90% covers
#: what the formula leaves out (the baseline's variance is itself an estimate, and with
#: repeats the interval is the lower of two). Measured: gate_calibration.py --needed.
POWER = 0.90


def paired_variance(differences: Sequence[float], repeats: int) -> float | None:
    """The variance of one episode's metric that the paired differences show: r/2 times the
    sample variance of the per-task differences (each the mean of ``repeats`` paired
    episodes; for 0/1 outcomes and one repeat, about the discordant share over 2). With one
    repeat the baseline alone cannot show the variance within a task and its pooled
    variance p(1 - p) bounds it from above: on near-deterministic tasks (p ~ Beta(0.3,0.3))
    that is 2.7 times too large, and the advice asked about twice too many tasks
    (gate_calibration.py --needed). None below two tasks."""
    if len(differences) < 2:
        return None
    mean = math.fsum(differences) / len(differences)
    spread = math.fsum((d - mean) ** 2 for d in differences) / (len(differences) - 1)
    return max(1, repeats) * spread / 2


def _variance(variance_per_episode: float, repeats: int, differences: Sequence[float] | None) -> float:
    """The variance the advice takes: the paired differences' at one repeat, else the baseline's."""
    shown = paired_variance(differences, repeats) if differences is not None and repeats <= 1 else None
    return variance_per_episode if shown is None else shown


def tasks_needed(variance_per_episode: float, repeats: int, margin: float, alpha: float, *,
                 binary: bool, power: float = POWER, differences: Sequence[float] | None = None) -> int | None:
    """Paired tasks (each run ``repeats`` times) at which an unchanged candidate
    (both runs varying like the baseline) is judged ``ok`` with probability
    ``power``: the interval's lower end must clear ``-margin``, so the margin must
    be (z_{1-alpha/2} + z_{power}) standard errors, with the standard error of the
    mean paired difference sqrt(2 v / (r n)); n = 2 (z_a + z_p)^2 v / (r margin^2).
    For success (``binary``) the score interval is never narrower than z^2 / (N + z^2)
    with N = n * r keys, so n is at least z^2 (1 - margin) / (margin r).
    Never below :func:`fewest_units_for_sign_flip`. ``differences``: the comparison's
    per-task paired differences; given (two or more) at one repeat, where the baseline
    cannot show the variance within a task, the variance is theirs
    (:func:`paired_variance`) instead of ``variance_per_episode`` (with repeats the
    baseline's within-task variance is kept: the paired one is noisier and measured no
    better, gate_calibration.py --needed).

    None at margin 0: no finite sample can show ``ok`` at margin 0 (the interval
    always has width, so it cannot lie above a change of exactly 0)."""
    if margin <= 0:
        return None
    z, r = _z(alpha), max(1, repeats)
    z_power = _z(2 * (1 - power))
    variance_per_episode = _variance(variance_per_episode, repeats, differences)
    needed = 2 * (z + z_power) ** 2 * max(variance_per_episode, 0.0) / (r * margin * margin)
    if binary:
        needed = max(needed, z * z * (1 - margin) / (margin * r))
    return max(math.ceil(needed - EPS), fewest_units_for_sign_flip(alpha))


#: The power the advised repeats of too few tasks are computed for (see :data:`POWER`).
REPEATS_POWER = POWER


def repeats_needed(variance_per_episode: float, repeats: int, margin: float, alpha: float,
                   available_tasks: int, *, binary: bool, differences: Sequence[float] | None = None) -> int | None:
    """When :func:`tasks_needed` exceeds the ``available_tasks`` compared, the repeats of
    those tasks that would decide: paired episodes N = 2 (t_a + t_p)^2 v / margin^2 with
    t quantiles on (tasks - 1) degrees of freedom (the interval over few tasks is a t
    interval) at :data:`REPEATS_POWER`, at least the score interval's floor
    z^2 (1 - margin) / margin for success; repeats = ceil(N / tasks). None when the tasks
    suffice, at margin 0, or with fewer than two tasks."""
    needed = tasks_needed(variance_per_episode, repeats, margin, alpha, binary=binary, differences=differences)
    if needed is None or available_tasks < 2 or needed <= available_tasks:
        return None
    variance_per_episode = _variance(variance_per_episode, repeats, differences)
    df = available_tasks - 1
    factor = _t(alpha, df) + t_quantile(REPEATS_POWER, df)
    episodes = 2 * factor * factor * max(variance_per_episode, 0.0) / (margin * margin)
    if binary:
        z = _z(alpha)
        episodes = max(episodes, z * z * (1 - margin) / margin)
    return max(math.ceil(episodes / available_tasks - EPS), max(1, repeats) + 1)
