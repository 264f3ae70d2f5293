"""seed0_set against CPython itself: a child interpreter started with PYTHONHASHSEED=0.

This process runs with whatever hash seed pytest got; the child is the oracle for
``hash(str)`` and for the iteration order of ``set(strings)`` under seed 0.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from pytest_agentgym.servers.embedded.seed0_set import Seed0StrSet, seed0_hash

pytestmark = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info < (3, 11),
    reason="the oracle is CPython >= 3.11 (SipHash-1-3 str hashes)",
)

ORACLE = (
    "import json, sys; groups = json.load(sys.stdin); "
    "print(json.dumps({'hashes': [[hash(s) for s in g] for g in groups], "
    "'orders': [list(set(g)) for g in groups]}))"
)


def seed0_oracle(groups: list[list[str]]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ORACLE], input=json.dumps(groups), capture_output=True, text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"}, check=True,
    )
    return json.loads(out.stdout)


def random_groups(seed: int, count: int) -> list[list[str]]:
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz ,0123456789\u00e9\u03bb\U0001f600"
    groups = []
    for _ in range(count):
        size = rng.choice([0, 1, 3, 5, 6, 10, 20, 40, 100, 300])
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(size)]
        groups.append(words + words[: rng.randint(0, 3)])  # repeats are ignored, as in a set
    return groups


def test_hashes_and_set_orders_equal_cpython_under_seed_0():
    groups = random_groups(1, 200)
    oracle = seed0_oracle(groups)
    strings = [s for g in groups for s in g]
    assert len(strings) > 5000
    assert [seed0_hash(s) for s in strings] == [h for hs in oracle["hashes"] for h in hs]
    assert [list(Seed0StrSet(g)) for g in groups] == oracle["orders"]


def test_membership_length_and_repeats():
    chosen = Seed0StrSet(["craft 1 a using 1 b", "x", "craft 1 a using 1 b", ""])
    assert len(chosen) == 3
    assert "x" in chosen and "" in chosen and "y" not in chosen and 3 not in chosen
    assert sorted(chosen) == ["", "craft 1 a using 1 b", "x"]

