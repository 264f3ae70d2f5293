"""The capacity model's arithmetic (benchmarks/engine/capacity.py) and the worked example that
docs/scale-out.md quotes from it: each bound by hand, the least one wins, and the
figures the docs print are the ones the function computes."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from helpers import REPO

DOC = REPO / "docs" / "scale-out.md"


@pytest.fixture(scope="module")
def capacity():
    path = REPO / "benchmarks" / "engine" / "capacity.py"
    spec = importlib.util.spec_from_file_location("capacity_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_each_bound_is_its_resource_over_what_an_episode_asks_of_it(capacity):
    episode = capacity.Episode(rounds=10, model_latency_s=0.2, step_s=0.01, setup_s=0.1, env_cpu_s=0.02,
                               harness_cpu_s=0.01, coordinator_cpu_s=0.05, model_cpu_s=0.004, other_cpu_s=0.006)
    fleet = capacity.Fleet(in_flight=22, workers=2, env_processes=4, coordinators=1, model_turns_per_s=50,
                           host_cores=2)
    # 10 x (0.2 + 0.01) + 0.1 = 2.2 s per episode
    assert episode.wall_s == pytest.approx(2.2)
    assert capacity.bounds(episode, fleet) == pytest.approx({
        "latency": 22 / 2.2, "environment": 4 / 0.02, "harness": 2 / 0.01, "coordinator": 1 / 0.05,
        "model": 50 / 10, "host": 2 / (0.02 + 0.01 + 0.05 + 0.004 + 0.006)})
    assert capacity.throughput(episode, fleet) == (pytest.approx(5.0), "model")


def test_a_cpu_bound_model_and_a_missing_resource(capacity):
    episode = capacity.Episode(rounds=8, model_latency_s=0.2, step_s=0.0, env_cpu_s=0.002, harness_cpu_s=0.004,
                               model_cpu_s=0.001)
    # no coordinators, no host given: those bounds are left out; the model is CPU-bound processes
    found = capacity.bounds(episode, capacity.Fleet(in_flight=4, workers=1, env_processes=2, model_processes=3))
    assert found == pytest.approx({"latency": 4 / 1.6, "environment": 2 / 0.002, "harness": 1 / 0.004,
                                   "model": 3 / 0.001})
    assert capacity.throughput(episode, capacity.Fleet(in_flight=4))[1] == "latency"


def test_the_worked_example(capacity):
    got = capacity.campaign(capacity.Campaign(), hours=1.0)
    # 1,000 GPUs for an hour, 20 turns/s each at 3,000 tokens/s and 150 tokens a turn
    assert got["gpus"] == 1000 and got["nodes"] == 125
    assert got["turns_per_s_per_gpu"] == pytest.approx(20.0)
    assert got["rounds"] == pytest.approx(0.4 * 12 + 0.3 * 10 + 0.3 * 6)
    assert got["episodes_per_s"] == pytest.approx(1000 * 20 / got["rounds"])
    assert got["episodes"] == pytest.approx(got["episodes_per_s"] * 3600)
    # Little's law: 20 turns/s x (4 s + 2 ms) in flight per GPU; auto gives a replica per 64
    assert got["in_flight_per_gpu"] == 81 and got["replicas_per_env"] == 2
    # the model binds (the GPUs are the point): every other bound is above it
    assert min(got[k] for k in ("latency_bound", "environment_bound", "harness_bound", "coordinator_bound")) \
        >= got["model_bound"]
    longer = capacity.campaign(capacity.Campaign(), hours=8.0)
    assert longer["episodes"] == pytest.approx(got["episodes"]) and longer["gpus"] == 125


def test_the_docs_quote_what_the_model_computes(capacity):
    """docs/scale-out.md's worked example prints figures of campaign(); a change of an
    assumption or a constant that is not carried to the docs fails here."""
    text = DOC.read_text()
    assert "## Capacity model" in text
    section = text.split("## Capacity model", 1)[1]
    for hours in (1.0, 8.0):
        got = capacity.campaign(capacity.Campaign(), hours=hours)
        for key in ("episodes_per_s", "coordinators", "nats_msgs_per_s"):
            figure = f"{got[key]:,.0f}"
            assert figure in section, f"{key} for {hours:g} h: {figure} is not in the Capacity model section"
    got = capacity.campaign(capacity.Campaign(), hours=1.0)
    assert f"{got['results_bytes'] / 1e9:,.0f} GB" in section
