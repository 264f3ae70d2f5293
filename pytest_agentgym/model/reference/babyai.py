"""Reference policy for BabyAI: read the server's text, pursue the mission's parts in order.

Everything comes from the conversation. The first server observation carries
"Your goal: ..."; every observation ends with the "Available actions" list; the
latest description ("In front of you in this room ...") says where the visible
objects are relative to the agent. The policy

1. splits the goal into tasks (go to / open / pick up / put next to). The server
   rewrites "A, then B" as "A, and B" (A first) and "A after you B" as "A and B"
   (B first); a plain "A and B" may be done in any order, so within a group joined
   by " and " the tasks are pursued right to left, which suits both readings;
2. replays its own earlier actions and the observations they produced to see
   which tasks are already achieved (and in which order), and to keep track of
   its pose and of the walls it faced since its last macro move;
3. acts on the first unachieved task when its object is in view, with the
   server's macro actions ("go to X k", "pickup X k"), "toggle" once in front of
   a door (the "toggle and go through" macro would end on a step that is not the
   toggle, which earns no reward), and a short planned manoeuvre that leaves the
   target diagonally or two cells ahead before "drop" for "put next to";
4. otherwise explores: it looks around (three left turns), goes through doors it
   has not used yet (fetching the key first when a locked door's key is in view),
   and otherwise walks forward.

Locations ("the ball on your left") refer to the agent's starting pose. While the
agent has only turned and walked straight, the policy knows that pose and
filters candidates by it; after a macro move it accepts any match.
"""

from __future__ import annotations

import random
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

_GOAL = re.compile(r"Your goal: (.*)")
_AVAILABLE = re.compile(r"Available actions: \[(.*)\]\s*$", re.DOTALL)
_THING = re.compile(
    r"There is a ([a-z]+ [a-z]+(?: door)?) (\d+) (?:right in front of you (\d+) steps away"
    r"|(-?\d+) steps in front of you and (\d+) steps to your (left|right))\."
)
_FACING = re.compile(r"You are facing a (?:wall|box) (\d+) steps away\.")
_CARRY = re.compile(r"You are carrying a ([a-z]+) ([a-z]+)\.")
_ACTION = re.compile(r"Action:\s*(.*?)(?=\n|$)", re.DOTALL)
_DESC = re.compile(
    r"^(?:the|a) (?:(red|green|blue|purple|yellow|grey) )?(ball|box|key|door|object)"
    r"(?: (on your left|on your right|in front of you|behind you))?$"
)
_LOCATIONS = {"on your left": "left", "on your right": "right",
              "in front of you": "front", "behind you": "behind"}
_DOOR_MOVES = ("go through ", "toggle and go through ")
_TURNS = ("turn left", "turn right")
#: Unit step of each heading in a frame's (ahead, right) axes; turning right adds 1.
_STEP = ((1, 0), (0, 1), (-1, 0), (0, -1))

Cell = tuple[int, int]
Pose = tuple[int, int, int]


@dataclass(frozen=True)
class Thing:
    """One object of a description: its name, number and place relative to the agent."""

    name: str  # "red ball", "blue closed door"
    number: int
    ahead: int
    right: int

    @property
    def label(self) -> str:
        return f"{self.name} {self.number}"


@dataclass(frozen=True)
class Scene:
    things: tuple[Thing, ...] = ()
    carrying: str | None = None  # "red key"
    facing: int | None = None  # cells to the wall or box straight ahead

    @classmethod
    def parse(cls, text: str) -> "Scene | None":
        if "The room has walls around you." not in text:
            return None  # a refusal, the action list, or an error: nothing moved
        things = []
        for found in _THING.finditer(text):
            if found[3] is not None:
                ahead, right = int(found[3]), 0
            else:
                ahead, right = int(found[4]), int(found[5]) * (1 if found[6] == "right" else -1)
            things.append(Thing(found[1], int(found[2]), ahead, right))
        carried, facing = _CARRY.search(text), _FACING.search(text)
        return cls(tuple(things), f"{carried[1]} {carried[2]}" if carried else None,
                   int(facing[1]) if facing else None)

    def at(self, ahead: int, right: int) -> list[Thing]:
        return [t for t in self.things if (t.ahead, t.right) == (ahead, right)]


