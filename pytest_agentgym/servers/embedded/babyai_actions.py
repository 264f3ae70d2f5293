"""BabyAI's text actions and the primitive minigrid actions each one stands for.

AgentGym's server offers, after every step, a table of text actions ("turn
left", "pickup red ball 1", "go to blue closed door 1", "toggle and go through
green closed door 1", ...), each compiled to a list of minigrid primitives by a
breadth-first search over (cell, heading) inside the agent's view. Actions that
exist but cannot be taken now get a specific refusal message instead.

The table must equal the original's, names, numbering, order and primitive
lists alike, because the golden answers list the names and the primitive lists
decide where the agent ends up. Two of the original's habits are therefore kept
on purpose and documented here:

* the search records a cell's predecessor every time the cell is queued, not
  only the first time, so a path may come from a later discovery;
* numbering of "pickup"/"go to" follows the order actions were *added*, which
  differs from the description's numbering when an object has no path.
"""

from __future__ import annotations

from collections import deque

from pytest_agentgym.servers.embedded.babyai_text import HEADINGS, View

# minigrid primitive actions
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE = 0, 1, 2, 3, 4, 5

#: Names that block a planned path (a door, open or not, does not).
_BLOCKING_WORDS = ("wall", "box", "lava", "ball", "key")
#: Names of things nothing can be dropped onto.
_NO_DROP_WORDS = ("wall", "box", "lava", "ball", "key")

State = tuple[tuple[int, int], int]


def _next_state(state: State, move: int) -> State:
    (x, y), heading = state
    if move == LEFT:
        return (x, y), (heading - 1) % 4
    if move == RIGHT:
        return (x, y), (heading + 1) % 4
    dx, dy = HEADINGS[heading]
    return (x + dx, y + dy), heading


def plan_path(view: View, target: tuple[int, int], *, arrive: bool) -> list[int] | None:
    """Primitives that bring the agent onto ``target`` (``arrive``) or in front of
    it facing it; ``None`` when the view offers no way there."""
    blocked = {
        seen.pos for seen in view.things if any(word in seen.name for word in _BLOCKING_WORDS)
    }
    blocked.update(b.pos for b in view.barriers)
    start: State = (view.pos, view.heading)
    came_from: dict[State, tuple[State, int]] = {}
    expanded: set[State] = set()
    frontier: deque[State] = deque([start])
    while frontier:
        state = frontier.popleft()
        expanded.add(state)
        (x, y), heading = state
        if arrive:
            reached = (x, y) == target
        else:
            dx, dy = HEADINGS[heading]
            reached = (target[0] - x, target[1] - y) == (dx, dy)
        if reached:
            moves: list[int] = []
            while state != start:
                state, move = came_from[state]
                moves.append(move)
            moves.reverse()
            return moves
        for move in (FORWARD, LEFT, RIGHT):
            nxt = _next_state(state, move)
            (nx, ny), _ = nxt
            if nx not in view.xs or ny not in view.ys or nxt in expanded or (nx, ny) in blocked:
                continue
            frontier.append(nxt)
            came_from[nxt] = (state, move)  # overwritten by later discoveries, as the original
    return None


