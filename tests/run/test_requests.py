"""The one episode-request builder (run/requests.py): every door asks by the same rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.config.profile import NodeProfile
from pytest_agentgym.envs.spec import load_default_specs
from pytest_agentgym.run.requests import RequestRules, build

MAZE = load_default_specs()["Maze"]


def test_asked_rounds_are_capped_by_the_node_whoever_asks():
    rules = RequestRules(run_id="r", node="n", node_max_rounds=5)
    # a suite's max_rounds, the fixture's, a rollout batch's: the same call, the same cap
    assert rules.request(MAZE, 0, 1, max_rounds=12).limits.max_rounds == 5
    assert rules.request(MAZE, 0, 1, max_rounds=3).limits.max_rounds == 3
    assert rules.request(MAZE, 0, 1).limits.max_rounds == min(MAZE.max_rounds, 5)


def test_the_operators_max_rounds_is_not_capped():
    rules = RequestRules(run_id="r", node="n", node_max_rounds=5, max_rounds=40)
    assert rules.request(MAZE, 0, 1, max_rounds=3).limits.max_rounds == 40


def test_no_node_cap_keeps_what_was_asked_or_the_environment_default():
    rules = RequestRules(run_id="r", node="n")
    assert rules.request(MAZE, 0, 1, max_rounds=33).limits.max_rounds == 33
    assert rules.request(MAZE, 0, 1).limits.max_rounds == MAZE.max_rounds


def test_time_budget_and_sampling_order():
    rules = RequestRules(run_id="r", node="n", node_episode_timeout=300.0,
                         node_sampling={"temperature": 0.6, "top_p": 0.95}, sampling={"seed": 7})
    request = rules.request(MAZE, 4, 2, episode_timeout=60.0, sampling={"temperature": 0.0, "max_tokens": 64})
    assert request.limits.timeout_s == 60.0
    # the suite's under the node's, the command line's over both
    assert request.sampling == {"temperature": 0.6, "max_tokens": 64, "top_p": 0.95, "seed": 7}
    assert RequestRules(run_id="r", node="n", episode_timeout=9.0).request(
        MAZE, 0, 1, episode_timeout=60.0).limits.timeout_s == 9.0
    assert RequestRules(run_id="r", node="n", node_episode_timeout=120.0).request(MAZE, 0, 1).limits.timeout_s == 120.0


def test_build_takes_decided_limits_as_they_are():
    request = build(run_id="r", spec=MAZE, task_index=3, repeat=2, max_rounds=99, timeout_s=5.0, retries=0,
                    sampling={"temperature": 1.0}, node="w", checkpoint="ckpt")
    assert (request.limits.max_rounds, request.limits.timeout_s, request.limits.retries) == (99, 5.0, 0)
    assert (request.task_index, request.repeat, request.node, request.checkpoint) == (3, 2, "w", "ckpt")


def test_a_rollout_node_decides_rounds_by_the_same_rule(tmp_path: Path):
    from pytest_agentgym.rollouts.node import RolloutNode

    nodes = tmp_path / "configs" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "tiny.yaml").write_text("name: tiny\nmodel: {endpoints: [{kind: reference}]}\n"
                                     "limits: {max_rounds: 4, episode_timeout: 30}\n")
    node = RolloutNode.load("tiny", tmp_path)
    profile = NodeProfile.load("tiny", tmp_path)
    rules = node.rules("run")
    assert rules.rounds(MAZE, 10) == RequestRules(run_id="run", node="tiny",
                                                  node_max_rounds=profile.max_rounds).rounds(MAZE, 10) == 4
    assert rules.timeout() == profile.episode_timeout == 30.0


@pytest.mark.parametrize("asked", [None, 2, 50])
def test_plans_and_requests_agree_on_rounds(asked, tmp_path: Path):
    """The plan's max_rounds (shard costs, the fingerprint) is the request's."""
    from types import SimpleNamespace

    from pytest_agentgym.run.plans import max_rounds_for

    settings = SimpleNamespace(run_id="r", node="n", node_max_rounds=10, node_episode_timeout=300.0, retries=1,
                               checkpoint=None, max_rounds=None, episode_timeout=None, sampling=None,
                               spec=lambda name: MAZE)
    suite = SimpleNamespace(environment="Maze", max_rounds=asked)
    assert max_rounds_for(suite, settings) == RequestRules.of(settings, {}).request(
        MAZE, 0, 1, max_rounds=asked).limits.max_rounds