@dataclass(frozen=True)
class Desc:
    """An object description of the mission: colour, type, location (any may be None)."""

    color: str | None
    kind: str | None  # None for "object"
    loc: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Desc | None":
        found = _DESC.match(text.strip())
        if not found:
            return None
        return cls(found[1], None if found[2] == "object" else found[2], _LOCATIONS.get(found[3] or ""))

    def matches(self, name: str | None) -> bool:
        words = (name or "").split()
        return bool(words) and (self.color in (None, words[0])) and (self.kind in (None, words[-1]))


@dataclass(frozen=True)
class Task:
    verb: str  # "go", "open", "pickup", "put"
    obj: Desc
    dest: Desc | None = None


def parse_goal(goal: str) -> list[Task]:
    """Tasks in the order to pursue them (see the module docstring)."""
    tasks: list[Task] = []
    for group in goal.split(", and "):
        parts = [_parse_task(part.strip()) for part in group.split(" and ")]
        tasks.extend(task for task in reversed(parts) if task is not None)
    return tasks


def _parse_task(text: str) -> Task | None:
    for prefix, verb in (("go to ", "go"), ("open ", "open"), ("pick up ", "pickup")):
        if text.startswith(prefix):
            desc = Desc.parse(text[len(prefix):])
            return Task(verb, desc) if desc else None
    if text.startswith("put ") and " next to " in text:
        obj, dest = (Desc.parse(part) for part in text[4:].split(" next to ", 1))
        return Task("put", obj, dest) if obj and dest else None
    return None


@dataclass
class Step:
    """One round: the action sent, what came back, and the description it was chosen from."""

    action: str
    observation: str
    after: Scene | None  # None when nothing moved (refusal, action list)
    before: Scene


@dataclass
class Episode:
    """What the conversation says so far, including the agent's pose in a frame that
    starts at the latest macro move (the start pose while ``reframed`` is false)."""

    goal: str = ""
    steps: list[Step] = field(default_factory=list)
    available: list[str] = field(default_factory=list)
    scene: Scene = field(default_factory=Scene)
    pose: Pose = (0, 0, 0)
    reframed: bool = False
    walls: set[Cell] = field(default_factory=set)

    @classmethod
    def read(cls, messages: Sequence[Message]) -> "Episode":
        episode, pending = cls(), None
        for message in messages:
            content = message.get("content") or ""
            if message.get("role") == "assistant":
                found = _ACTION.findall(content)
                pending = " ".join(found[0].split()).lower() if len(found) == 1 else ""
            elif message.get("role") == "user" and "Available actions: [" in content:
                if not episode.goal:
                    goal = _GOAL.search(content)
                    episode.goal = goal[1].strip() if goal else ""
                    if not episode.goal:
                        continue
                elif pending is not None:
                    episode._record(pending, content)
                pending = None
                episode.scene = Scene.parse(content) or episode.scene
                listed = _AVAILABLE.search(content)
                episode.available = re.findall(r'"([^"]*)"', listed[1]) if listed else []
                episode._note_wall()
        return episode

    def _record(self, action: str, observation: str) -> None:
        before, after = self.scene, Scene.parse(observation)
        if after is not None:
            self._move(action, before)
        self.steps.append(Step(action, observation, after, before))

    def _move(self, action: str, before: Scene) -> None:
        x, y, heading = self.pose
        if action in _TURNS:
            self.pose = x, y, (heading + (1 if action == "turn right" else -1)) % 4
        elif action == "move forward":
            if not before.at(1, 0) and before.facing != 1:
                self.pose = x + _STEP[heading][0], y + _STEP[heading][1], heading
        elif action not in ("drop", "toggle"):  # a macro: the new pose is unknown
            self.pose, self.reframed, self.walls = (0, 0, 0), True, set()

    def _note_wall(self) -> None:
        if self.scene.facing is not None:
            self.walls.add(self.cell_of(self.scene.facing, 0))

    def cell_of(self, ahead: int, right: int) -> Cell:
        """Frame cell of a place seen at (ahead, right) from the current pose."""
        x, y, heading = self.pose
        f, r = _STEP[heading], _STEP[(heading + 1) % 4]
        return x + ahead * f[0] + right * r[0], y + ahead * f[1] + right * r[1]

    def loc_ok(self, desc: Desc, thing: Thing) -> bool:
        if desc.loc is None or self.reframed:
            return True
        ahead, right = self.cell_of(thing.ahead, thing.right)
        return {"left": right < 0, "right": right > 0, "front": ahead > 0, "behind": ahead < 0}[desc.loc]

    def options(self, desc: Desc, prefix: str) -> list[str]:
        """Available actions ``prefix + <thing matching desc>``, nearest first."""
        return [prefix + t.label for t in self.scene.things
                if prefix + t.label in self.available and desc.matches(t.name) and self.loc_ok(desc, t)]