class ActionTable:
    """The text actions available in ``view``, in the original's order, with the
    primitive list of each, and the refusal messages of known-but-unavailable ones."""

    def __init__(self, view: View) -> None:
        self.moves: dict[str, list[int]] = {"turn left": [LEFT], "turn right": [RIGHT]}
        self.refusals: dict[str, str] = {}
        self._view = view
        self._add_forward()
        self._add_pickups()
        self._add_drop()
        self._add_doors()
        self._add_goal()
        self._add_goto()
        self.moves["check available actions"] = []
        del self._view

    @property
    def names(self) -> list[str]:
        return list(self.moves)

    def _add_forward(self) -> None:
        barriers = self._view.barriers
        if not barriers or barriers[0].ahead > 1:
            self.moves["move forward"] = [FORWARD]
        else:
            self.refusals["move forward"] = (
                "There is a barrier in front of you, you can't move forward."
            )

    def _add_pickups(self) -> None:
        view = self._view
        if view.carrying is not None:
            return
        count: dict[str, int] = {}
        for seen in view.things:
            if any(word in seen.name for word in ("wall", "door", "goal")):
                continue
            path = plan_path(view, seen.pos, arrive=False)
            first = f"pickup {seen.name} 1"
            if path is not None:
                count[seen.name] = 1 if first not in self.moves else count[seen.name] + 1
                self.moves[f"pickup {seen.name} {count[seen.name]}"] = path + [PICKUP]
            else:
                label = first if first not in self.moves else f"pickup {seen.name} {count[seen.name] + 1}"
                self.refusals[label] = (
                    f"You cannot {label}, as there is no path leading to it."
                )

    def _add_drop(self) -> None:
        view = self._view
        if view.carrying is None:
            self.refusals["drop"] = "You cannot drop the object, as you are not carrying anything."
            return
        dx, dy = HEADINGS[view.heading]
        front = (view.pos[0] + dx, view.pos[1] + dy)
        occupied = any(
            seen.pos == front and any(word in seen.name for word in _NO_DROP_WORDS)
            for seen in view.things
        )
        if occupied:
            self.refusals["drop"] = (
                "You cannot drop the object, as there is already an object in front of you."
            )
        else:
            self.moves["drop"] = [DROP]

    def _add_doors(self) -> None:
        view = self._view
        count: dict[str, int] = {}
        for seen in view.things:
            name = seen.name
            if "door" in name:
                count[name] = count.get(name, 0) + 1
            if "open door" in name:
                label = f"go through {name} {count[name]}"
                path = plan_path(view, seen.pos, arrive=True)
                if path is not None:
                    self.moves[label] = path
                else:
                    self.refusals[label] = f"You cannot {label}, as there is no path leading to it."
            if "closed door" in name:
                self._add_toggle_through(seen.pos, name, count)
                self.refusals[f"go through {name} {count[name]}"] = (
                    f"You cannot go through {name} {count[name]}, as it is closed. "
                    "You should toggle it first."
                )
            if "locked door" in name:
                label = f"toggle and go through {name} {count[name]}"
                if view.carrying is None or view.carrying[1] != "key":
                    self.refusals[label] = f"You cannot {label}, as you are not carrying a key."
                    continue
                if view.carrying[0] != name.split(" ")[0]:
                    self.refusals[label] = (
                        f"You cannot {label}, as the color of the key you are carrying "
                        "does not match the color of door."
                    )
                    continue
                self._add_toggle_through(seen.pos, name, count)

    def _add_toggle_through(self, pos: tuple[int, int], name: str, count: dict[str, int]) -> None:
        label = f"toggle and go through {name} {count[name]}"
        path = plan_path(self._view, pos, arrive=False)
        if path is not None:
            self.moves[label] = path + [TOGGLE, FORWARD]
        else:
            # The original prints the whole counter dict here; kept for fidelity.
            self.refusals[label] = (
                f"You cannot toggle and go through {name} {count!s}, as there is no path leading to it."
            )
        if path == []:
            self.moves["toggle"] = [TOGGLE]

    def _add_goal(self) -> None:
        view = self._view
        for seen in view.things:
            if "goal" not in seen.name:
                continue
            path = plan_path(view, seen.pos, arrive=True)
            if path is not None:
                self.moves["go to goal"] = path
            else:
                self.refusals["go to goal"] = "You cannot go to the goal, as there is no path leading to it."

    def _add_goto(self) -> None:
        view = self._view
        count: dict[str, int] = {}
        for seen in view.things:
            if "wall" in seen.name or "goal" in seen.name:
                continue
            path = plan_path(view, seen.pos, arrive=False)
            first = f"go to {seen.name} 1"
            if path is not None:
                count[seen.name] = 1 if first not in self.moves else count[seen.name] + 1
                self.moves[f"go to {seen.name} {count[seen.name]}"] = path
            else:
                label = first if first not in self.moves else f"go to {seen.name} {count[seen.name] + 1}"
                self.refusals[label] = f"You cannot {label}, as there is no path leading to it."
