"""The exact tests at any size (issue 40): McNemar's tails and attainable p-values and the
sign-flip lattice in linear time, checked against the implementations they replaced,
kept here as the reference (exact integer sums; one convolution step per task), over a
grid of sizes with ties and both extreme tails: the same values to 1e-12 relative
wherever the value is a normal float."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from pytest_agentgym.compare import exact
from pytest_agentgym.compare import statistics as stats

#: Below this a value is subnormal or underflows: relative error means nothing there.
NORMAL = 1e-300
RELATIVE = 1e-12


# -- the implementations replaced, as they were ---------------------------------------------------


def old_upper_tail(k: int, n: int) -> float:
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return sum(math.comb(n, i) for i in range(k, n + 1)) / (1 << n)


def old_mcnemar_support(discordant: int) -> tuple[float, ...]:
    return tuple(sorted({old_upper_tail(k, discordant) for k in range(discordant + 1)}))


def old_lattice(ints: list[int]) -> tuple[float, tuple[float, ...]]:
    total = sum(abs(i) for i in ints)
    probs = np.zeros(2 * total + 1)
    probs[total] = 1.0
    for size in (abs(i) for i in ints):
        shifted = np.zeros_like(probs)
        shifted[size:] += 0.5 * probs[:len(probs) - size]
        shifted[:len(probs) - size] += 0.5 * probs[size:]
        probs = shifted
    cumulative = np.minimum(np.cumsum(probs), 1.0)
    support = tuple(sorted({float(c) for c, q in zip(cumulative, probs) if q > 0}))
    return float(cumulative[sum(ints) + total]), support


def old_attainable_below(support, t):
    if support is None:
        return min(t, 1.0)
    return max([s for s in support if s <= t * (1 + 1e-12) + 1e-15], default=0.0)


def old_monte_carlo(nonzero: list[float]) -> float:
    sizes = np.abs(np.asarray(nonzero, dtype=float))
    observed = float(np.sum(nonzero))
    tolerance = stats.EPS * max(1.0, float(sizes.sum()))
    rng = np.random.default_rng(stats.SIGN_FLIP_SEED)
    signs = rng.integers(0, 2, size=(stats.SIGN_FLIP_DRAWS, len(sizes)), dtype=np.int8) * 2 - 1
    hits = int(np.sum(signs @ sizes <= observed + tolerance))
    return (1 + hits) / (1 + stats.SIGN_FLIP_DRAWS)


def same(new: float, old: float) -> bool:
    if old < NORMAL:
        return abs(new) < 1e-290
    return abs(new - old) <= RELATIVE * old


def same_support(new: tuple[float, ...], old: tuple[float, ...]) -> None:
    """Every normal value of each support has one within 1e-12 in the other (a value
    within an ulp of 1 may round to 1 in one of them and not the other)."""
    assert list(new) == sorted(new)
    for mine, theirs in ((new, old), (old, new)):
        ordered = np.asarray(theirs)
        for value in mine:
            if value < NORMAL:
                continue
            at = np.searchsorted(ordered, value)
            near = ordered[max(0, at - 1):at + 1]
            assert np.min(np.abs(near - value)) <= RELATIVE * value, (value, near)


# -- McNemar ---------------------------------------------------------------------------------------


def old_tails_fast(n: int) -> list[float]:
    """:func:`old_upper_tail` for every k at once: the same exact sums (each coefficient by
    the recurrence, the tails as suffix sums), rounded once, so the same floats."""
    coefficients = [1] * (n + 1)
    for i in range(n):
        coefficients[i + 1] = coefficients[i] * (n - i) // (i + 1)
    tails, running = [0.0] * (n + 1), 0
    for k in range(n, -1, -1):
        running += coefficients[k]
        tails[k] = running / (1 << n)
    return tails


@pytest.mark.parametrize("n", [*range(0, 41), 63, 64, 99, 100, 101, 200, 257])
def test_every_mcnemar_tail_is_the_exact_sum_as_before(n):
    for k in range(-1, n + 2):
        assert stats.binomial_upper_tail(k, n) == old_upper_tail(k, n), (k, n)


def ends_and_middle(n: int) -> list[int]:
    ks = {0, 1, 2, 3, n - 3, n - 2, n - 1, n, n // 2 - 1, n // 2, n // 2 + 1, n // 2 + 2}
    ks |= {n // 2 + round(j * math.sqrt(n) / 2) for j in range(-20, 21)}
    return sorted(ks | set(random.Random(n).sample(range(n + 1), 10)))


@pytest.mark.parametrize("n", [500, 999, 1075, 2048])
def test_mcnemar_tails_up_to_the_exact_limit_are_the_old_floats(n):
    """Both extreme tails (p = 2^-n, which underflows past n = 1074) and around the middle."""
    assert exact.EXACT_UP_TO == 2048
    for k in ends_and_middle(n):
        assert stats.binomial_upper_tail(k, n) == old_upper_tail(k, n), (k, n)


@pytest.mark.parametrize("n", [2049, 2050, 3001, 5000, 10_001, 30_000])
def test_mcnemar_tails_beyond_it_within_1e12_of_the_exact_sums(n):
    """Loader's pmf, summed: every k, against the exact sums; spot checks against the old code."""
    tails, reference = exact.half_binomial_tails(n), old_tails_fast(n)
    for k in range(n + 1):
        assert same(tails[k], reference[k]), (k, n, tails[k], reference[k])
    if n <= 3001:
        for k in ends_and_middle(n)[::4]:
            assert old_upper_tail(k, n) == reference[k]


