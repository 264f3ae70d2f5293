"""ALFWorld episodes through the whole harness on the real TextWorld engine: pytest
with the plugin in a subprocess, the embedded ALFWorld server spawned by the pool,
and a scripted model (the reference agent server replaying each shipped game's
walkthrough in AgentGym's "Thought: ... Action: ..." form, ``alfworld_gold_policy``).
Every shipped game must be won, reward 1."""

from __future__ import annotations

import json

import pytest
from helpers import TESTS, pythonpath
from helpers.alfworld_gold_policy import GOLD_ENV
from helpers.alfworld_support import SHIPPED, needs_engine, task_sentence, walkthrough
from helpers.projects import episodes, make_project, run, suite

pytestmark = [needs_engine, pytest.mark.heavy]


def replay(pytester, monkeypatch, gold: dict[int, list[str]], run_id: str) -> list[dict]:
    """Run the suite of games ``gold`` (index -> actions the scripted model sends); its records."""
    scripts = {task_sentence(index): actions for index, actions in gold.items()}
    assert len(scripts) == len(gold), "two shipped games share a task sentence"
    gold_file = pytester.path / "gold.json"
    gold_file.write_text(json.dumps(scripts))
    monkeypatch.setenv(GOLD_ENV, str(gold_file))
    monkeypatch.setenv("AGENTGYM_REFERENCE_POLICIES", "helpers.alfworld_gold_policy:POLICY")
    monkeypatch.setenv("PYTHONPATH", pythonpath(TESTS))
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)  # the shipped games
    node = make_project(pytester)
    tasks = ", ".join(str(index) for index in gold)
    suite(pytester, "alfworld", f"environment: ALFWorld\ntasks: [{tasks}]\nmax_rounds: 30\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", f"--agentgym-run-id={run_id}", timeout=600)
    result.assert_outcomes(passed=len(gold))
    return episodes(pytester, run_id)


def test_every_shipped_walkthrough_wins_through_the_harness(pytester, monkeypatch):
    found = replay(pytester, monkeypatch, {index: walkthrough(index) for index in SHIPPED}, "gold")
    records = {record["task_index"]: record for record in found}
    assert sorted(records) == SHIPPED
    for index, record in records.items():
        assert record["error"] is None, (index, record["error"])
        assert record["reward"] == 1.0 and record["success"] is True, index
        assert record["stop_reason"] == "done"
        assert record["rounds"] == len(walkthrough(index)), index  # won by the last walkthrough step
        first = record["turns"][0]["observation"]
        assert task_sentence(index) in first and "\nAVAILABLE ACTIONS: go to " in first
        assert [turn["action"] for turn in record["turns"]] == walkthrough(index)


def test_a_wrong_action_is_answered_nothing_happens_in_the_trajectory(pytester, monkeypatch):
    index = SHIPPED[0]
    wrong = ["open the pod bay doors", *walkthrough(index)]
    (record,) = replay(pytester, monkeypatch, {index: wrong}, "wrong")
    assert record["turns"][0]["action"] == "open the pod bay doors"
    assert record["turns"][1]["observation"] == "Nothing happens."
    assert record["reward"] == 1.0 and record["rounds"] == len(wrong)
