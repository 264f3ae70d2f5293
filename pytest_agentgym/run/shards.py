"""Shards: one run's episodes split over several pytest processes on several machines.

``--agentgym-shard=I/N`` (1 <= I <= N) keeps the I-th of N slices of the collected
episodes; the others are deselected. ``--agentgym-shard=auto`` reads I and N from a
batch scheduler's variables (:func:`from_environment`). Each shard writes its own run
directory, ``reports/<run_id>/shard-I-of-N/``; ``pytest-agentgym merge``
(:mod:`pytest_agentgym.run.merge`) checks the shards and writes the one run they make.

The split (:func:`assign`) is a pure function of the selection's episode keys
(env, task, repeat) and their expected costs (the environment's max rounds): not of
the order items are collected in, the machine, or the process. Every shard collects
the same selection and so computes the same split; merge computes it again from
what each shard recorded (:func:`shard_record`) to name missing and overlapping
episodes. Episodes are dealt, most expensive first, each to the shard with the
least expected cost so far (ties: the lower index), so shards differ by at most one
episode's cost. Plain code: no pytest, no I/O.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_agentgym.config.tasks import parse_tasks, task_ranges
from pytest_agentgym.config.shard import (  # noqa: F401  (what a shard is; the split is here)
    Key,
    Shard,
    ShardError,
    from_environment,
    from_record,
    parse_dirname,
    parse_option,
    resolve,
)

# -- the split ------------------------------------------------------------------------------


def assign(costs: Mapping[Key, float], count: int) -> dict[Key, int]:
    """Each episode key -> its shard (1..count). Most expensive first, then by key; each goes
    to the shard with the least expected cost so far (ties: the lowest index)."""
    loads = [(0.0, index) for index in range(1, count + 1)]
    out: dict[Key, int] = {}
    for key in sorted(costs, key=lambda k: (-costs[k], k)):
        load, index = heapq.heappop(loads)
        out[key] = index
        heapq.heappush(loads, (load + costs[key], index))
    return out


def select(items: Sequence[Any], shard: Shard, cost: Callable[[Any], float | None]
           ) -> tuple[list[Any], list[Any], dict[Key, float]]:
    """Split collected ``items`` for ``shard``: (kept, deselected, the selection's cost per key).
    ``cost(item)`` is an episode item's expected cost (its ``key`` is (env, task, repeat)), None
    for any other item (a plain test): those run in shard 1 only."""
    cost_of = {id(item): cost(item) for item in items}
    costs = {item.key: float(cost_of[id(item)]) for item in items if cost_of[id(item)] is not None}
    owner = assign(costs, shard.count)
    kept, dropped = [], []
    for item in items:
        mine = shard.index == 1 if cost_of[id(item)] is None else owner[item.key] == shard.index
        (kept if mine else dropped).append(item)
    return kept, dropped, costs


def encode_selection(keys: Iterable[Key]) -> dict[str, dict[str, str]]:
    """Keys, compactly: ``{"BabyAI": {"1": "0-89"}, "Maze": {"1": "0-24", "2": "0-24"}}`` (repeat -> tasks)."""

    grouped: dict[str, dict[int, list[int]]] = {}
    for env, task, repeat in keys:
        grouped.setdefault(env, {}).setdefault(repeat, []).append(task)
    return {env: {str(r): task_ranges(tasks) for r, tasks in sorted(by_repeat.items())}
            for env, by_repeat in sorted(grouped.items())}


def decode_selection(data: Mapping[str, Mapping[str, str]]) -> set[Key]:

    return {(env, task, int(repeat)) for env, by_repeat in data.items()
            for repeat, tasks in by_repeat.items() for task in parse_tasks(tasks)}


def selection_digest(keys: Iterable[Key], env_costs: Mapping[str, float]) -> str:
    """What two shards must agree on for their splits to fit together."""
    text = json.dumps([sorted(keys), sorted(env_costs.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shard_record(shard: Shard, costs: Mapping[Key, float], plans: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """run.json's ``shard`` entry: which slice this run is of which selection, and what its
    suites ask of each environment (merge judges the gates with it)."""
    env_costs = {env: cost for (env, _, _), cost in costs.items()}
    return {"index": shard.index, "count": shard.count, "source": shard.source,
            "episodes": sum(1 for i in assign(costs, shard.count).values() if i == shard.index),
            "selection_episodes": len(costs), "selection_sha256": selection_digest(costs, env_costs),
            "env_costs": env_costs, "selection": encode_selection(costs), "plans": dict(plans)}


def expected_split(record: Mapping[str, Any]) -> dict[Key, int]:
    """The split a shard's run.json entry implies (the same for every shard of a run)."""
    env_costs = record["env_costs"]
    keys = decode_selection(record["selection"])
    return assign({key: float(env_costs[key[0]]) for key in keys}, int(record["count"]))