@pytest.mark.parametrize("d", [0, 1, 2, 6, 17, 50, 128, 201])
def test_mcnemar_support_equals_the_old_one(d):
    new, old = stats.mcnemar_support(d), old_mcnemar_support(d)
    same_support(new, old)
    assert stats.mcnemar_drop_p(d, 0) == new[0] or d == 0
    for b in range(d + 1):  # every p-value of the test is in its support, exactly
        assert stats.mcnemar_drop_p(b, d - b) in new


def test_mcnemar_at_a_hundred_thousand_keys_is_linear_and_consistent():
    """What did not finish: 100,000 discordant keys. The tails are symmetric
    (P(X >= k) + P(X >= n - k + 1) = 1), fall with k, and the centre matches the normal
    approximation with continuity correction."""
    n = 100_000
    exact.half_binomial_tails.cache_clear()
    tails = exact.half_binomial_tails(n)
    support = stats.mcnemar_support(n)
    assert len(tails) == n + 1 and tails[0] == 1.0 and tails[n] == 0.0  # 2^-100000 underflows
    assert all(a >= b for a, b in zip(tails, tails[1:]))
    assert all(abs(tails[k] + tails[n - k + 1] - 1) < 1e-14 for k in range(1, n + 1, 997))
    from statistics import NormalDist

    for k in (n // 2 + 100, n // 2 + 500, n // 2 + 1000):
        normal = 1 - NormalDist(n / 2, math.sqrt(n) / 2).cdf(k - 0.5)
        assert tails[k] == pytest.approx(normal, rel=2e-3)
    assert support[0] == 0.0 and support[-1] == 1.0
    assert set(support) == set(tails)  # the rest underflow to 0 or round to 1


# -- the sign-flip lattice -------------------------------------------------------------------------


def lattices():
    rng = random.Random(40)
    yield [1] * 30, "all drops: the extreme lower tail, 2^-30"
    yield [-1] * 30, "all gains: p = 1"
    yield [-1] * 300, "the lowest attainable p-value is 2^-300"
    yield [2, -2, 2, 2, -2, 1, 1, -1], "ties of two sizes"
    yield [3] * 7 + [-1] * 5 + [2] * 11, "three sizes, many ties"
    for tasks, repeats in ((8, 2), (25, 3), (90, 5), (100, 10), (400, 4)):
        ints = [rng.randint(-repeats, repeats) for _ in range(tasks)]
        yield [i for i in ints if i] or [1], f"{tasks} tasks at {repeats} repeats"
    yield [rng.choice((-1, 1)) * rng.randint(1, 30) for _ in range(60)], "sizes up to 30 (lcm lattice)"
    drop = [rng.choice((1, 1, 1, -1)) * rng.randint(1, 5) for _ in range(200)]
    yield drop, "a real drop: the lower tail at 200 tasks"
    yield [1] * 1100 + [2] * 5 + [-3] * 2, "past underflow: cells cut at both ends, p = 0"
    yield [1] * 900 + [-1] * 100 + [2] * 40, "far tails of 1,040 tasks, where cells are cut"


@pytest.mark.parametrize("ints,what", list(lattices()), ids=[w for _, w in lattices()])
def test_sign_flip_lattice_equals_the_old_convolution(ints, what):
    p, support = exact.lattice_sign_flip(ints)
    old_p, old_support = old_lattice(ints)
    assert same(p, old_p), (p, old_p)
    same_support(support, old_support)
    assert p in support


def test_sign_flip_lattice_at_size_matches_the_normal_limit():
    """50,000 tasks at 3 repeats (the old convolution: about 10^10 operations): away from the
    tails the exact distribution function is the normal one (the sums lie 2 apart: a
    continuity correction of 1)."""
    from statistics import NormalDist

    sizes = {1: 25_000, 2: 15_000, 3: 10_000}
    sd = math.sqrt(sum(size * size * c for size, c in sizes.items()))
    for z in (-2.0, -1.0, 0.0, 0.5):
        ones_up = sizes[1] // 2 + round(z * sd / 2)  # each 1 turned up adds 2 to the sum
        ints = [1] * ones_up + [-1] * (sizes[1] - ones_up)
        ints += [size * sign for size in (2, 3) for sign in (1, -1) for _ in range(sizes[size] // 2)]
        p, support = exact.lattice_sign_flip(ints)
        assert p == pytest.approx(NormalDist(0, sd).cdf(sum(ints) + 1), rel=5e-3) and p in support


def test_sign_flip_test_uses_the_grouped_lattice():
    """Through the public function: success fractions of 3 repeats (a 1/3 lattice)."""
    rng = random.Random(3)
    differences = [rng.randint(-3, 3) / 3 for _ in range(150)]
    p, how, support = stats.sign_flip_test(differences, lattice=(3,))
    old_p, old_support = old_lattice([round(d * 3) for d in differences if abs(d) > stats.EPS])
    assert how == "exact" and same(p, old_p)
    same_support(support, old_support)


@pytest.mark.parametrize("tasks", [17, 18, 51, 333, 1001])
def test_monte_carlo_in_blocks_draws_the_same_signs(tasks, monkeypatch):
    """The draws are made in blocks (20,000 x 25,000 tasks took 4 GB at once); the blocks
    draw the same signs, so the p-value is the same, also when a block is small."""
    rng = random.Random(tasks)
    differences = [rng.uniform(-1, 0.8) for _ in range(tasks)]
    p, how, support = stats.sign_flip_test(differences)
    assert how.startswith("Monte Carlo") and support is None
    assert p == old_monte_carlo(differences)
    monkeypatch.setattr(stats, "DRAW_BLOCK", 4 * tasks + 3)  # blocks of 4 draws
    assert stats.sign_flip_test(differences)[0] == p


def test_attainable_below_by_bisection_equals_the_scan():
    support = stats.mcnemar_support(60)
    for t in [0.0, 1e-300, *support, *(s * (1 + 5e-13) for s in support), *(s * (1 - 1e-9) for s in support),
              *(random.Random(1).random() for _ in range(200)), 1.0, 2.0]:
        assert stats.attainable_below(support, t) == old_attainable_below(support, t), t
    assert stats.attainable_below((), 0.5) == old_attainable_below((), 0.5) == 0.0


def test_enumerated_sign_flip_is_unchanged():
    """Sixteen or fewer differences off any lattice: every sign pattern, as before."""
    differences = [0.31, -0.2, 0.17, 0.05, -0.44, 0.29, 0.1, 0.5, -0.13, 0.6]
    sizes = np.abs(np.asarray(differences))
    sums = np.array(list(itertools.product((1.0, -1.0), repeat=len(sizes)))) @ sizes
    expected = float(np.mean(sums <= sum(differences) + stats.EPS * max(1.0, sizes.sum())))
    p, how, _ = stats.sign_flip_test(differences)
    assert how == "exact (enumerated)" and p == expected