class BabyAIPolicy:
    name = "BabyAI"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return any(
            message.get("role") == "user"
            and "Your goal: " in (message.get("content") or "")
            and "Available actions: [" in (message.get("content") or "")
            for message in messages
        )

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        episode = Episode.read(messages)
        if not episode.goal:
            return self.random_reply(messages, rng)
        return react(*decide(episode))

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        action = rng.choice(Episode.read(messages).available or ["turn left", "turn right", "move forward"])
        return react(f"I will try '{action}'.", action)


# -- deciding -----------------------------------------------------------------------


def decide(episode: Episode) -> tuple[str, str]:
    """(thought, action) for the next round."""
    tasks = parse_goal(episode.goal)
    progress = 0
    for task in tasks:
        index = next((i for i in range(progress, len(episode.steps))
                      if _achieves(task, episode.steps[i])), None)
        if index is None:
            return _pursue(task, episode)
        progress = index + 1
    if tasks:  # all looks done, yet the episode goes on: redo the last task
        return _pursue(tasks[-1], episode)
    return "I cannot read the goal; I look around.", _explore(episode)


def _achieves(task: Task, step: Step) -> bool:
    after, before, action = step.after, step.before, step.action
    if after is None:
        return False
    if task.verb == "go":
        return any(task.obj.matches(t.name) for t in after.at(1, 0))
    if task.verb == "pickup":
        return action.startswith("pickup") and task.obj.matches(after.carrying)
    if task.verb == "open":
        if action == "toggle":
            return any(task.obj.matches(t.name) for t in before.at(1, 0))
        prefix = "toggle and go through "
        return action.startswith(prefix) and task.obj.matches(action[len(prefix):].rsplit(" ", 1)[0])
    return action == "drop" and task.obj.matches(before.carrying) and any(
        task.dest.matches(t.name) for spot in ((2, 0), (1, 1), (1, -1)) for t in before.at(*spot))


def _pursue(task: Task, episode: Episode) -> tuple[str, str]:
    scene, available = episode.scene, episode.available
    if task.verb == "go":
        options = episode.options(task.obj, "go to ")
        if options and not any(task.obj.matches(t.name) for t in scene.at(1, 0)):
            return f"I can see what I must reach; '{options[0]}' takes me there.", options[0]
    elif task.verb == "open":
        return _open(task, episode)
    elif task.obj.matches(scene.carrying) and task.verb == "put":
        return _put(task, episode)
    elif scene.carrying is not None and not task.obj.matches(scene.carrying) and "drop" in available:
        return f"I need my hands free; I put the {scene.carrying} down.", "drop"
    else:
        options = episode.options(task.obj, "pickup ")
        if options:
            return f"The object I need is in view; '{options[0]}'.", options[0]
    return "What I need is not in view; I explore.", _explore(episode)


def _open(task: Task, episode: Episode) -> tuple[str, str]:
    scene, available = episode.scene, episode.available
    front = [t for t in scene.at(1, 0) if task.obj.matches(t.name) and "open door" not in t.name]
    if front and "toggle" in available:
        return f"The {front[0].name} is right in front of me; I open it.", "toggle"
    for door in scene.things:
        if not task.obj.matches(door.name) or "open door" in door.name or not episode.loc_ok(task.obj, door):
            continue
        color = door.name.split()[0]
        if "locked" in door.name and scene.carrying != f"{color} key":
            key = _fetch_key(episode, color)
            if key:
                return f"The {door.name} needs a {color} key.", key
        elif not front and f"go to {door.label}" in available:
            return f"I walk up to the {door.name} to open it.", f"go to {door.label}"
    if task.obj.color and scene.carrying is None:  # the door may be locked: take its key along
        key = episode.options(Desc(task.obj.color, "key"), "pickup ")
        if key:
            return f"A {task.obj.color} key may open the door I am looking for.", key[0]
    return "The door I must open is not in view; I explore.", _explore(episode)


