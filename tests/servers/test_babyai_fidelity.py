"""How close the embedded BabyAI server is to AgentGym's original.

References (none produced by the code under test): the original server's
answers recorded under minigrid 2.3.1 / gymnasium 0.29.1 (the versions AgentGym
pins), in tests/data/babyai_reset_0-399.json (``POST /reset`` for data_idx 0-399),
tests/data/babyai_traces_0-399.json (scripted steps on 58 tasks and the
original's exact answers) and tests/data/babyai_original_extra.json (more resets
and policy-driven traces from the original server, see
tests/data/record_babyai_original.py). Answers are compared as JSON text, so key
order and the int/float type of every number count.

No known differences: the ten BabyAI-GoToObjS6-v0 tasks (data_idx % 40 == 3) match
through BabyAI-GoToObjS4-v0, and the Synth* levels (155 SynthLoc, 156 SynthSeq
and the later SynthS5R2 tasks 2994, 4794, 5874) match through the old
locked-room rule and the double reset (servers/embedded/babyai_levels.py).
"""

from __future__ import annotations

import json


from helpers import DATA

GOLDEN_RESETS = json.loads((DATA / "babyai_reset_0-399.json").read_text())["responses"]
GOLDEN_TRACES = json.loads((DATA / "babyai_traces_0-399.json").read_text())["traces"]
EXTRA = json.loads((DATA / "babyai_original_extra.json").read_text())


def as_text(body) -> str:
    return json.dumps(body, separators=(",", ":"))


#: the session's embedded server that the ``http`` fixture (tests/conftest.py) talks to
EMBEDDED_SERVER = "babyai"


def reset_text(http, data_idx: int) -> str:
    env_id = http.post("/create").json()["id"]
    try:
        response = http.post("/reset", json={"id": env_id, "data_idx": data_idx})
        assert response.status_code == 200
        return response.text
    finally:
        http.post("/close", json={"id": env_id})


def replay(http, traces: dict) -> int:
    """Reset each trace's task, send its actions; every answer must be the recorded one."""
    steps = 0
    for data_idx, trace in sorted(traces.items(), key=lambda item: int(item[0])):
        env_id = http.post("/create").json()["id"]
        http.post("/reset", json={"id": env_id, "data_idx": int(data_idx)})
        for number, entry in enumerate(trace):
            response = http.post("/step", json={"id": env_id, "action": entry["action"]})
            assert response.status_code == entry["status"], (data_idx, number)
            assert response.text == as_text(entry["body"]), (data_idx, number, entry["action"])
            steps += 1
        http.post("/close", json={"id": env_id})
    return steps


def test_resets_of_tasks_0_to_399_match_the_original(http):
    assert len(GOLDEN_RESETS) == 400
    mismatched = [i for i in range(400) if reset_text(http, i) != as_text(GOLDEN_RESETS[str(i)])]
    assert mismatched == []


def test_synth_missions_155_156_and_later_ones_match_the_original(http):
    """The tasks where minigrid 3.x's own rules draw another mission (or grid)."""
    assert GOLDEN_RESETS["155"]["observation"].startswith("Your goal: go to the red box\n")
    assert sorted(EXTRA["responses"], key=int) == [
        "155", "156", "2994", "2995", "2996", "4794", "4795", "4796", "5874", "5875", "5876"]
    for data_idx, golden in EXTRA["responses"].items():
        assert reset_text(http, int(data_idx)) == as_text(golden), data_idx
    assert EXTRA["responses"]["155"] == GOLDEN_RESETS["155"]  # two recordings agree


def test_policy_traces_on_the_synth_tasks_match_the_original(http):
    steps = replay(http, EXTRA["traces"])
    assert (sorted(EXTRA["traces"], key=int), steps) == (["155", "156", "2994", "4794", "5874"], 100)


def test_goto_obj_s6_tasks_match_through_the_s4_substitute(http):
    indices = [i for i in range(400) if i % 40 == 3]
    assert len(indices) == 10
    for data_idx in indices:
        assert reset_text(http, data_idx) == as_text(GOLDEN_RESETS[str(data_idx)])


def test_every_golden_trace_step_matches_the_original(http):
    steps = replay(http, GOLDEN_TRACES)
    assert (len(GOLDEN_TRACES), steps) == (58, 446)
