"""The one node-profile loader (config/profile.py): what every door reads a node with."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.projects import make_project
from helpers.usage_errors import says
from pytest_agentgym.config.profile import NodeProfile, ProfileError


def _node(root: Path, text: str, name: str = "n") -> None:
    nodes = root / "configs" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (nodes / f"{name}.yaml").write_text(text)


@pytest.mark.parametrize("flag", ["--agentgym-node", "--node", "env.taskset.node"])
def test_an_unknown_node_is_named_with_the_flag_of_the_door(tmp_path, flag):
    with pytest.raises(ProfileError) as caught:
        NodeProfile.load("nowhere", tmp_path, flag=flag)
    assert str(caught.value).startswith(f"{flag}=nowhere: unknown node; known nodes: ")
    assert caught.value.reason.startswith("unknown node; known nodes: ")  # without the flag, for a door's own words
    assert "local" in caught.value.reason


def test_a_node_reads_its_limits_servers_and_nats(tmp_path):
    _node(tmp_path, "name: field\nmodel: {endpoints: [{kind: reference}]}\n"
                    "limits: {max_rounds: 15, episode_timeout: 300, concurrency: 2, max_error_rate: 0.1}\n"
                    "envs: {servers: auto, skip: [WebShop]}\nnats: {url: 'nats://127.0.0.1:4222', create_stream: true}\n")
    node = NodeProfile.load("n", tmp_path)
    assert (node.name, node.max_rounds, node.episode_timeout, node.concurrency, node.max_error_rate) == \
        ("field", 15, 300.0, 2, 0.1)
    assert (node.servers_mode, node.skip, node.nats_url, node.create_stream) == \
        ("auto", ("WebShop",), "nats://127.0.0.1:4222", True)
    assert "WebShop" not in node.served() and node.spec("maze") is node.specs["Maze"]
    assert node.spec("webshop") is None and node.skipped("webshop")


@pytest.mark.parametrize("text, message", [
    ("envs: {servers: sometimes}\n", "envs.servers is 'sometimes'; use 'auto' (*), 'spawn' (*), 'attach' (*)"),
    ("limits: {concurrency: 0}\n", "limits.concurrency must be a whole number >= 1, got 0"),
    ("limits: {concurrency: true}\n", "limits.concurrency must be a whole number >= 1, got True"),
    ("limits: {max_error_rate: 2}\n", "limits.max_error_rate must be a number from 0 to 1, got 2"),
    ("colour: blue\n", "unknown key(s) colour; a node profile has *"),
    ("envs: {overrides: {Nowhere: {url: 'http://127.0.0.1:1'}}}\n", "envs.overrides.Nowhere: unknown environment*"),
    ("envs: [1, 2]\n", "'envs' must be a mapping, got list"),
    ("- a list\n", "a node profile must be a mapping of keys"),
])
def test_a_profile_that_cannot_be_used_names_the_file_and_the_fix(tmp_path, text, message):
    import fnmatch

    _node(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        NodeProfile.load("n", tmp_path)
    assert str(caught.value).startswith(str(tmp_path / "configs" / "nodes" / "n.yaml") + ": ")
    assert fnmatch.fnmatch(str(caught.value), f"*{message}*"), str(caught.value)


def test_plugins_add_environments_to_the_node(tmp_path):
    _node(tmp_path, "limits: {}\n")
    added = []

    def add(specs):
        added.append(sorted(specs))
        specs["Extra"] = specs["Maze"]

    node = NodeProfile.load("n", tmp_path, add_environments=add)
    assert "Maze" in added[0] and "Extra" in node.specs and "Extra" in node.served()


def test_every_door_reads_the_same_node(tmp_path):
    """pytest's settings, the worker's and the rollout service's views of one node agree."""
    from pytest_agentgym.config.options import OPTIONS
    from pytest_agentgym.config.settings import for_node, resolve
    from pytest_agentgym.rollouts.node import RolloutNode

    _node(tmp_path, "name: same\nmodel: {endpoints: [{kind: reference}]}\n"
                    "limits: {max_rounds: 7, episode_timeout: 42, concurrency: 3}\nenvs: {servers: auto, skip: [SciWorld]}\n")
    values = {option.name: None for option in OPTIONS} | {"node": "n", "no_nats": True}
    pytest_side = resolve(values, rootdir=tmp_path, command="pytest")
    worker_side = for_node(NodeProfile.load("n", tmp_path, flag="--node"), concurrency=None, reports=tmp_path,
                           command="pytest-agentgym worker")
    rollout_side = RolloutNode.load("n", tmp_path)
    for settings in (pytest_side, worker_side):
        assert (settings.node, settings.node_max_rounds, settings.node_episode_timeout, settings.concurrency,
                settings.servers_mode, settings.skip_envs) == ("same", 7, 42.0, 3, "auto", ("SciWorld",))
        assert settings.env_specs == rollout_side.specs
    assert (rollout_side.name, rollout_side.max_rounds, rollout_side.episode_timeout, rollout_side.concurrency,
            rollout_side.servers_mode, rollout_side.skip) == ("same", 7, 42.0, 3, "auto", ("SciWorld",))


def test_unknown_node_is_a_usage_error_listing_known_nodes(pytester):
    make_project(pytester)
    with pytest.raises(ProfileError) as refused:
        NodeProfile.load("laptop", pytester.path)
    assert says(str(refused.value), ["*--agentgym-node=laptop: unknown node; known nodes: *4090*gpu*local*"]), \
        refused.value
