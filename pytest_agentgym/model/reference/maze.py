"""Reference policy for Maze: map what has been seen, then walk a shortest hopeful path.

Everything comes from the conversation. Each observation the server sends
("... Your current position is at position R, C. There are walls ...") tells the
position and which of its four neighbours are walls. The policy collects those
facts over the whole conversation, treats every cell it has not learned about
as open (optimism in the face of the unknown), and takes the first move of a
shortest path to the goal over that map (breadth-first search). A wrong guess
about an unknown cell is discovered as soon as the agent stands next to it, and
the next reply plans around it. In the double-T maze this reaches the goal from
every start within 13 moves (the optimum is at most 12).
"""

from __future__ import annotations

import random
import re
from collections import deque
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

Cell = tuple[int, int]

#: One observation as the server writes it.
_OBSERVATION = re.compile(
    r"The goal is at position (\d+), (\d+)\. "
    r"Your current position is at position (\d+), (\d+)\. "
    r"(There are no walls near you\.|There is a wall [^.]*\.|There are walls [^.]*\.)"
)
#: Side named in the walls sentence -> (action, row step, column step).
SIDES = {
    "below you": ("move down", 1, 0),
    "to your right": ("move right", 0, 1),
    "to your left": ("move left", 0, -1),
    "above you": ("move up", -1, 0),
}
ACTIONS = tuple(action for action, _, _ in SIDES.values())
_MARKER = "The goal is at position"


class MazeObservation:
    """What one observation says: goal, position and the sides that are walls."""

    def __init__(self, goal: Cell, position: Cell, walls: frozenset[str]) -> None:
        self.goal = goal
        self.position = position
        self.walls = walls

    @classmethod
    def last_in(cls, text: str) -> "MazeObservation | None":
        """The last observation in ``text``; earlier ones may be a prompt's example."""
        matches = list(_OBSERVATION.finditer(text))
        if not matches:
            return None
        found = matches[-1]
        goal = (int(found[1]), int(found[2]))
        position = (int(found[3]), int(found[4]))
        walls = frozenset(side for side in SIDES if side in found[5])
        return cls(goal, position, walls)


def observations(messages: Sequence[Message]) -> list[MazeObservation]:
    """The observations in the user turns, in order (at most one per turn)."""
    seen = []
    for message in messages:
        if message.get("role") == "user":
            found = MazeObservation.last_in(message.get("content") or "")
            if found is not None:
                seen.append(found)
    return seen


def known_walls(seen: Sequence[MazeObservation]) -> dict[Cell, frozenset[str]]:
    """For each cell the agent stood on, the sides that are walls."""
    return {obs.position: obs.walls for obs in seen}


def first_move(start: Cell, goal: Cell, walls: dict[Cell, frozenset[str]]) -> str | None:
    """First action of a shortest path from ``start`` to ``goal`` in which unknown
    cells count as open; None when even that hopeful map has no way through."""
    if start == goal:
        return None
    cells = list(walls) + [start, goal]
    low_r = min(r for r, _ in cells) - 1
    high_r = max(r for r, _ in cells) + 1
    low_c = min(c for _, c in cells) - 1
    high_c = max(c for _, c in cells) + 1
    first: dict[Cell, str | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        blocked = walls.get(cell, frozenset())
        for side, (action, dr, dc) in _sides_towards(cell, goal):
            if side in blocked:
                continue
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt in first or not (low_r <= nxt[0] <= high_r and low_c <= nxt[1] <= high_c):
                continue
            first[nxt] = first[cell] or action
            if nxt == goal:
                return first[nxt]
            queue.append(nxt)
    return None


def _sides_towards(cell: Cell, goal: Cell) -> list[tuple[str, tuple[str, int, int]]]:
    """Sides ordered so that moves that close the distance to the goal come first
    (a deterministic tie-break between equally short hopeful paths)."""

    def distance_after(item: tuple[str, tuple[str, int, int]]) -> int:
        _, (_, dr, dc) = item
        return abs(cell[0] + dr - goal[0]) + abs(cell[1] + dc - goal[1])

    return sorted(SIDES.items(), key=distance_after)


class MazePolicy:
    name = "Maze"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        return any(
            message.get("role") == "user" and _MARKER in (message.get("content") or "")
            for message in messages
        )

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        seen = observations(messages)
        if not seen:
            return self.random_reply(messages, rng)
        now = seen[-1]
        action = first_move(now.position, now.goal, known_walls(seen))
        if action is None:
            return self._fallback(now, rng)
        row, col = now.position
        return react(
            f"I am at {row}, {col} and the goal is at {now.goal[0]}, {now.goal[1]}. "
            f"Using the walls I have seen so far, the shortest way there starts with '{action}'.",
            action,
        )

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        action = rng.choice(ACTIONS)
        return react(f"I will try '{action}'.", action)

    def _fallback(self, now: MazeObservation, rng: random.Random) -> str:
        open_sides = [SIDES[side][0] for side in SIDES if side not in now.walls]
        action = rng.choice(open_sides or list(ACTIONS))
        return react(
            "The walls I know of leave no path to the goal; I will explore an open side.",
            action,
        )


POLICY = MazePolicy()
