"""This project's success rules against AgentGym's (docs/envs/success-and-requests.md).

AgentGym's evaluator counts an episode as a success when its final reward is 1 or
100, for every environment. Ours is each environment's ``success:`` in
configs/envs.yaml. For every final reward each environment's server can give, the
two must agree except in the documented cases, and the documentation's table must
name the rules the configuration holds.
"""

from __future__ import annotations

import re

import pytest

from pytest_agentgym.envs.spec import load_default_specs

from helpers import REPO

DOC = REPO / "docs" / "envs" / "success-and-requests.md"

#: Final rewards (as the client reports them: BabyAI's and SciWorld's are the score)
#: that each environment can end an episode with, as (reward, score).
FINALS = {
    "BabyAI": [(0.8875, 0.8875), (0.45, 0.45), (0.0, 0.0)],  # success; late success; none
    "TextCraft": [(1.0, None), (0.0, None)],
    "Maze": [(1.0, None), (0.0, None), (-1.0, None)],
    "Wordle": [(1.0, None), (0.0, None)],
    "ALFWorld": [(1.0, None), (0.0, None)],
    "SQLGym": [(1.0, None), (0.0, None)],
    "WebShop": [(1.0, None), (0.75, None), (0.0, None)],
    "SciWorld": [(100.0, 100.0), (50.0, 50.0), (1.0, 1.0), (0.0, 0.0), (-100.0, -100.0)],
}
#: Where the two rules disagree: (environment, final reward) -> our verdict.
DIFFERENCES = {("BabyAI", 0.8875): True, ("BabyAI", 0.45): True, ("SciWorld", 1.0): False}


def agentgym_success(final_reward: float) -> bool:
    """AgentGym's ``rewards == 1 or rewards == 100``, for one episode."""
    return final_reward == 1 or final_reward == 100


def test_our_rules_agree_with_agentgyms_except_where_documented():
    specs = load_default_specs()
    assert set(FINALS) <= set(specs)
    disagreements = {}
    for env, finals in FINALS.items():
        for reward, score in finals:
            ours = specs[env].success(reward, score)
            if ours != agentgym_success(reward):
                disagreements[(env, reward)] = ours
    assert disagreements == DIFFERENCES


def test_the_documented_table_names_the_configured_rules():
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in FINALS:
            rows[cells[0]] = (cells[3].strip("`"), cells[4])
    specs = load_default_specs()
    assert set(rows) == set(FINALS)
    for env, (rule, same) in rows.items():
        assert rule == specs[env].success.text, env
        assert (same == "**differs**") == any(key[0] == env for key in DIFFERENCES), env


def test_agentgyms_expression_as_written_fails_for_more_than_one_episode():
    np = pytest.importorskip("numpy")
    rewards = np.array([1.0, 0.0])
    with pytest.raises(ValueError, match=re.escape("truth value of an array")):
        (rewards == 1 or rewards == 100).mean()  # noqa: B015  (the expression AgentGym's evaluator uses)
    assert (np.array([100.0]) == 1 or np.array([100.0]) == 100).mean() == 1.0
