"""compare/boundaries.py against brute force: every sign vector of a few tasks enumerated,
the boundaries' crossing masses, their maximality, the nominal levels, what the interim
looks spend outside the final test (escaped) and the whole procedure's false-alarm rate
with the final alpha of compare/sequential.final_alpha. Issue 40: the looks spent alpha
by a union bound; now they spend it exactly."""

from __future__ import annotations

import bisect
import itertools
from fractions import Fraction

import pytest

from pytest_agentgym.compare.boundaries import design, escaped, spend
from pytest_agentgym.compare.sequential import FinalLooks, SequentialPlan, final_alpha


def _walks(steps):
    """Every sign vector (each equally likely) as the sums at each look."""
    sizes = [s for step in steps for s in step]
    cuts = list(itertools.accumulate(len(step) for step in steps))
    for signs in itertools.product((1, -1), repeat=len(sizes)):
        terms = [sign * size for sign, size in zip(signs, sizes)]
        yield [sum(terms[:cut]) for cut in cuts]


def _masses(steps, bounds):
    """Exact null mass crossing at each look (first crossing), by enumeration."""
    total = 2 ** sum(len(step) for step in steps)
    crossed = [Fraction(0)] * len(bounds)
    for sums in _walks(steps):
        for k, (value, bound) in enumerate(zip(sums, bounds)):
            if bound is not None and value <= bound + 1e-9:
                crossed[k] += Fraction(1, total)
                break
    return crossed


CASES = [
    # McNemar: a discordant task is 1, a concordant one 0
    ([[1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1], [1, 0, 1]], [4 / 15, 8 / 15, 12 / 15, 1.0], 0.2),
    ([[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]], [0.25, 0.5, 0.75, 1.0], 0.3),
    # repeats: success fractions on the lattice 1/3, sizes 1/3, 2/3 and 1
    ([[1 / 3, 2 / 3, 1, 1 / 3], [1, 1, 2 / 3, 1 / 3], [1, 1 / 3, 1, 2 / 3]], [1 / 3, 2 / 3, 1.0], 0.1),
]


@pytest.mark.parametrize("steps, fractions, level", CASES)
def test_the_boundaries_spend_exactly_what_they_say_and_no_more_than_the_function(steps, fractions, level):
    scales = (3,) if any(s not in (0, 1) for step in steps for s in step) else (1,)
    found = design(steps, fractions, level, scales)
    assert found.how == "exact"
    masses = _masses(steps, found.bounds)
    for k in range(len(steps)):
        assert float(masses[k]) == pytest.approx(found.spent[k], abs=1e-12)
        assert float(sum(masses[:k + 1])) <= spend(fractions[k], level) + 1e-12  # within the spend
    # each boundary is the largest: one lattice step more would spend past the function
    step = 1 / scales[0]
    for k, bound in enumerate(found.bounds):
        if bound is None:
            continue
        wider = list(found.bounds)
        wider[k] = bound + step
        attainable = any(abs(sums[k] - (bound + step)) < 1e-9 for sums in _walks(steps))
        if attainable:
            assert float(sum(_masses(steps, wider)[:k + 1])) > spend(fractions[k], level) - 1e-12
    # the nominal level of a look is the plain one-sided p-value of its boundary
    for k, bound in enumerate(found.bounds):
        if bound is not None:
            sums = [s[k] for s in _walks(steps)]
            assert found.nominal[k] == pytest.approx(sum(s <= bound + 1e-9 for s in sums) / len(sums))


def test_a_walk_off_the_lattice_is_drawn_and_stays_within_the_spend():
    steps = [[0.31, 0.77, 0.12, 0.9], [0.45, 0.66, 0.2, 0.58], [0.8, 0.15, 0.93, 0.41]]
    found = design(steps, [1 / 3, 2 / 3, 1.0], 0.2)
    assert found.how == "simulated (20000 draws)"
    exact = _masses(steps, found.bounds)
    for k in range(3):  # the drawn boundaries hold on the exact law too, within the draws' error
        assert float(sum(exact[:k + 1])) <= spend((k + 1) / 3, 0.2) + 0.01


@pytest.mark.parametrize("steps, fractions, level", CASES[:2])
def test_escaped_is_the_mass_that_crossed_early_and_ends_above_the_final_level(steps, fractions, level):
    found = design(steps[:-1], fractions[:-1], level)
    total = list(_walks(steps))
    finals = sorted(s[-1] for s in total)
    for threshold in (0.01, 0.05, 0.1):
        expected = 0
        for sums in total:
            crossed = any(b is not None and v <= b + 1e-9 for v, b in zip(sums[:-1], found.bounds))
            p_final = bisect.bisect_right(finals, sums[-1] + 1e-9) / len(finals)
            expected += crossed and p_final > threshold
        assert escaped(steps, fractions, level, threshold) == pytest.approx(expected / len(total), abs=1e-12)


@pytest.mark.parametrize("steps, fractions, level", CASES[:2])
def test_the_whole_procedure_errs_at_most_alpha(steps, fractions, level):
    """One environment: a false alarm is a crossing at an interim look or a final p-value
    at most the final alpha; enumerated, its chance is at most alpha, and the final alpha is
    more than alpha less the whole interim spend (the union bound it replaces)."""
    plan = SequentialPlan(alpha=level, margin=0.05)
    looks = FinalLooks(tuple(tuple(float(x) for x in s) for s in steps), tuple(fractions), (1,), 1, level)
    alpha_final = final_alpha([looks], plan)
    found = design(steps[:-1], fractions[:-1], level)
    total = list(_walks(steps))
    finals = sorted(s[-1] for s in total)
    alarms = 0
    for sums in total:
        crossed = any(b is not None and v <= b + 1e-9 for v, b in zip(sums[:-1], found.bounds))
        p_final = bisect.bisect_right(finals, sums[-1] + 1e-9) / len(finals)
        alarms += crossed or p_final <= alpha_final
    assert alarms / len(total) <= level + 1e-12
    assert alpha_final > level - sum(found.spent) - 1e-12


def test_the_final_alpha_pays_for_stopped_environments_and_keeps_the_ok_share():
    plan = SequentialPlan(alpha=0.05, margin=0.05, n_envs=2)
    assert final_alpha([], plan) == pytest.approx(0.049)  # nothing crossed: only the ok looks' share
    paid = final_alpha([], plan, stopped=[0.025])
    assert paid == pytest.approx(0.05 - 0.025 * (6 / 8) ** 4)  # what a stopped one could spend by its last look
