"""The checkpoint gate's false-alarm rate stays within binomial noise of alpha.

Runs the simulation of benchmarks/gates/gate_calibration.py (real run directories in the
results format, judged by compare_runs) on a small grid: A/A pairs, where every
``regressed`` verdict is a false alarm.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from helpers import REPO

BENCHMARKS = REPO / "benchmarks" / "gates"
ALPHA = 0.05
SIMS = 200


@pytest.fixture(scope="module")
def calibration():
    spec = importlib.util.spec_from_file_location("gate_calibration", BENCHMARKS / "gate_calibration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Cells where a test that is too liberal shows: dividing the p-values by 3 raises their
# false alarms to 12.5% each, above the bound (9.6%).
@pytest.mark.parametrize("shape, dist, repeats, seed", [
    ({"BabyAI": 90}, (2.0, 2.0), 1, 101),  # binary units: exact McNemar
    ({"Maze": 25}, (2.0, 2.0), 3, 202),    # 3 repeats: exact sign-flip test over tasks
])
def test_a_a_false_alarms_stay_within_binomial_noise_of_alpha(calibration, shape, dist, repeats, seed):
    counts = calibration.simulate(shape, dist, repeats, (0.0,), SIMS, seed, alpha=ALPHA)["battery|0"]
    assert counts["pairs"] == SIMS
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)
    assert counts["regressed"] / SIMS <= bound, counts


def test_the_gate_is_not_silent_on_a_large_drop(calibration):
    """The bound above holds trivially for a gate that never fires: a 20-point drop on
    100 tasks is caught most of the time (about 90% in the benchmark)."""
    counts = calibration.simulate({"TextCraft": 100}, (2.0, 2.0), 1, (0.2,), 50, 303, alpha=ALPHA)["battery|0.2"]
    assert counts["regressed"] / counts["pairs"] >= 0.6, counts


@pytest.fixture(scope="module")
def studies():
    """benchmarks/gates/calibration_studies.py (it puts the repository root on sys.path itself, to
    import its sibling simulated_runs as benchmarks.gates.simulated_runs)."""
    spec = importlib.util.spec_from_file_location("calibration_studies", BENCHMARKS / "calibration_studies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stopping_when_decided_keeps_false_alarms_near_alpha_and_saves_on_a_clear_drop(studies):
    """--agentgym-stop-when-decided as the plugin runs it (seeded order, looks at each eighth to 3/4,
    the rest at the final alpha), simulated by benchmarks/gates/calibration_studies.py: on
    unchanged runs it alarms within binomial noise of alpha; at a 30-point drop it calls
    the battery regressed as often as the fixed-size comparison and plays fewer episodes
    (interim looks that never decided, or decided at alpha, would fail one or the other)."""
    unchanged = {r["shape"]: r for r in studies.sequential_cell(("Beta(2,2)", 0.0, SIMS, 303))}
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / SIMS)
    assert all(r["regressed"] <= bound for r in unchanged.values()), unchanged
    worse = {r["shape"]: r for r in studies.sequential_cell(("Beta(2,2)", 0.3, 40, 404))}
    battery = worse["battery"]
    assert battery["regressed"] >= battery["fixed_regressed"] - 0.05, battery
    assert battery["played"] < 0.95 and worse["BabyAI (90)"]["played"] < 0.9, worse
