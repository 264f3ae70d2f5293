"""TextCraft tasks: which goal a ``data_idx`` selects, and the crafting commands shown.

Goal mapping (as in AgentGym): the 544 items with a recipe depth of at least 1 in
the recipe book's reading order (the original's, see ``textcraft_recipes``),
sorted by depth ascending (a stable sort), indexed by ``data_idx``. The original
takes ``data_idx % 544``, so 544 or -1 silently plays another task; here an index
outside 0-543 raises :class:`TaskOutOfRange` (docs/envs/textcraft.md).

Crafting commands (the observation's list) are the original's exact list as its
server produces it under ``PYTHONHASHSEED=0``, whatever this process's own hash
seed. The rule, step by step as the original (AgentGym 3ef9235) does it:

1. ``random.Random(42)``, fresh for each reset (the original seeds the global
   ``random`` with 42 at each reset).
2. Walk the goal's recipe tree: the item's recipes (its own, else for a tag those
   of its members), then for each of them and each of its ingredients, in order,
   that ingredient's walk; an item already on the current path yields nothing. The
   walk keeps repeats (an ingredient reached twice is walked twice).
3. For each recipe of the walk and each of its ingredients that some recipe uses:
   draw ``min(10, n)`` of the ``n`` recipes using it (``sample``), in the book's
   order of uses. These are the distractor candidates.
4. Put the walk's command lines into a set, then the candidates' lines that are
   not in it into a second set. Both are Python sets of str, so they are iterated
   in CPython's order under ``PYTHONHASHSEED=0`` (:mod:`.seed0_set`).
5. Lines = the first set's lines + ``sample`` of ``min(10, n)`` of the second's,
   then one ``shuffle``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from pytest_agentgym.servers.embedded.seed0_set import Seed0StrSet
from pytest_agentgym.servers.embedded.textcraft_recipes import Recipe, RecipeBook, display_name, shipped_book

#: Seed of the distractor sampling and shuffle (the original's ``random.seed(42)`` at each reset).
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


def recipe_walk(book: RecipeBook, name: str, path: frozenset[str] = frozenset()) -> list[Recipe]:
    """The original's walk of ``name``'s recipe tree, repeats included (step 2 above)."""
    if name in path:
        return []
    recipes = book.recipes_for(name)
    walked = list(recipes)
    inner = path | {name}
    for recipe in recipes:
        for stack in recipe.inputs:
            walked.extend(recipe_walk(book, stack.name, inner))
    return walked


def crafting_commands(book: RecipeBook, goal: str, seed: int = COMMANDS_SEED) -> tuple[str, ...]:
    """The original's crafting-command lines for ``goal`` under PYTHONHASHSEED=0."""
    rng = random.Random(seed)
    walk = recipe_walk(book, goal)
    candidates: list[Recipe] = []
    for recipe in walk:
        for stack in recipe.inputs:
            uses = book.uses.get(stack.name)
            if uses:
                candidates.extend(rng.sample(uses, min(len(uses), USES_PER_INGREDIENT)))
    shown = Seed0StrSet(recipe.command for recipe in walk)
    pool = Seed0StrSet()
    for recipe in candidates:
        if recipe.command not in shown:
            pool.add(recipe.command)
    distractors = list(pool)
    lines = list(shown) + rng.sample(distractors, min(len(distractors), MAX_DISTRACTORS))
    rng.shuffle(lines)
    return tuple(lines)


class TaskOutOfRange(ValueError):
    """A ``data_idx`` that names no goal; the message gives the valid range."""


class TaskSet:
    """``data_idx`` -> :class:`Task`, computed on demand and cached."""

    def __init__(self, book: RecipeBook | None = None) -> None:
        self.book = book or shipped_book()
        # sorted() is stable: within a depth, the book's (the original's) reading order
        self.goals = tuple(sorted(self.book.item_recipes, key=self.book.depth))
        self._cache: dict[str, Task] = {}

    def __len__(self) -> int:
        return len(self.goals)

    def goal(self, data_idx: int) -> str:
        if not 0 <= data_idx < len(self.goals):
            raise TaskOutOfRange(
                f"data_idx {data_idx} is out of range: TextCraft task indices are "
                f"0-{len(self.goals) - 1} (the {len(self.goals)} goals)")
        return self.goals[data_idx]

    def task(self, data_idx: int) -> Task:
        goal = self.goal(data_idx)
        if goal not in self._cache:
            self._cache[goal] = Task(goal, crafting_commands(self.book, goal))
        return self._cache[goal]


@lru_cache(maxsize=1)
def shipped_tasks() -> TaskSet:
    return TaskSet()