def _fetch_key(episode: Episode, color: str) -> str | None:
    if episode.scene.carrying is not None:
        return "drop" if "drop" in episode.available else None
    options = episode.options(Desc(color, "key"), "pickup ")
    return options[0] if options else None


def _put(task: Task, episode: Episode) -> tuple[str, str]:
    targets = [t for t in episode.scene.things if task.dest.matches(t.name) and episode.loc_ok(task.dest, t)]
    if not targets:
        return "I carry it; now I look for where it goes.", _explore(episode)
    target = targets[0]
    far = abs(target.ahead) + abs(target.right) > 3
    if far and f"go to {target.label}" in episode.available:
        return f"I carry it over to the {target.name}.", f"go to {target.label}"
    move = _drop_plan(episode, target)
    if move == "drop":
        return f"Dropping here puts it next to the {target.name}.", "drop"
    if move:
        return f"I manoeuvre so that the {target.name} is beside the cell in front of me.", move
    if f"go to {target.label}" in episode.available:
        return f"I go back to the {target.name} and try again.", f"go to {target.label}"
    return "I cannot reach the target from here; I explore.", _explore(episode)


def _drop_plan(episode: Episode, target: Thing) -> str | None:
    """First primitive of the shortest turn/step plan after which the cell in front is
    free and next to ``target`` ("drop" when that holds now); unknown cells count as free."""
    goal = episode.cell_of(target.ahead, target.right)
    blocked = set(episode.walls) | {episode.cell_of(t.ahead, t.right) for t in episode.scene.things}
    start = episode.pose
    front = episode.cell_of(1, 0)
    if "move forward" not in episode.available:
        blocked.add(front)
    no_drop = set() if "drop" in episode.available else {front}
    first: dict[Pose, str | None] = {start: None}
    queue = deque([start])
    while queue:
        x, y, heading = state = queue.popleft()
        ahead = (x + _STEP[heading][0], y + _STEP[heading][1])
        if ahead not in blocked | no_drop and abs(ahead[0] - goal[0]) + abs(ahead[1] - goal[1]) == 1:
            return first[state] or "drop"
        if abs(x - goal[0]) + abs(y - goal[1]) > 6:
            continue
        for move, nxt in (("turn left", (x, y, (heading - 1) % 4)), ("turn right", (x, y, (heading + 1) % 4)),
                          ("move forward", (*ahead, heading))):
            if nxt not in first and (move != "move forward" or ahead not in blocked):
                first[nxt] = first[state] or move
                queue.append(nxt)
    return None


# -- exploring ----------------------------------------------------------------------


def _explore(episode: Episode) -> str:
    """Look around, then prefer doors not used yet, then walk on."""
    available, steps = episode.available, episode.steps
    moved = [step for step in steps if step.after is not None]
    last = moved[-1].action if moved else ""
    if last.startswith(_DOOR_MOVES) and "move forward" in available:
        return "move forward"  # step into the new room
    turns = 0
    for step in reversed(moved):
        if step.action not in _TURNS:
            break
        turns += 1
    if turns < 3:
        return "turn left"
    key = _key_for_visible_lock(episode)
    if key:
        return key
    used = {_door_color(step.action) for step in steps if step.action.startswith(_DOOR_MOVES)}
    doors = [a for a in available if a.startswith(_DOOR_MOVES)]
    fresh = [a for a in doors if _door_color(a) not in used]
    if fresh:
        return fresh[0]
    if "move forward" in available and [s.action for s in steps[-6:]].count("move forward") < 3:
        return "move forward"
    if doors:  # the door used longest ago
        return min(doors, key=lambda a: max((i for i, s in enumerate(steps) if s.action == a), default=-1))
    goto = [a for a in available if a.startswith("go to ")]
    return goto[-1] if goto else "move forward" if "move forward" in available else "turn left"


def _key_for_visible_lock(episode: Episode) -> str | None:
    for thing in episode.scene.things:
        if "locked door" in thing.name:
            through = f"toggle and go through {thing.label}"
            if through in episode.available:
                return through
            key = _fetch_key(episode, thing.name.split()[0])
            if key:
                return key
    return None


def _door_color(action: str) -> str:
    return action.split("go through ", 1)[-1].split(" ", 1)[0]


POLICY = BabyAIPolicy()
