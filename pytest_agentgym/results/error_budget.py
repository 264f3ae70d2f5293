"""The error budget as a test (issue 40): how many of ``n`` episodes may end in an
infrastructure error before what was scored cannot be judged.

A flat share failed small environments on chance alone (2 errors of 25 are 8% > 5%), so
the budget is a binomial test: ``n`` episodes erring independently at the budget's rate
exceed the allowed count in at most :data:`BUDGET_LEVEL` of runs. One run's threshold
gates use it at ``max_error_rate`` (results/gates.py); a comparison of two runs at the
chance that a key errs in either of them (compare/error_rule.py). Measured in
benchmarks/gates/errors_study.py.
"""

from __future__ import annotations

import functools
import math

#: The budget's test level: errors beyond what the budget's rate leaves in 99% of runs.
BUDGET_LEVEL = 0.01


def _log_pmf(k: int, n: int, log_p: float, log_q: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q


def binomial_tail(count: int, n: int, rate: float) -> float:
    """P(X >= count) for X ~ Binomial(n, rate), summed in log space from the side of the
    mean on which the terms fall (exact to rounding at any n; no scipy)."""
    if count <= 0 or rate >= 1:
        return 1.0 if count <= n else 0.0
    if count > n or rate <= 0:
        return 0.0
    log_p, log_q = math.log(rate), math.log1p(-rate)
    upward = count > n * rate  # the terms fall from count upward, else from count - 1 downward
    ks = range(count, n + 1) if upward else range(count - 1, -1, -1)
    total = 0.0
    for k in ks:
        term = math.exp(_log_pmf(k, n, log_p, log_q))
        total += term
        if term <= total * 1e-17:
            break
    return min(1.0, total) if upward else max(0.0, 1.0 - total)


@functools.lru_cache(maxsize=512)
def most_errors_allowed(n: int, rate: float) -> int:
    """The most of ``n`` episodes that may error within the budget: the largest count that
    ``n`` episodes erring independently at ``rate`` exceed in more than :data:`BUDGET_LEVEL`
    of runs (0 at a rate of 0, every one at 1)."""
    if rate <= 0:
        return 0
    allowed = min(n, math.floor(n * rate))
    while allowed < n and binomial_tail(allowed + 1, n, rate) > BUDGET_LEVEL:
        allowed += 1
    return allowed
