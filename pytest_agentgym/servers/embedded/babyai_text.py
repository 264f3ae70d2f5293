"""What the BabyAI agent sees, as AgentGym's server puts it into words.

minigrid gives the agent a 7x7 egocentric image (one cell per grid square,
encoded as object type, colour and state). AgentGym's BabyAI server turns that
image into the text the model reads. This module reproduces that text-ification
byte for byte, because the golden answers of the original server hold the
embedded one to it:

* every visible object except walls, nearest first (Manhattan distance; ties in
  scan order, far row to near row, left to right), numbered per name:
  "There is a red ball 1 right in front of you 4 steps away. " or
  "There is a red ball 1 2 steps in front of you and 1 steps to your left. ";
  doors are named "<colour> <open|closed|locked> door";
* then "The room has walls around you. ", the nearest wall or box straight
  ahead ("You are facing a wall 3 steps away. "), and what the agent carries.

The :class:`View` built here is also what the macro actions
(:mod:`.babyai_actions`) plan over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: minigrid's cell encodings (minigrid.core.constants), index -> word.
OBJECT_NAMES = (
    "unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava", "agent",
)
COLOR_NAMES = ("red", "green", "blue", "purple", "yellow", "grey")
DOOR_STATES = ("open", "closed", "locked")

#: Unit vectors of the four headings: 0 east (+x), 1 south (+y), 2 west, 3 north.
HEADINGS = ((1, 0), (0, 1), (-1, 0), (0, -1))

#: Object types that are listed (walls are listed internally but never described).
_NOTABLE = frozenset({"door", "key", "ball", "box", "goal", "lava", "wall"})
#: Object types that stop the agent walking straight ahead.
_BARRIERS = frozenset({"box", "wall"})


@dataclass(frozen=True)
class Seen:
    """One notable cell in view."""

    name: str  # "red ball", "blue closed door", "grey wall"
    pos: tuple[int, int]  # absolute grid position
    distance: int  # Manhattan distance from the agent


@dataclass(frozen=True)
class Barrier:
    """A wall or box on the agent's line of sight, ``ahead`` cells in front."""

    kind: str
    pos: tuple[int, int]
    ahead: int


@dataclass(frozen=True)
class View:
    """The agent's situation after a step, read from the env and its image.

    ``xs`` and ``ys`` are the grid columns and rows the path planner may use;
    they reproduce the original's bounds of the view square, including its
    off-by-one (one extra row or column behind or beside the agent for some
    headings).
    """

    pos: tuple[int, int]
    heading: int
    things: tuple[Seen, ...]  # sorted nearest first
    barriers: tuple[Barrier, ...]  # sorted nearest first
    xs: range
    ys: range
    carrying: tuple[str, str] | None  # (colour, type)

    def relative(self, pos: tuple[int, int]) -> tuple[int, int]:
        """(cells ahead, cells to the right) of ``pos`` as the agent sees it."""
        dx, dy = pos[0] - self.pos[0], pos[1] - self.pos[1]
        fx, fy = HEADINGS[self.heading]
        rx, ry = HEADINGS[(self.heading + 1) % 4]
        return fx * dx + fy * dy, rx * dx + ry * dy


def _bounds(corner: int, edge: int) -> range:
    """One axis of the planner's area, from the view corner and the opposite edge."""
    return range(edge, corner + 1) if edge < corner else range(corner, edge)


def read_view(env: Any, image: Any) -> View:
    """Read the situation of ``env`` (an unwrapped minigrid env) from ``image``
    (the (7, 7, 3) observation image of its latest step or reset)."""
    size = int(env.agent_view_size)
    px, py = (int(v) for v in env.agent_pos)
    heading = int(env.agent_dir)
    fx, fy = HEADINGS[heading]
    rx, ry = HEADINGS[(heading + 1) % 4]
    half = size // 2
    # absolute position of the view's far-left cell
    cx, cy = px + fx * (size - 1) - rx * half, py + fy * (size - 1) - ry * half
    xs = _bounds(cx, cx + size * (rx - fx))
    ys = _bounds(cy, cy + size * (ry - fy))

    things: list[Seen] = []
    barriers: list[Barrier] = []
    for row in range(size):  # far row first
        for col in range(size):  # left to right
            ax, ay = cx - fx * row + rx * col, cy - fy * row + ry * col
            if ax < 0 or ay < 0:
                continue
            distance = abs(px - ax) + abs(py - ay)
            if distance == 0:  # the agent's own cell shows what it carries
                continue
            type_idx, color_idx, state_idx = (int(v) for v in image[col, row])
            kind = OBJECT_NAMES[type_idx]
            if kind in _NOTABLE:
                color = COLOR_NAMES[color_idx]
                name = f"{color} {DOOR_STATES[state_idx]} door" if kind == "door" else f"{color} {kind}"
                things.append(Seen(name, (ax, ay), distance))
            if kind in _BARRIERS:
                dx, dy = ax - px, ay - py
                if fx * dy - fy * dx == 0:  # on the line straight ahead
                    barriers.append(Barrier(kind, (ax, ay), fx * dx + fy * dy))
    things.sort(key=lambda seen: seen.distance)
    barriers.sort(key=lambda barrier: barrier.ahead)
    carried = env.carrying
    return View(
        pos=(px, py),
        heading=heading,
        things=tuple(things),
        barriers=tuple(barriers),
        xs=xs,
        ys=ys,
        carrying=(carried.color, carried.type) if carried is not None else None,
    )


def describe(view: View) -> str:
    """The observation text for ``view`` (without goal line or action list)."""
    if view.things:
        parts = ["In front of you in this room, you can see several objects: "]
        count: dict[str, int] = {}
        for seen in view.things:
            if "wall" in seen.name:
                continue
            ahead, right = view.relative(seen.pos)
            if right == 0:
                where = f"right in front of you {ahead} steps away. "
            elif right > 0:
                where = f"{ahead} steps in front of you and {right} steps to your right. "
            else:
                where = f"{ahead} steps in front of you and {-right} steps to your left. "
            count[seen.name] = count.get(seen.name, 0) + 1
            parts.append(f"There is a {seen.name} {count[seen.name]} {where} ")
        objects = "".join(parts)
    else:
        objects = "You cannot see any objects within sight."
    walls = "The room has walls around you. "
    if view.barriers:
        nearest = view.barriers[0]
        walls += f"You are facing a {nearest.kind} {nearest.ahead} steps away. "
    if view.carrying is not None:
        carry = f"You are carrying a {view.carrying[0]} {view.carrying[1]}."
    else:
        carry = "You are not carrying anything."
    return objects + walls + carry


def action_list_suffix(actions: list[str]) -> str:
    """The line every observation ends with: ``\\nAvailable actions: ["a", "b"]``."""
    if not actions:
        return "\nAvailable actions: ["  # the original leaves the bracket open here
    return "\nAvailable actions: [" + ", ".join(f'"{name}"' for name in actions) + "]"
