"""The checkpoint gate's false-alarm rate stays within binomial noise of alpha.

Runs the simulation of benchmarks/gate_calibration.py (real run directories in the
results format, judged by compare_runs) on a small grid: A/A pairs, where every
``regressed`` verdict is a false alarm.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from helpers import REPO

BENCHMARK = REPO / "benchmarks" / "gate_calibration.py"
ALPHA = 0.05
SIMS = 200


@pytest.fixture(scope="module")
def calibration():
    spec = importlib.util.spec_from_file_location("gate_calibration", BENCHMARK)
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
