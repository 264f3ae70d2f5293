"""BabyAI levels as AgentGym's server builds them, on minigrid 3.x.

Task ``data_idx`` is level ``LEVELS[data_idx % 40]`` with ``seed = data_idx // 40``
(the original's ``all_levels[data_idx % 40 + 1]``). :func:`make_level` builds the
minigrid env the way the original's pinned versions (minigrid 2.3.1, gymnasium
0.29.1) would, which takes two corrections on minigrid 3.x:

* ``BabyAI-GoToObjS6-v0`` no longer exists. Under minigrid < 2.5 that id was
  registered with ``room_size=4`` (the registry bug that got it deprecated), i.e.
  the same level as ``BabyAI-GoToObjS4-v0``, which is what we build for it.
* **The stale locked room.** A level made by minigrid's ``LevelGen`` (GoToSeq,
  PickupLoc, the Synth*, MiniBoss and Boss levels) may add a locked room while it
  draws a mission (the Synth* and MiniBoss/Boss ones do), and remembers it in
  ``locked_room``. minigrid 2.3.1 never forgets it:
  when rejection sampling throws a draw away and starts again, and when the same
  env is reset again, the room of an earlier draw stays in ``locked_room`` until
  another locked room replaces it. minigrid 3.x sets ``locked_room = None`` at the
  start of every draw. The difference shows where a level samples its mission
  objects away from the locked room (``implicit_unlock=False``: Synth, SynthLoc,
  SynthSeq): the old rule also avoids the stale room's cells, so the same seed
  can yield another mission. :class:`KeepsStaleLockedRoom` restores the old rule
  (data_idx 155 and 156 are the first tasks where it matters).
* The original resets each env twice (its ``BabyAI`` wrapper resets in its
  constructor, then the server resets it again with the same seed); the second
  draw starts from the first one's ``locked_room``. :func:`reset_like_original`
  does the same for the levels with the old rule (SynthS5R2 seed 146, data_idx
  5874, is a task where it matters).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import minigrid  # noqa: F401  (registers the BabyAI-* ids; gymnasium 1.x no longer does it)
from gymnasium.envs.registration import load_env_creator
from minigrid.envs.babyai.core.levelgen import LevelGen

#: AgentGym's level list; data_idx % 40 picks one (the original's all_levels[1..40]).
LEVELS = tuple(
    f"BabyAI-{name}-v0"
    for name in (
        "GoToRedBallGrey GoToRedBall GoToRedBallNoDists GoToObjS6 GoToLocalS8N7 "
        "GoToObjMazeS7 GoToImpUnlock GoToSeqS5R2 GoToRedBlueBall GoToDoor "
        "GoToObjDoor Open OpenRedDoor OpenDoorLoc OpenRedBlueDoorsDebug "
        "OpenDoorsOrderN4Debug Pickup UnblockPickup PickupLoc PickupDistDebug "
        "PickupAbove PutNextLocalS6N4 PutNextS7N4Carrying Unlock UnlockLocalDist "
        "KeyInBox UnlockPickupDist BlockedUnlockPickup UnlockToUnlock ActionObjDoor "
        "FindObjS7 KeyCorridorS6R3 OneRoomS20 MoveTwoAcrossS8N9 SynthS5R2 "
        "SynthLoc SynthSeq MiniBossLevel BossLevel BossLevelNoUnlock"
    ).split()
)

#: Level ids that minigrid 3.x no longer builds -> the registered id with the same level.
SUBSTITUTES = {"BabyAI-GoToObjS6-v0": "BabyAI-GoToObjS4-v0"}


def level_of(data_idx: int) -> tuple[str, int]:
    """(AgentGym level id, seed) of a task index."""
    return LEVELS[data_idx % 40], data_idx // 40


class KeepsStaleLockedRoom:
    """Mixin for a ``LevelGen`` level: ``locked_room`` keeps the last room it was
    given; assigning ``None`` (minigrid 3.x's clear at the start of each mission
    draw) leaves it as it was, as under minigrid 2.3.1, which never cleared it."""

    @property
    def locked_room(self) -> Any:
        return self.__dict__.get("_stale_locked_room")

    @locked_room.setter
    def locked_room(self, room: Any) -> None:
        if room is not None:
            self.__dict__["_stale_locked_room"] = room


_OLD_RULE_CLASSES: dict[type, type] = {}


def _with_old_rule(cls: type) -> type:
    """``cls`` itself, or for a ``LevelGen`` level a subclass with the old rule."""
    if not issubclass(cls, LevelGen):
        return cls
    if cls not in _OLD_RULE_CLASSES:
        _OLD_RULE_CLASSES[cls] = type(cls.__name__, (KeepsStaleLockedRoom, cls), {})
    return _OLD_RULE_CLASSES[cls]


def make_level(level: str) -> gymnasium.Env:
    """The gymnasium env of AgentGym level id ``level``, as minigrid 2.3.1 built it."""
    spec = gymnasium.spec(SUBSTITUTES.get(level, level))
    entry = spec.entry_point
    cls = load_env_creator(entry) if isinstance(entry, str) else entry
    old = _with_old_rule(cls)
    if old is not cls:
        spec = dataclasses.replace(spec, entry_point=old)
    return gymnasium.make(spec, disable_env_checker=True)


def reset_like_original(env: gymnasium.Env, seed: int) -> dict:
    """Reset with ``seed`` as the original does; returns the observation.

    The original resets twice. A first reset can only change the second through
    the stale locked room, so only levels with the old rule pay for it (the other
    levels' resets are a function of the seed alone; the golden resets 0-399
    confirm it)."""
    if isinstance(env.unwrapped, KeepsStaleLockedRoom):
        env.reset(seed=seed)
    obs, _info = env.reset(seed=seed)
    return obs
