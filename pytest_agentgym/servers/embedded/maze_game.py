"""The LMRL-Gym double-T maze as AgentGym's lmrlgym server plays it (no HTTP here).

Facts from the protocol sheet, section 14.1:

* a fixed 10 x 13 grid; positions are ``(row, col)``, zero-based, row 0 at the top;
* the goal is always ``(8, 6)``; game ``g`` starts on the g-th of the 26 open cells
  (index 25 is the goal itself, which the original rejects with an empty message,
  and a negative index counts from the end there: both are refused here with a
  message naming the valid games, 0-24);
* ``move up|down|left|right`` are the only actions (the server appends a newline
  and accepts nothing else); an unknown string or a move into a wall leaves the
  position unchanged and still counts as a step;
* the reward is ``1.0`` at the goal and the int ``0`` otherwise; the 51st step
  call of an episode answers ``Failure`` with ``-1.0`` whatever the action.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Rows of the double-T maze, 1 = wall, 0 = open.
GRID_ROWS = (
    "1111111111111",
    "1000001000001",
    "1110111110111",
    "1110111110111",
    "1110111110111",
    "1110000000111",
    "1111110111111",
    "1111110111111",
    "1111110111111",
    "1111111111111",
)
MAZE_NAME = "double_t_maze"
GOAL = (8, 6)
#: Step calls allowed before the next one is answered with Failure.
MAX_STEPS = 50

#: Start cell of each game index, in the original server's order (the last is the goal).
START_POSITIONS: tuple[tuple[int, int], ...] = (
    (1, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 7), (1, 8), (1, 9), (1, 10), (1, 11),
    (2, 3), (3, 3), (4, 3), (5, 3), (5, 4), (5, 5), (5, 6), (6, 6), (7, 6),
    (5, 7), (5, 8), (5, 9), (4, 9), (3, 9), (2, 9),
    (8, 6),
)

#: What the server accepts, after it has appended a newline, and the move each makes.
MOVES: dict[str, tuple[int, int]] = {
    "move left\n": (0, -1),
    "move right\n": (0, 1),
    "move up\n": (-1, 0),
    "move down\n": (1, 0),
}
#: ``GET /maze/available_actions``, in the original's order.
AVAILABLE_ACTIONS = ["move left", "move right", "move up", "move down"]

#: Neighbour checks in the order the walls sentence lists them.
_WALL_NAMES = (
    ((0, 1), "to your right"),
    ((0, -1), "to your left"),
    ((-1, 0), "above you"),
    ((1, 0), "below you"),
)

SUCCESS = "Success\n"
FAILURE = "Failure\n"


#: The games that start an episode: every open cell but the goal.
PLAYABLE = f"Maze games are 0-{len(START_POSITIONS) - 2}"


class StartRejected(ValueError):
    """``game`` does not name a usable start cell; ``str()`` says which games do."""


def is_wall(row: int, col: int) -> bool:
    if not (0 <= row < len(GRID_ROWS) and 0 <= col < len(GRID_ROWS[0])):
        return True
    return GRID_ROWS[row][col] == "1"


def walls_sentence(position: tuple[int, int]) -> str:
    """'There is a wall above you.' / 'There are walls to your right, below you.' / no walls."""
    row, col = position
    names = [name for (dr, dc), name in _WALL_NAMES if is_wall(row + dr, col + dc)]
    if not names:
        return "There are no walls near you."
    if len(names) == 1:
        return f"There is a wall {names[0]}."
    return f"There are walls {', '.join(names)}."


def describe(position: tuple[int, int]) -> str:
    """The observation for a non-terminal position (no trailing newline)."""
    return (
        f"The goal is at position {GOAL[0]}, {GOAL[1]}. "
        f"Your current position is at position {position[0]}, {position[1]}. "
        f"{walls_sentence(position)}"
    )


def start_for_game(game: int) -> tuple[int, int]:
    """The start cell of ``game`` (0-24).

    The original takes any Python list index: a negative game counts from the end
    of its list (-2 plays game 24), 25 (the goal) fails an assertion with an empty
    message and 26 or more is "The game N is not valid.". Here every game outside
    0-24 is refused with a message naming the valid ones (docs/envs/maze-wordle.md).
    """
    if game >= len(START_POSITIONS):
        raise StartRejected(f"The game {game} is not valid: {PLAYABLE} "
                            f"(25 is the goal cell {GOAL[0]}, {GOAL[1]}).")
    if game < 0:
        raise StartRejected(f"The game {game} is not valid: {PLAYABLE}; a negative game is "
                            f"refused, not counted from the end of the list.")
    start = START_POSITIONS[game]
    if start == GOAL:
        raise StartRejected(f"The game {game} is not valid: it starts on the goal cell "
                            f"{GOAL[0]}, {GOAL[1]}, where there is nothing to play; {PLAYABLE}.")
    return start


@dataclass
class MazeStep:
    observation: str
    reward: int | float  # int 0, or float 1.0 / -1.0, exactly as served
    done: bool


@dataclass
class MazeGame:
    """One episode from a start cell to the goal."""

    position: tuple[int, int]
    steps_taken: int = 0
    done: bool = False

    @classmethod
    def for_game(cls, game: int) -> "MazeGame":
        return cls(position=start_for_game(game))

    def observation(self) -> str:
        return describe(self.position)

    def step(self, action: str) -> MazeStep:
        """Apply the action text the client sent (without the server's newline)."""
        if self.done:
            raise RuntimeError("step on a finished maze episode; reset it first")
        if self.steps_taken >= MAX_STEPS:
            self.done = True
            return MazeStep(FAILURE, -1.0, True)
        move = MOVES.get(action + "\n")
        if move is not None:
            target = (self.position[0] + move[0], self.position[1] + move[1])
            if not is_wall(*target):
                self.position = target
        self.steps_taken += 1
        if self.position == GOAL:
            self.done = True
            return MazeStep(SUCCESS, 1.0, True)
        return MazeStep(self.observation(), 0, False)
