"""Reference policy for TextCraft: plans a crafting tree from the commands it is shown.

Everything is derived from the conversation on every call (the policy keeps no
state):

1. The observation ``Crafting commands:\\n...\\n\\nGoal: craft X.`` gives the
   recipes and the goal.
2. Replaying its own earlier actions against the server's answers gives the
   inventory (``Got``, ``Crafted``, ``Inventory:``) and what failed: items the
   server would not give, craft commands it refused.
3. A plan is built from that inventory: for the goal, take what is carried,
   otherwise pick the cheapest recipe (fewest actions) and recurse into its
   ingredients; an ingredient no command makes is fetched with ``get``, all of
   it in one action. A craft makes one batch, so a craft needed k times is
   issued k times. The first action of the plan is the reply.

Generic ingredients ("planks", "wool") are never an output of a command. Their
kinds are the outputs named "<something> planks" whose recipes do not use the
generic itself, and that are not an ingredient of another kind (so "white wool",
from which the coloured wools are dyed, is not a kind of "wool"). The policy
prefers a kind it already carries, else the cheapest. If the server refuses a
command with a kind, that kind is not used for that generic again; if it refuses
``get`` of a name that looked basic, the name is treated as generic.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

_OBSERVATION = re.compile(r"Crafting commands:\n(?P<body>.*?)\n\nGoal: craft (?P<goal>.+?)\.\s*$", re.S)
_COMMAND = re.compile(r"craft (\d+) (.+?) using (.+)$")
_COUNTED = re.compile(r"(\d+) (.+)$")
_ACTION = re.compile(r"Action:\s*(.*?)(?=\n|$)", re.S)
_GOT = re.compile(r"Got (\d+) (.+)$")
_CRAFTED = re.compile(r"Crafted (\d+) (?:minecraft:)?(\S+)$")
_INVENTORY_ENTRY = re.compile(r"\[([^\]]+)\] \((-?\d+)\)")
_UNAVAILABLE = re.compile(r"Could not find (?!enough items|a valid recipe)(.+)$")
INFINITE = math.inf


@dataclass(frozen=True)
class CraftingCommand:
    """One line ``craft 4 stick using 2 planks`` of the observation."""

    output: str
    count: int
    inputs: tuple[tuple[str, int], ...]

    def text(self, substitutes: dict[str, str] | None = None) -> str:
        substitutes = substitutes or {}
        parts = ", ".join(f"{n} {substitutes.get(name, name)}" for name, n in self.inputs)
        return f"craft {self.count} {self.output} using {parts}"


def parse_command(line: str) -> CraftingCommand | None:
    match = _COMMAND.match(line.strip())
    if not match:
        return None
    inputs = []
    for part in match.group(3).split(","):
        counted = _COUNTED.match(part.strip())
        if not counted:
            return None
        inputs.append((counted.group(2), int(counted.group(1))))
    return CraftingCommand(match.group(2), int(match.group(1)), tuple(inputs))


def action_of(reply: str) -> str:
    """The action the AgentGym client would send for one of our replies."""
    found = _ACTION.findall(reply)
    raw = found[0] if found else ""
    return " ".join(re.sub(r"[^A-Za-z0-9, ]+", "", raw).split())


@dataclass
class Episode:
    """What the conversation says about the current episode."""

    goal: str
    commands: list[CraftingCommand]
    inventory: dict[str, int] = field(default_factory=dict)
    unavailable: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    last_answer: str = ""
    last_action: str = ""


def read_episode(messages: Sequence[Message]) -> Episode | None:
    """Find the observation and replay the turns after it (None: not TextCraft)."""
    start = None
    for i, message in enumerate(messages):
        if message.get("role") == "user" and _OBSERVATION.search(message.get("content") or ""):
            start = i
    if start is None:
        return None
    found = _OBSERVATION.search(messages[start]["content"])
    assert found is not None
    commands = [c for c in map(parse_command, found.group("body").split("\n")) if c]
    episode = Episode(found.group("goal").strip(), commands)
    action = None
    for message in messages[start + 1:]:
        if message.get("role") == "assistant":
            action = action_of(message.get("content") or "")
        elif message.get("role") == "user" and action is not None:
            _apply(episode, action, (message.get("content") or "").strip())
            action = None
    return episode


def _apply(episode: Episode, action: str, answer: str) -> None:
    inv = episode.inventory
    episode.last_action, episode.last_answer = action, answer
    if match := _GOT.match(answer):
        inv[match.group(2)] = inv.get(match.group(2), 0) + int(match.group(1))
    elif match := _CRAFTED.match(answer):
        made = match.group(2).replace("_", " ")
        command = parse_command(action)
        for name, n in command.inputs if command else ():
            inv[name] = inv.get(name, 0) - n
            if inv[name] <= 0:
                del inv[name]
        inv[made] = inv.get(made, 0) + int(match.group(1))
    elif answer.startswith("Inventory:"):
        inv.clear()
        for name, n in _INVENTORY_ENTRY.findall(answer):
            if int(n) > 0:
                inv[name] = int(n)
    elif answer.startswith("Could not find a valid recipe"):
        episode.refused.add(action)
    elif match := _UNAVAILABLE.match(answer):
        episode.unavailable.add(match.group(1))


class Planner:
    """The cheapest way to the goal from the current inventory."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.makers: dict[str, list[CraftingCommand]] = {}
        for command in episode.commands:
            self.makers.setdefault(command.output, []).append(command)
        self._cost: dict[tuple[str, int], float] = {}

    # -- what an ingredient is ---------------------------------------------------------

    def kinds(self, generic: str) -> list[str]:
        """Specific items that stand for ``generic`` in a command, best first."""
        named = [
            out for out in self.makers
            if out.endswith(" " + generic) and generic not in self.made_from(out)
        ]
        used_by_kinds = {name for out in named for c in self.makers[out] for name, _ in c.inputs}
        return [k for k in named if k not in used_by_kinds]

    def made_from(self, name: str) -> set[str]:
        """Every name that some command for ``name`` uses, directly or further down."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            for command in self.makers.get(todo.pop(), ()):
                for ingredient, _ in command.inputs:
                    if ingredient not in seen:
                        seen.add(ingredient)
                        todo.append(ingredient)
        return seen

    def is_generic(self, name: str) -> bool:
        if name in self.makers:
            return False
        if name in self.episode.unavailable:
            return True
        return bool(self.kinds(name))

    def substitute(self, command: CraftingCommand, need: int) -> dict[str, str] | None:
        """Which kind to use for each generic ingredient of ``command`` (None: none works)."""
        batches = math.ceil(need / command.count)
        chosen: dict[str, str] = {}
        for name, n in command.inputs:
            if not self.is_generic(name):
                continue
            options = [
                k for k in self.kinds(name)
                if command.text({**chosen, name: k}) not in self.episode.refused
            ]
            if not options:
                return None
            carried = [k for k in options if self.episode.inventory.get(k, 0) > 0]
            chosen[name] = max(carried, key=lambda k: self.episode.inventory[k]) if carried else min(
                options, key=lambda k: self.cost(k, n * batches)
            )
        if command.text(chosen) in self.episode.refused:
            return None
        return chosen

    # -- cost in actions -----------------------------------------------------------------

    def cost(self, name: str, need: int, path: frozenset[str] = frozenset()) -> float:
        key = (name, need)
        if key in self._cost:
            return self._cost[key]
        if name in path:
            return INFINITE
        if name not in self.makers:
            if self.is_generic(name):
                kinds = self.kinds(name)
                best = min((self.cost(k, need, path | {name}) for k in kinds), default=INFINITE)
            else:
                best = INFINITE if name in self.episode.unavailable else 1
        else:
            best = min(
                (self._recipe_cost(c, need, path | {name}) for c in self.makers[name]),
                default=INFINITE,
            )
        self._cost[key] = best
        return best

    def _recipe_cost(self, command: CraftingCommand, need: int, path: frozenset[str]) -> float:
        batches = math.ceil(need / command.count)
        return batches + sum(self.cost(name, n * batches, path) for name, n in command.inputs)

    # -- the plan --------------------------------------------------------------------------

    def plan(self) -> list[str]:
        carried = dict(self.episode.inventory)
        gets: dict[str, int] = {}
        crafts: list[str] = []
        self._build(self.episode.goal, 1, carried, gets, crafts, frozenset())
        return [f"get {n} {name}" for name, n in gets.items()] + crafts

    def _build(self, name, need, carried, gets, crafts, path) -> None:
        take = min(carried.get(name, 0), need)
        if take:
            carried[name] -= take
            need -= take
        if need <= 0:
            return
        if name not in self.makers and not self.is_generic(name):
            gets[name] = gets.get(name, 0) + need
            return
        if name not in self.makers:  # generic: make one of its kinds
            options = [k for k in self.kinds(name) if k not in path]
            kind = max(options, key=lambda k: carried.get(k, 0)) if any(
                carried.get(k, 0) for k in options) else min(options, key=lambda k: self.cost(k, need))
            self._build(kind, need, carried, gets, crafts, path | {name})
            return
        best = None
        for command in self.makers[name]:
            chosen = self.substitute(command, need)
            if chosen is None:
                continue
            price = self._recipe_cost(command, need, path | {name})
            if best is None or price < best[0]:
                best = (price, command, chosen)
        if best is None or best[0] == INFINITE:
            raise LookupError(f"no usable recipe for {name}")
        _, command, chosen = best
        batches = math.ceil(need / command.count)
        for ingredient, n in command.inputs:
            self._build(chosen.get(ingredient, ingredient), n * batches, carried, gets, crafts,
                        path | {name})
        crafts.extend([command.text(chosen)] * batches)
        carried[name] = carried.get(name, 0) + batches * command.count - need


class TextCraftPolicy:
    """The scripted TextCraft player (see the module docstring)."""

    name = "TextCraft"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return any(
            m.get("role") == "user"
            and "Crafting commands:" in (m.get("content") or "")
            and "Goal: craft" in (m.get("content") or "")
            for m in messages
        )

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        episode = read_episode(messages)
        if episode is None:
            return react("I cannot see the crafting commands; let me check what I carry.", "inventory")
        if episode.last_answer.startswith("Could not find enough items") and episode.last_action != "inventory":
            return react("My count of the inventory is off; let me look at it.", "inventory")
        try:
            steps = Planner(episode).plan()
        except (LookupError, ValueError):
            steps = []
        if not steps:
            return self.random_reply(messages, rng)
        action = steps[0]
        left = len(steps) - 1
        thought = (
            f"To craft {episode.goal} I planned {len(steps)} more action(s); "
            f"next: {action}. {left} to go after this."
        )
        return react(thought, action)

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        episode = read_episode(messages)
        choices = ["inventory"]
        if episode is not None and episode.commands:
            command = rng.choice(episode.commands)
            name, _ = rng.choice(command.inputs)
            choices += [f"get {rng.randint(1, 4)} {name}", command.text()]
        action = rng.choice(choices)
        return react(f"Trying something at random: {action}.", action)


POLICY = TextCraftPolicy()
