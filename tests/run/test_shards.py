"""Shards: parsing --agentgym-shard, reading the batch schedulers' variables, and the split
(pytest_agentgym.run.shards). Plain code, no processes."""

from __future__ import annotations

import random

import pytest

from pytest_agentgym.run import shards
from pytest_agentgym.run.shards import Shard, ShardError


def test_option_takes_i_of_n_from_one_and_auto():
    assert shards.parse_option("2/3") == Shard(2, 3, "--agentgym-shard=2/3")
    assert shards.parse_option(" 1 / 1 ") == Shard(1, 1, "--agentgym-shard=1/1")
    assert shards.parse_option("AUTO") == "auto"


@pytest.mark.parametrize("text, says", [("0/3", "numbered from 1"), ("4/3", "1 <= I <= N"),
                                        ("3", "expected I/N"), ("a/b", "expected I/N"), ("1/0", "1 <= I <= N")])
def test_option_refuses_what_is_not_a_shard(text, says):
    with pytest.raises(ValueError, match=says):
        shards.parse_option(text)


def test_kubernetes_index_is_zero_based_with_our_count_variable():
    shard = shards.from_environment({"JOB_COMPLETION_INDEX": "0", "AGENTGYM_SHARD_COUNT": "4"})
    assert (shard.index, shard.count, shard.dirname) == (1, 4, "shard-1-of-4")
    assert "JOB_COMPLETION_INDEX=0" in shard.source and shard.run_id is None


def test_kubernetes_without_count_says_which_variable_to_set():
    with pytest.raises(ShardError, match="AGENTGYM_SHARD_COUNT is not; set AGENTGYM_SHARD_COUNT to the Job's completions"):
        shards.from_environment({"JOB_COMPLETION_INDEX": "2"})
    with pytest.raises(ShardError, match=r"JOB_COMPLETION_INDEX=3 with AGENTGYM_SHARD_COUNT=3"):
        shards.from_environment({"JOB_COMPLETION_INDEX": "3", "AGENTGYM_SHARD_COUNT": "3"})


def test_slurm_counts_from_the_array_minimum_and_names_the_run_after_the_array_job():
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_MAX": "6",
           "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_JOB_ID": "7781"}
    shard = shards.from_environment(env)
    assert (shard.index, shard.count, shard.run_id) == (2, 3, "slurm-7781")
    stepped = {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "6",
               "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert (shards.from_environment(stepped).index, shards.from_environment(stepped).count) == (3, 4)


def test_slurm_array_that_is_not_one_range_is_refused():
    sparse = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "7",
              "SLURM_ARRAY_TASK_COUNT": "3"}  # --array=1,3,7
    with pytest.raises(ShardError, match="not one evenly stepped range"):
        shards.from_environment(sparse)
    with pytest.raises(ShardError, match="SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN not"):
        shards.from_environment({"SLURM_ARRAY_TASK_ID": "1"})
    with pytest.raises(ShardError, match="SLURM_ARRAY_TASK_ID='x' is not a whole number"):
        shards.from_environment({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_MIN": "0",
                                 "SLURM_ARRAY_TASK_COUNT": "2"})


