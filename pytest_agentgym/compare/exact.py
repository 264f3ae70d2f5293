"""Exact discrete null distributions at any size, in linear time: the Binomial(n, 1/2)
behind the exact McNemar test, and the sign-flip sum of integer differences on a lattice.

The McNemar test used to sum ``math.comb(n, i)`` for every tail and every attainable
p-value, about n^3.5 operations: 31.7 s for the 1,001 attainable p-values at 1,000
discordant keys, and a comparison of two 100,000-episode runs did not finish. Here each
probability is Loader's saddle-point form of the binomial pmf (Loader 2000, "Fast and
accurate computation of binomial probabilities", as R's dbinom): a few floating-point
operations per k with a relative error near 1e-15 at every size, with no cancellation
and no accumulated rounding (each pmf stands alone). The upper tails are compensated
sums from the far end; a lower tail is 1 minus the mirrored upper tail (the distribution
is symmetric), so no tail is ever the difference of two nearly equal numbers. Against the
exact integer sums: 1e-12 relative or better wherever the value is a normal float
(tests/compare/test_statistics_exact.py, sizes up to 10,001 with both ends). Up to 2,048
trials the tails are those exact sums (a few milliseconds), the same floats as before.

The sign-flip lattice groups the differences by size: the signed sum of c differences of
size s is s(2B - c) with B ~ Binomial(c, 1/2), so the null distribution is a convolution
of one scaled binomial per distinct size (at most as many as the lattice has steps), each
done as direct convolutions of positive numbers (numpy.convolve) in the residue classes of
its stride: no FFT, whose absolute rounding would lose the far tails. Probabilities that
underflow to 0 (beyond about 39 standard deviations) are cut from both ends of each
array, so the work grows with the tasks times their standard deviation, not their square:
200,000 tasks at 3 repeats take about 1 s (the old convolution, one step per task over
every cell, about 10^11 operations). Pure Python and the
standard library except the lattice, which takes numpy (imported when it runs).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from typing import Sequence

#: Loader's stirlerr(n) = log(n!) - (n + 1/2) log(n) + n - log(sqrt(2 pi)) for n = 0..15
#: (n = 0: the limit's convention, unused), to 25 digits (mpmath, 40 digits).
_STIRLERR = (0.0, 0.08106146679532725821967026, 0.04134069595540929409382208,
             0.02767792568499833914878929, 0.02079067210376509311152277,
             0.01664469118982119216319487, 0.01387612882307074799874573,
             0.01189670994589177009505572, 0.01041126526197209649747857,
             0.009255462182712732917728637, 0.008330563433362871256469319,
             0.007573675487951840794972024, 0.006942840107209529865664153,
             0.006408994188004207068439631, 0.005951370112758847735624416,
             0.00555473355196280137103869)
_LN_2PI = math.log(2 * math.pi)


def _stirlerr(n: int) -> float:
    """The error of Stirling's formula for log(n!) (Loader's stirlerr)."""
    if n <= 15:
        return _STIRLERR[n]
    nn = float(n) * n
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _divergence(t: float) -> float:
    """((1 + t) log(1 + t) + (1 - t) log(1 - t)) / 2 for |t| < 1: KL(k/n || 1/2) per trial
    with t = (2k - n) / n, Loader's bd0(k, n/2) + bd0(n - k, n/2) over n. Near 0 its series
    (sum of t^2j / (2j (2j - 1)), all terms positive), else with log1p: no cancellation."""
    t2 = t * t
    if t2 < 0.25:
        s, power, j = 0.0, 1.0, 1
        while True:
            power *= t2
            following = s + power / (2 * j * (2 * j - 1))
            if following == s:
                return s
            s, j = following, j + 1
    return ((1 + t) * math.log1p(t) + (1 - t) * math.log1p(-t)) / 2


def half_binomial_pmf(k: int, n: int) -> float:
    """P(X = k) for X ~ Binomial(n, 1/2), to about 1e-15 relative at any n (0 when it
    is below the smallest float)."""
    if k < 0 or k > n:
        return 0.0
    if k == 0 or k == n:
        return math.ldexp(1.0, -n)
    exponent = _stirlerr(n) - _stirlerr(k) - _stirlerr(n - k) - n * _divergence((2 * k - n) / n)
    return math.exp(exponent - 0.5 * (_LN_2PI + math.log(k) + math.log1p(-k / n)))


#: Up to this many trials the tails are exact integer sums rounded once (6 ms at 2,048).
EXACT_UP_TO = 2048


def _coefficients(n: int) -> list[int]:
    coefficients = [1] * (n + 1)
    for i in range(n):
        coefficients[i + 1] = coefficients[i] * (n - i) // (i + 1)
    return coefficients


def half_binomial_pmfs(n: int) -> list[float]:
    """[P(X = k) for k = 0..n], X ~ Binomial(n, 1/2): exact up to :data:`EXACT_UP_TO`."""
    if n <= EXACT_UP_TO:
        whole = 1 << n
        return [c / whole for c in _coefficients(n)]
    half = [half_binomial_pmf(k, n) for k in range(n // 2 + 1)]
    return half + half[:(n + 1) // 2][::-1]  # symmetric: pmf(k) = pmf(n - k)


def _exact_tails(n: int) -> tuple[float, ...]:
    """The tails as exact sums of binomial coefficients over 2^n, each rounded once."""
    coefficients = _coefficients(n)
    tails, running, whole = [0.0] * (n + 1), 0, 1 << n
    for k in range(n, -1, -1):
        running += coefficients[k]
        tails[k] = running / whole
    return tuple(tails)


@functools.lru_cache(maxsize=64)
def half_binomial_tails(n: int) -> tuple[float, ...]:
    """(P(X >= k) for k = 0..n) for X ~ Binomial(n, 1/2), in O(n) floating-point
    operations: exact up to :data:`EXACT_UP_TO`; beyond it the upper half summed from
    the far end with compensation, the lower half as 1 - P(X >= n - k + 1)."""
    if n <= EXACT_UP_TO:
        return _exact_tails(n)
    tails = [0.0] * (n + 1)
    total = compensation = 0.0
    for k in range(n, n // 2, -1):  # Neumaier's compensated sum, largest k first
        term = half_binomial_pmf(k, n)
        following = total + term
        compensation += (total - following) + term if total >= term else (term - following) + total
        total = following
        tails[k] = total + compensation
    for k in range(n // 2, -1, -1):
        tails[k] = 1.0 if k == 0 else 1.0 - tails[n - k + 1]
    return tuple(tails)


def half_binomial_upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return half_binomial_tails(n)[k]


def lattice_sign_flip(ints: Sequence[int]) -> tuple[float, tuple[float, ...]]:
    """The sign-flip test on integer differences: P(sum of randomly signed |d| <= observed
    sum), and every value that distribution function takes at an attainable sum (the
    attainable p-values), sorted. ``ints`` are the nonzero differences."""
    import numpy as np

    counts = Counter(abs(i) for i in ints if i)
    probs, low = np.ones(1), 0  # probs[i] is P(sum = low + i)
    # the largest group first: it becomes the running distribution without a convolution
    for size, c in sorted(counts.items(), key=lambda item: -item[1]):
        kernel, first = _trimmed(np.array(half_binomial_pmfs(c)))  # kernel[j]: P(B = first + j)
        stride = 2 * size
        grown = np.zeros(len(probs) + stride * (len(kernel) - 1))
        for residue in range(min(stride, len(probs))):
            grown[residue::stride] = np.convolve(probs[residue::stride], kernel)
        probs, cut = _trimmed(grown)
        low += size * (2 * first - c) + cut
    cumulative = np.minimum(np.cumsum(probs.astype(np.longdouble)).astype(float), 1.0)
    at = sum(ints) - low
    support = np.unique(cumulative[probs > 0])
    p = 0.0 if at < 0 else 1.0 if at >= len(cumulative) else float(cumulative[at])
    return p, tuple(float(v) for v in support)


def _trimmed(values):
    """``values`` without the zeros at either end (probabilities below the smallest float:
    they cost convolution work and add nothing), and how many were cut at the start."""
    import numpy as np

    nonzero = np.flatnonzero(values)
    if len(nonzero) == 0:
        return values[:1], 0
    return values[nonzero[0]:nonzero[-1] + 1], int(nonzero[0])
