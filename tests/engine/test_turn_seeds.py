"""A seeded episode sends each model call its own seed, drawn from the episode's seed,
the task and the turn (engine/episode.turn_sampling): one seed for every call gives
every turn and every task the same random draws."""

from __future__ import annotations

import hashlib

from pytest_agentgym.engine.episode import turn_sampling


def test_each_turn_and_task_gets_its_own_seed_and_the_same_one_every_time():
    sampling = {"temperature": 1.0, "seed": 11}
    seeds = {(task, turn): turn_sampling(sampling, task, turn)["seed"] for task in range(8) for turn in range(15)}
    assert len(set(seeds.values())) == len(seeds)  # no two calls share a seed
    assert all(0 <= seed < 2**31 for seed in seeds.values())
    expected = int.from_bytes(hashlib.sha256(b"11:3:2").digest()[:4], "big") >> 1
    assert seeds[(3, 2)] == expected == turn_sampling(dict(sampling), 3, 2)["seed"]
    assert turn_sampling(sampling, 3, 2)["temperature"] == 1.0 and sampling["seed"] == 11  # not changed in place
    # a group's samples (seed + k) stay apart turn by turn
    group = [turn_sampling({"seed": 11 + k}, 3, turn)["seed"] for k in range(4) for turn in range(3)]
    assert len(set(group)) == 12


def test_an_unseeded_episode_sends_its_sampling_as_it_is():
    sampling = {"temperature": 0.7}
    assert turn_sampling(sampling, 0, 5) is sampling
    assert turn_sampling({"seed": True}, 0, 1) == {"seed": True}  # not a seed: the client refuses it, not here