def test_gitlab_parallel_pair_is_one_based():
    shard = shards.from_environment({"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "3"})
    assert (shard.index, shard.count) == (3, 3)
    with pytest.raises(ShardError, match="CI_NODE_TOTAL is not"):
        shards.from_environment({"CI_NODE_INDEX": "1"})


def test_blank_scheduler_variables_are_not_set():
    # a CI template that sets CI_NODE_INDEX to "" on a Kubernetes job is the Kubernetes job's shard
    env = {"JOB_COMPLETION_INDEX": "1", "AGENTGYM_SHARD_COUNT": "2", "CI_NODE_INDEX": "", "CI_NODE_TOTAL": " "}
    shard = shards.from_environment(env)
    assert (shard.index, shard.count, shard.source) == (2, 2, shards.from_environment(
        {"JOB_COMPLETION_INDEX": "1", "AGENTGYM_SHARD_COUNT": "2"}).source)
    with pytest.raises(ShardError, match="no scheduler variables are set"):
        shards.from_environment({"SLURM_ARRAY_TASK_ID": "  ", "CI_NODE_INDEX": ""})


def test_auto_without_variables_lists_what_it_looked_for():
    with pytest.raises(ShardError) as caught:
        shards.from_environment({"HOME": "/root"})
    for name in ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "CI_NODE_INDEX",
                 "--agentgym-shard=I/N"):
        assert name in str(caught.value)


def test_auto_with_disagreeing_schedulers_names_both():
    env = {"JOB_COMPLETION_INDEX": "0", "AGENTGYM_SHARD_COUNT": "2", "CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "2"}
    with pytest.raises(ShardError, match=r"disagree: .*says shard 1/2, .*CI_NODE_INDEX=2.* says 2/2"):
        shards.from_environment(env)
    agreeing = {**env, "CI_NODE_INDEX": "1"}
    assert shards.from_environment(agreeing).name == "1/2"


def _selection() -> dict[shards.Key, float]:
    costs = {"BabyAI": 20, "TextCraft": 20, "Maze": 15, "Wordle": 8}
    sizes = {"BabyAI": 90, "TextCraft": 100, "Maze": 25, "Wordle": 25}
    return {(env, task, repeat): float(costs[env]) for env in costs for task in range(sizes[env])
            for repeat in (1, 2)}


@pytest.mark.parametrize("count", [1, 2, 3, 7, 500])
def test_split_covers_every_episode_once_and_is_balanced_by_cost(count):
    costs = _selection()
    split = shards.assign(costs, count)
    assert set(split) == set(costs) and set(split.values()) <= set(range(1, count + 1))
    loads = [sum(c for k, c in costs.items() if split[k] == i) for i in range(1, count + 1)]
    assert max(loads) - min(loads) <= max(costs.values())
    if count <= len(costs):
        assert min(loads) > 0


def test_split_balances_cost_not_count():
    costs = {("Long", 0, 1): 40.0, **{("Short", t, 1): 5.0 for t in range(8)}}
    split = shards.assign(costs, 2)
    loads = [sum(c for k, c in costs.items() if split[k] == s) for s in (1, 2)]
    counts = [sum(1 for i in split.values() if i == s) for s in (1, 2)]
    assert loads == [40.0, 40.0] and counts == [1, 8]


def test_split_does_not_depend_on_the_order_of_collection():
    costs = _selection()
    shuffled = list(costs.items())
    random.Random(4).shuffle(shuffled)
    assert shards.assign(dict(shuffled), 3) == shards.assign(costs, 3)


class _Item:
    def __init__(self, env, task, repeat=1):
        self.key = (env, task, repeat)


def test_select_keeps_the_shards_episodes_and_plain_tests_in_shard_one():
    items = [_Item("Maze", t) for t in range(5)] + ["test_plain"]
    cost = lambda item: None if isinstance(item, str) else 15  # noqa: E731
    kept1, dropped1, costs = shards.select(items, Shard(1, 2), cost)
    kept2, dropped2, _ = shards.select(items, Shard(2, 2), cost)
    assert "test_plain" in kept1 and "test_plain" in dropped2
    assert len(costs) == 5 and set(kept1) | set(kept2) == set(items) and not set(kept1) & set(kept2)
    assert [i.key[1] for i in kept2] == [1, 3]


def test_shard_record_holds_the_selection_so_the_split_can_be_computed_again():
    costs = {k: c for k, c in _selection().items() if k[0] in ("Maze", "Wordle")}
    record = shards.shard_record(Shard(2, 3, "test"), costs, {"Maze": {}, "Wordle": {}})
    assert record["selection"]["Maze"] == {"1": "0-24", "2": "0-24"}
    assert shards.decode_selection(record["selection"]) == set(costs)
    assert shards.expected_split(record) == shards.assign(costs, 3)
    assert record["episodes"] == sum(1 for i in shards.assign(costs, 3).values() if i == 2)
    other = shards.shard_record(Shard(1, 3), {**costs, ("Maze", 99, 1): 15.0}, {})
    assert other["selection_sha256"] != record["selection_sha256"]


def test_shard_directory_names_round_trip():
    assert shards.parse_dirname(Shard(2, 12).dirname) == (2, 12)
    assert shards.parse_dirname("shard-2-of-x") is None and shards.parse_dirname("logs") is None
