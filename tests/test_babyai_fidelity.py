"""How close the embedded BabyAI server is to AgentGym's original.

References (none produced by the code under test): the original server's
answers recorded under minigrid 2.3.1 / gymnasium 0.29.1 (the versions AgentGym
pins), in tests/data/babyai_reset_0-399.json (``POST /reset`` for data_idx 0-399)
and tests/data/babyai_traces_0-399.json (scripted steps on 58 tasks and the
original's exact answers). Answers are compared as JSON text, so key order and
the int/float type of every number count.

Known, documented differences (docs/envs/babyai.md):

* data_idx 155 (SynthLoc, seed 3) and 156 (SynthSeq, seed 3): minigrid 3.x's
  rejection sampling draws a different mission on the same grid, so only the
  "Your goal:" line differs;
* nothing else, including the ten BabyAI-GoToObjS6-v0 tasks (data_idx % 40 == 3),
  which we build as BabyAI-GoToObjS4-v0 (the room_size=4 level that id named).
"""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import DATA

GOLDEN_RESETS = json.loads((DATA / "babyai_reset_0-399.json").read_text())["responses"]
GOLDEN_TRACES = json.loads((DATA / "babyai_traces_0-399.json").read_text())["traces"]
MISSION_CHANGED = {155, 156}


def as_text(body) -> str:
    return json.dumps(body, separators=(",", ":"))


@pytest.fixture(scope="module")
def http(embedded_server):
    server = embedded_server("babyai")
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client


def reset_text(http, data_idx: int) -> str:
    env_id = http.post("/create").json()["id"]
    try:
        response = http.post("/reset", json={"id": env_id, "data_idx": data_idx})
        assert response.status_code == 200
        return response.text
    finally:
        http.post("/close", json={"id": env_id})


def test_resets_of_tasks_0_to_399_match_the_original_except_two_missions(http):
    assert len(GOLDEN_RESETS) == 400
    mismatched = {}
    for data_idx in range(400):
        got = reset_text(http, data_idx)
        if got != as_text(GOLDEN_RESETS[str(data_idx)]):
            mismatched[data_idx] = json.loads(got)
    assert set(mismatched) == MISSION_CHANGED
    assert 400 - len(mismatched) == 398
    for data_idx, body in mismatched.items():
        golden = GOLDEN_RESETS[str(data_idx)]
        ours_goal, ours_rest = body["observation"].split("\n", 1)
        golden_goal, golden_rest = golden["observation"].split("\n", 1)
        assert ours_goal != golden_goal and ours_goal.startswith("Your goal: ")
        assert ours_rest == golden_rest  # same grid, same view, same actions
        assert {k: v for k, v in body.items() if k != "observation"} == {
            k: v for k, v in golden.items() if k != "observation"
        }


def test_goto_obj_s6_tasks_match_through_the_s4_substitute(http):
    indices = [i for i in range(400) if i % 40 == 3]
    assert len(indices) == 10
    for data_idx in indices:
        assert reset_text(http, data_idx) == as_text(GOLDEN_RESETS[str(data_idx)])


def test_every_golden_trace_step_matches_the_original(http):
    steps = 0
    for data_idx, trace in sorted(GOLDEN_TRACES.items(), key=lambda item: int(item[0])):
        env_id = http.post("/create").json()["id"]
        http.post("/reset", json={"id": env_id, "data_idx": int(data_idx)})
        for number, entry in enumerate(trace):
            response = http.post("/step", json={"id": env_id, "action": entry["action"]})
            assert response.status_code == entry["status"], (data_idx, number)
            assert response.text == as_text(entry["body"]), (data_idx, number, entry["action"])
            steps += 1
        http.post("/close", json={"id": env_id})
    assert (len(GOLDEN_TRACES), steps) == (58, 446)
