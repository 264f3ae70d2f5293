"""Reference policy for ALFWorld: searches the room for the object, treats it, puts it away.

Everything is derived from the conversation on every call (the policy keeps no
state). The first observation gives the receptacles ("you see a cabinet 2, a
cabinet 1, ...") and the task ("Your task is to: put a cool mug in
coffeemachine."), read with alfworld's goal templates: what to find, what to do
to it (clean with a sinkbasin, heat with a microwave, cool with a fridge, look
at it under a lamp) and where it goes. Replaying its own earlier actions against
the game's answers gives where it stands, what it holds, what it has treated,
put away and opened, and what it has seen where.

The next action: holding the object, treat it (go to the device, then ``clean|
heat|cool X with Y``), or for a lamp task carry it to where a lamp was seen and
``use`` it, then go to the target receptacle, open it if it is closed, and ``put
X in/on Y``; not holding it, take one where one is seen (not one already put
away), open a closed receptacle where it stands, or go to the next receptacle
not yet visited. With nothing left to try it answers ``look``.

It plays both grammars: json_2.1.1's ("put X in/on Y", the embedded server's
shipped games) and json_2.1.2's ("move X to Y", "You arrive at <receptacle>.",
a ``help`` action: ALFWorld's released games), told apart by ``help`` among the
first observation's actions. A ``go to`` the game refuses (two receptacles at one
spot) counts as visited. It does not know which object of a kind is which, search
inside objects, or look for the object at a receptacle it could not go to.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

_ROOM = re.compile(r"Looking quickly around you, you see (?P<list>.*?)\.\n")
_TASK = re.compile(r"Your task is to: (?P<task>.+?)\.(?:\n|$)")
_THING = re.compile(r"\ban? ([a-z]+ \d+)")
_ACTION = re.compile(r"Action:\s*(.*)", re.S)
#: json_2.1.2's arrival sentence, before what the receptacle holds
_ARRIVAL = re.compile(r"^You arrive at [^.]*\. ")
#: json_2.1.2's games offer "help" from the start (alfworld's patch_tw-pddl.py)
_MOVE_GRAMMAR = re.compile(r"AVAILABLE ACTIONS:.*\bhelp\b")
#: alfworld's goal templates (alfworld.gen.goal_library) -> (treatment, object, target);
#: the more specific first
TASKS = (
    ("clean", re.compile(r"^(?:put a clean (\w+) in|clean some (\w+) and put it in) (\w+)$")),
    ("heat", re.compile(r"^(?:put a hot (\w+) in|heat some (\w+) and put it in) (\w+)$")),
    ("cool", re.compile(r"^(?:put a cool (\w+) in|cool some (\w+) and put it in) (\w+)$")),
    ("two", re.compile(r"^(?:put two (\w+) in|find two (\w+) and put them in) (\w+)$")),
    ("look", re.compile(r"^(?:look at (\w+) under the|examine the (\w+) with the) (\w+)$")),
    ("place", re.compile(r"^put (?:a|some) (\w+) (?:in|on) (\w+)$")),
)
#: the receptacle type that does each treatment
DEVICES = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}


@dataclass(frozen=True)
class Task:
    kind: str
    thing: str
    #: the receptacle type it goes to; for "look", the lamp type
    target: str


def read_task(sentence: str) -> Task | None:
    for kind, pattern in TASKS:
        found = pattern.match(sentence.strip())
        if found:
            words = [word for word in found.groups() if word]
            return Task(kind, words[0], words[-1])
    return None


@dataclass
class State:
    """What the conversation says about the room so far."""

    receptacles: list[str]
    at: str | None = None
    holding: str | None = None
    treated: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)
    visited: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)
    #: receptacle -> the things last seen in or on it
    seen: dict[str, list[str]] = field(default_factory=dict)
    actions: int = 0
    #: json_2.1.2's "move X to Y" rather than json_2.1.1's "put X in/on Y"
    moves: bool = False

    def apply(self, action: str, answer: str) -> None:
        self.actions += 1
        if answer.startswith("Nothing happens."):
            if action.startswith("go to "):  # refused: it shares a spot with where it stands
                self.visited.add(action[len("go to "):])
            return
        answer = _ARRIVAL.sub("", answer)
        words = action.split() or [""]
        if action.startswith("go to "):
            self.at = action[len("go to "):]
            self.visited.add(self.at)
        elif words[0] == "open":
            self.opened.add(action[len("open "):])
        elif words[0] == "take" and " from " in action:
            self.holding = action[len("take "):].split(" from ")[0]
        elif words[0] == "put" and " in/on " in action:
            self.placed.add(action[len("put "):].split(" in/on ")[0])
            self.holding = None
        elif words[0] == "move" and " to " in action:
            self.placed.add(action[len("move "):].split(" to ")[0])
            self.holding = None
        elif words[0] in ("clean", "heat", "cool") and " with " in action:
            self.treated.add(action.split(" ", 1)[1].split(" with ")[0])
        if self.at and (answer.startswith(("On the ", "The ", "You open the "))):
            if "is closed" in answer and "open" not in words[:1]:
                self.closed.add(self.at)
            if "you see" in answer:
                self.seen[self.at] = _THING.findall(answer.split("you see", 1)[1])


def _first(receptacles: list[str], kind: str) -> str | None:
    named = sorted((r for r in receptacles if r.split()[0] == kind), key=lambda r: int(r.split()[-1]))
    return named[0] if named else None


def decide(task: Task, state: State) -> tuple[str, str]:
    """(thought, action) for the state."""
    held = state.holding
    if held and held.split()[0] == task.thing:
        device = DEVICES.get(task.kind)
        if device and held not in state.treated:
            where = _first(state.receptacles, device)
            if where and state.at != where:
                return f"I carry the {held}; the {where} can {task.kind} it.", f"go to {where}"
            if where:
                return f"I {task.kind} the {held} here.", f"{task.kind} {held} with {where}"
        if task.kind == "look":
            for place, things in state.seen.items():
                lamp = next((t for t in things if t.split()[0] == task.target), None)
                if lamp and state.at == place:
                    return f"The {lamp} is here: I switch it on.", f"use {lamp}"
                if lamp:
                    return f"I saw a {task.target} on the {place}.", f"go to {place}"
            return f"I look for a {task.target}.", _explore(state, "look")[1]
        target = _first(state.receptacles, task.target)
        if target and state.at != target:
            return f"The {held} goes to the {target}.", f"go to {target}"
        if target and target in state.closed and target not in state.opened:
            return f"The {target} is closed.", f"open {target}"
        if target:
            put = f"move {held} to {target}" if state.moves else f"put {held} in/on {target}"
            return f"I put the {held} away.", put
    here = state.seen.get(state.at or "", [])
    wanted = [t for t in here if t.split()[0] == task.thing and t not in state.placed]
    if state.at and not held and wanted and not (task.kind == "two" and state.at.split()[0] == task.target):
        return f"There is a {wanted[0]} here.", f"take {wanted[0]} from {state.at}"
    if state.at in state.closed and state.at not in state.opened:
        return f"The {state.at} is closed; I look inside.", f"open {state.at}"
    return _explore(state, task.thing)


def _explore(state: State, what: str) -> tuple[str, str]:
    for place in state.receptacles:
        if place not in state.visited:
            return f"I have not looked at the {place} yet for a {what}.", f"go to {place}"
    return "I have looked everywhere.", "look"


def _conversation(messages: Sequence[Message]) -> tuple[Task, State] | None:
    for position, message in enumerate(messages):
        content = message.get("content") or ""
        if message.get("role") != "user" or "Your task is to: " not in content:
            continue
        room, task = _ROOM.search(content), _TASK.search(content)
        parsed = read_task(task.group("task")) if task else None
        if not room or not parsed:
            continue
        state = State(receptacles=_THING.findall(room.group("list")),
                      moves=bool(_MOVE_GRAMMAR.search(content)))
        rest = messages[position + 1:]
        for reply, answer in zip(rest[0::2], rest[1::2]):
            found = _ACTION.findall(reply.get("content") or "")
            action = found[-1].strip() if found else ""
            state.apply(action, answer.get("content") or "")
        return parsed, state
    return None


class ALFWorldPolicy:
    name = "ALFWorld"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return _conversation(messages) is not None

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        task, state = _conversation(messages)
        thought, action = decide(task, state)
        return react(thought, action)

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        _, state = _conversation(messages)
        return react("Any action.", rng.choice(["look", "inventory",
                                                *(f"go to {r}" for r in state.receptacles)]))


POLICY = ALFWorldPolicy()
