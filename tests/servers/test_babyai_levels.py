"""The level rules of servers/embedded/babyai_levels.py, in process (no server).

The golden comparisons live in tests/servers/test_babyai_fidelity.py; these tests pin
why each correction is there: without it, minigrid 3.x draws what the original
(minigrid 2.3.1) did not, as recorded in tests/data/babyai_original_extra.json.
"""

from __future__ import annotations

import json

import gymnasium
import pytest
from minigrid.envs.babyai.core.levelgen import LevelGen

from helpers import DATA
from pytest_agentgym.servers.embedded.babyai_levels import (
    LEVELS,
    KeepsStaleLockedRoom,
    level_of,
    make_level,
    reset_like_original,
)

EXTRA = json.loads((DATA / "babyai_original_extra.json").read_text())["responses"]


def golden_goal(data_idx: int) -> str:
    return EXTRA[str(data_idx)]["observation"].split("\n", 1)[0].removeprefix("Your goal: ")


def mission(env) -> str:
    return env.unwrapped.mission.replace("then", "and").replace("after you", "and")


def test_levelgen_levels_get_the_old_rule_and_others_are_minigrids_own():
    old_rule = [name for name in LEVELS if isinstance(make_level(name).unwrapped, KeepsStaleLockedRoom)]
    assert old_rule == [f"BabyAI-{n}-v0" for n in (
        "GoToSeqS5R2", "PickupLoc", "SynthS5R2", "SynthLoc", "SynthSeq", "MiniBossLevel",
        "BossLevel", "BossLevelNoUnlock")]
    plain = make_level("BabyAI-GoToRedBall-v0").unwrapped
    assert not isinstance(plain, (KeepsStaleLockedRoom, LevelGen))
    assert make_level("BabyAI-GoToObjS6-v0").unwrapped.room_size == 4


def test_locked_room_ignores_clearing_but_takes_a_new_room():
    core = make_level("BabyAI-SynthLoc-v0").unwrapped
    assert core.locked_room is None
    core.reset(seed=3)
    room = core.locked_room
    core.locked_room = None
    assert core.locked_room is room
    core.locked_room = "another"
    assert core.locked_room == "another"


@pytest.mark.parametrize("data_idx", [155, 156])
def test_plain_minigrid_3_draws_another_mission_and_the_old_rule_the_originals(data_idx):
    level, seed = level_of(data_idx)
    plain = gymnasium.make(level, disable_env_checker=True)
    plain.reset(seed=seed)
    assert mission(plain) != golden_goal(data_idx)
    ours = make_level(level)
    reset_like_original(ours, seed)
    assert mission(ours) == golden_goal(data_idx)


def test_the_second_reset_matters_for_synth_s5r2_seed_146():
    level, seed = level_of(5874)
    assert (level, seed) == ("BabyAI-SynthS5R2-v0", 146)
    once = make_level(level)
    once.reset(seed=seed)
    twice = make_level(level)
    reset_like_original(twice, seed)
    assert mission(twice) == golden_goal(5874)
    assert (mission(once), tuple(once.unwrapped.agent_pos)) != (
        mission(twice), tuple(twice.unwrapped.agent_pos))
