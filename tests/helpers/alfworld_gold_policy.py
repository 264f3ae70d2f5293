"""A scripted model for ALFWorld tests: replays each shipped game's walkthrough
through the reference agent server (not an ALFWorld policy).

Loaded with ``AGENTGYM_REFERENCE_POLICIES=alfworld_gold_policy:POLICY``; the
walkthroughs come from the JSON file named by ``AGENTGYM_TEST_ALFWORLD_GOLD``:
``{"Your task is to: ...": ["action", ...]}`` (task sentences must be distinct).
Past the end it answers ``look``.
"""

from __future__ import annotations

from helpers.sciworld_gold_policy import GoldReplay

GOLD_ENV = "AGENTGYM_TEST_ALFWORLD_GOLD"

POLICY = GoldReplay("ALFWorld (gold replay, tests only)", GOLD_ENV, idle="look",
                    random_actions=("look", "inventory"))
