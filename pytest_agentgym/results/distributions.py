"""Distribution functions without scipy: bisection, the regularized incomplete beta
function and what it gives (beta and Student's t quantiles). scipy costs about a second
to import and these are all a comparison or a run's summary needs (a Clopper-Pearson
interval, a t interval); each is checked against scipy in the tests
(tests/compare/test_compare_paths.py, tests/results/test_intervals.py). No I/O, no
state: the bottom layer, for results/ and compare/ alike.
"""

from __future__ import annotations

import math


def bisect_root(f, low: float, high: float, *, xtol: float = 1e-12, max_steps: int = 200) -> float:
    """A root of ``f`` in [low, high] by bisection; ``f(low)`` and ``f(high)`` must differ in sign."""
    f_low = f(low)
    if f_low == 0:
        return low
    if (f_low > 0) == (f(high) > 0):
        raise ValueError(f"bisect_root: f({low!r}) and f({high!r}) have the same sign; give a bracket "
                         f"whose ends differ in sign")
    for _ in range(max_steps):
        mid = (low + high) / 2
        f_mid = f(mid)
        if f_mid == 0 or high - low <= xtol:
            return mid
        if (f_mid > 0) == (f_low > 0):
            low, f_low = mid, f_mid
        else:
            high = mid
    return (low + high) / 2


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x in [0, 1]."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                 + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The ``q`` quantile of Beta(a, b) (``scipy.special.betaincinv(a, b, q)``), by bisection on
    :func:`regularized_beta`; what a Clopper-Pearson interval needs, without scipy."""
    if not 0 <= q <= 1:
        raise ValueError(f"beta_quantile: q must lie in [0, 1], not {q!r}")
    if q in (0.0, 1.0):
        return q
    return bisect_root(lambda x: regularized_beta(a, b, x) - q, 0.0, 1.0, xtol=1e-15)


def t_cdf(x: float, df: float) -> float:
    """Student's t distribution function with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + x * x))
    return 1.0 - tail if x > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (0 < q < 1), by bisection on :func:`t_cdf`."""
    if not 0 < q < 1:
        raise ValueError(f"t_quantile: q must lie strictly between 0 and 1, not {q!r}")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_quantile(1 - q, df)
    high = 1.0
    while t_cdf(high, df) < q:
        high *= 2
    return bisect_root(lambda x: t_cdf(x, df) - q, 0.0, high, xtol=1e-13)
