"""SciWorld episodes through the whole harness on the real simulator: pytest with the
plugin in a subprocess, the embedded SciWorld server spawned by the pool, and a
scripted model (the reference agent server replaying the simulator's own gold
action sequences, ``sciworld_gold_policy``). Every episode must reach score 100."""

from __future__ import annotations

import json
import warnings

import pytest
from helpers import TESTS, pythonpath
from helpers.projects import episodes, make_project, run, suite
from helpers.sciworld_gold_policy import GOLD_ENV
from helpers.sciworld_support import ORIGINAL_GAMES, needs_simulator

from pytest_agentgym.servers.embedded.sciworld_tasks import start_simulator

pytestmark = [needs_simulator, pytest.mark.heavy]

#: lifespan (3 kinds), find a non-living thing, build a circuit, mix a secondary paint colour;
#: variations 0 and others; each with a task description of its own
INDICES = [4240, 4366, 4491, 3236, 1397, 4169]


def gold_by_description(indices: list[int]) -> dict[str, list[str]]:
    simulator = start_simulator()
    try:
        gold = {}
        for index in indices:
            task, variation = ORIGINAL_GAMES[index]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                simulator.load(task, variation, "", generateGoldPath=True)
            gold[simulator.get_task_description()] = list(simulator.get_gold_action_sequence())
    finally:
        simulator.close()
    assert len(gold) == len(indices), "two test indices share a task description: pick others"
    return gold


def test_gold_action_sequences_reach_score_100_through_the_harness(pytester, monkeypatch):
    gold = gold_by_description(INDICES)
    gold_file = pytester.path / "gold.json"
    gold_file.write_text(json.dumps(gold))
    monkeypatch.setenv(GOLD_ENV, str(gold_file))
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", "helpers.sciworld_gold_policy:POLICY")
    monkeypatch.setenv("PYTHONPATH", pythonpath(TESTS))
    node = make_project(pytester)
    tasks = ", ".join(str(index) for index in INDICES)
    suite(pytester, "sciworld", f"environment: SciWorld\ntasks: [{tasks}]\nmax_rounds: 30\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=gold", timeout=900)
    result.assert_outcomes(passed=len(INDICES))
    records = {record["task_index"]: record for record in episodes(pytester, "gold")}
    assert sorted(records) == sorted(INDICES)
    for index, record in records.items():
        assert record["error"] is None, (index, record["error"])
        assert record["reward"] == 100 and record["score"] == 100 and record["success"] is True, index
        assert record["stop_reason"] == "done"
        description = next(text for text in gold if text in record["turns"][0]["observation"])
        assert record["rounds"] <= len(gold[description])  # done by the gold path, not by the limit
