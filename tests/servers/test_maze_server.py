"""The embedded lmrlgym server's Maze half, held to the protocol sheet (section 14.1).

The server runs as a real process on loopback. Expected values come from the
sheet's tables (start cells and walls sentences of 14.1.3, the grid of 14.1.2)
and from shortest paths worked out by hand on that grid; raw response text is
checked where the JSON number type matters (``0`` vs ``1.0``/``-1.0``).
"""

from __future__ import annotations

import json

import httpx
import pytest

GOAL_TEXT = "The goal is at position 8, 6. "

# Sheet 14.1.3: game -> (start, walls sentence at start, fewest moves to the goal).
START_TABLE = {
    0: ((1, 1), "There are walls to your left, above you, below you.", 12),
    1: ((1, 2), "There are walls above you, below you.", 11),
    2: ((1, 3), "There is a wall above you.", 10),
    3: ((1, 4), "There are walls above you, below you.", 11),
    4: ((1, 5), "There are walls to your right, above you, below you.", 12),
    5: ((1, 7), "There are walls to your left, above you, below you.", 12),
    6: ((1, 8), "There are walls above you, below you.", 11),
    7: ((1, 9), "There is a wall above you.", 10),
    8: ((1, 10), "There are walls above you, below you.", 11),
    9: ((1, 11), "There are walls to your right, above you, below you.", 12),
    10: ((2, 3), "There are walls to your right, to your left.", 9),
    11: ((3, 3), "There are walls to your right, to your left.", 8),
    12: ((4, 3), "There are walls to your right, to your left.", 7),
    13: ((5, 3), "There are walls to your left, below you.", 6),
    14: ((5, 4), "There are walls above you, below you.", 5),
    15: ((5, 5), "There are walls above you, below you.", 4),
    16: ((5, 6), "There is a wall above you.", 3),
    17: ((6, 6), "There are walls to your right, to your left.", 2),
    18: ((7, 6), "There are walls to your right, to your left.", 1),
    19: ((5, 7), "There are walls above you, below you.", 4),
    20: ((5, 8), "There are walls above you, below you.", 5),
    21: ((5, 9), "There are walls to your right, below you.", 6),
    22: ((4, 9), "There are walls to your right, to your left.", 7),
    23: ((3, 9), "There are walls to your right, to your left.", 8),
    24: ((2, 9), "There are walls to your right, to your left.", 9),
}

# Shortest paths read off the grid by hand (U/D/L/R).
HAND_PATHS = {
    0: "RRDDDDRRRDDD",
    4: "LLDDDDRRRDDD",
    6: "RDDDDLLLDDD",
    9: "LLDDDDLLLDDD",
    13: "RRRDDD",
    16: "DDD",
    22: "DLLLDDD",
    18: "D",
}
WORDS = {"U": "move up", "D": "move down", "L": "move left", "R": "move right"}
DELTA = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}


def observation_at(row: int, col: int, walls: str) -> str:
    return f"{GOAL_TEXT}Your current position is at position {row}, {col}. {walls}"


#: the session's embedded server (and path) that the ``http`` fixture (tests/conftest.py) talks to
EMBEDDED_SERVER = "lmrlgym/maze"


def new_env(http: httpx.Client, game: int | None = None) -> int:
    env_id = http.post("/create").json()["id"]
    if game is not None:
        body = http.post("/reset", json={"id": env_id, "game": game}).json()
        assert "observation" in body, body
    return env_id


def step_raw(http: httpx.Client, env_id: int, action: str) -> str:
    response = http.post("/step", json={"id": env_id, "action": action})
    assert response.status_code == 200
    return response.text


def position_in(observation: str) -> tuple[int, int]:
    tail = observation.split("Your current position is at position ")[1]
    row, col = tail.split(".")[0].split(", ")
    return int(row), int(col)


def test_root_answers_like_the_original(embedded_server):
    response = httpx.get(embedded_server("lmrlgym").url + "/", timeout=10)
    assert response.status_code == 200
    assert response.json() == "This is environment LMRL-Gym."


@pytest.mark.parametrize("game", sorted(START_TABLE))
def test_reset_shows_the_start_cell_and_its_walls(http, game):
    (row, col), walls, _ = START_TABLE[game]
    env_id = new_env(http)
    response = http.post("/reset", json={"id": env_id, "game": game})
    assert response.status_code == 200
    assert response.json() == {"observation": observation_at(row, col, walls)}


@pytest.mark.parametrize("game", sorted(HAND_PATHS))
def test_shortest_path_reaches_success(http, game):
    (row, col), _, optimum = START_TABLE[game]
    path = HAND_PATHS[game]
    assert len(path) == optimum  # the hand path agrees with the sheet's BFS figure
    env_id = new_env(http, game)
    for i, move in enumerate(path):
        raw = step_raw(http, env_id, WORDS[move])
        body = json.loads(raw)
        row, col = row + DELTA[move][0], col + DELTA[move][1]
        if i < len(path) - 1:
            assert position_in(body["observation"]) == (row, col)
            assert body["observation"].startswith(GOAL_TEXT)
            assert not body["observation"].endswith("\n")
            assert '"reward":0,' in raw and body["done"] is False
    assert (row, col) == (8, 6)
    assert raw == '{"observation":"Success\\n","reward":1.0,"done":true}'


@pytest.mark.parametrize(
    "action",
    ["move up", "move left", "move down", "Move right", "move right\n", " move right",
     "move right ", "move  right", "move top right", "", "right", "MOVE RIGHT"],
)
def test_invalid_strings_and_wall_bumps_leave_the_position(http, action):
    env_id = new_env(http, 0)  # (1, 1): walls left, above, below
    raw = step_raw(http, env_id, action)
    start = observation_at(1, 1, START_TABLE[0][1])
    assert json.loads(raw) == {"observation": start, "reward": 0, "done": False}
    assert '"reward":0,' in raw
    moved = json.loads(step_raw(http, env_id, "move right"))
    assert position_in(moved["observation"]) == (1, 2)


def test_the_51st_step_call_fails_even_onto_the_goal(http):
    env_id = new_env(http, 18)  # one step above the goal
    for _ in range(50):
        body = json.loads(step_raw(http, env_id, "stay"))
        assert body["done"] is False
    raw = step_raw(http, env_id, "move down")
    assert raw == '{"observation":"Failure\\n","reward":-1.0,"done":true}'


def test_reaching_the_goal_on_the_50th_call_is_success(http):
    env_id = new_env(http, 18)
    for _ in range(49):
        step_raw(http, env_id, "move left")  # a wall
    assert json.loads(step_raw(http, env_id, "move down")) == {
        "observation": "Success\n", "reward": 1.0, "done": True,
    }


def test_finished_episode_refuses_until_reset(http):
    env_id = new_env(http, 18)
    step_raw(http, env_id, "move down")
    finished = {"error": f"The task with environment {env_id} has finished."}
    assert json.loads(step_raw(http, env_id, "move up")) == finished
    assert http.get("/observation", params={"id": env_id}).json() == finished
    assert http.get("/detail", params={"id": env_id}).json() == finished
    again = http.post("/reset", json={"id": env_id, "game": 17}).json()
    assert again == {"observation": observation_at(6, 6, START_TABLE[17][1])}


def not_reset(env_id: int, what: str, call: str) -> dict:
    """Ours; the original leaks its KeyErrors here: "<id>", "'observation'", "'goal_position'"."""
    return {"error": f'environment {env_id} has no {what} yet: POST /maze/reset {{"id": {env_id}, '
                     f'"game": <0-24>}} before /maze/{call}'}


def test_errors_before_any_reset_say_what_is_missing(http):
    env_id = new_env(http)
    assert json.loads(step_raw(http, env_id, "move up")) == not_reset(env_id, "game", "step")
    assert http.get("/observation", params={"id": env_id}).json() == not_reset(env_id, "observation", "observation")
    assert http.get("/detail", params={"id": env_id}).json() == not_reset(env_id, "game", "detail")


def test_unknown_id(http):
    unknown = 10**6
    expected = {"error": f"The id {unknown} is not valid."}
    assert http.post("/reset", json={"id": unknown, "game": 0}).json() == expected
    assert http.post("/step", json={"id": unknown, "action": "move up"}).json() == expected
    assert http.get("/observation", params={"id": unknown}).json() == expected
    assert http.get("/detail", params={"id": unknown}).json() == expected


#: the original's answers, for the record: 25 -> "", 26 and 100 -> "The game N is not valid.",
#: -27 -> "list index out of range", and -1..-26 count from the end (-1 is the goal: "")
@pytest.mark.parametrize(
    ("game", "error"),
    [(25, "The game 25 is not valid: it starts on the goal cell 8, 6, where there is nothing to play; "
          "Maze games are 0-24."),
     (26, "The game 26 is not valid: Maze games are 0-24 (25 is the goal cell 8, 6)."),
     (100, "The game 100 is not valid: Maze games are 0-24 (25 is the goal cell 8, 6)."),
     *[(game, f"The game {game} is not valid: Maze games are 0-24; a negative game is refused, "
              "not counted from the end of the list.") for game in (-1, -2, -26, -27)]],
)
def test_unusable_games_are_refused_naming_the_valid_ones(http, game, error):
    env_id = new_env(http)
    response = http.post("/reset", json={"id": env_id, "game": game})
    assert response.status_code == 200
    assert response.text == json.dumps({"error": error}, separators=(",", ":"))
    # No env was built: stepping still fails the way it does before any reset.
    assert json.loads(step_raw(http, env_id, "move up")) == not_reset(env_id, "game", "step")


def test_failed_reset_keeps_the_running_episode(http):
    env_id = new_env(http, 16)
    step_raw(http, env_id, "move left")  # now at (5, 5)
    assert http.post("/reset", json={"id": env_id, "game": 25}).json()["error"].startswith("The game 25 is not valid")
    observation = http.get("/observation", params={"id": env_id}).json()
    assert position_in(observation) == (5, 5)
    assert json.loads(step_raw(http, env_id, "move right"))["done"] is False


def test_detail_fields_and_order(http):
    env_id = new_env(http, 2)
    step_raw(http, env_id, "move down")
    start = observation_at(2, 3, "There are walls to your right, to your left.")
    expected = (
        '{"maze_name":"double_t_maze","observation":' + json.dumps(start)
        + ',"done":false,"reward":0,"deleted":false}'
    )
    assert http.get("/detail", params={"id": env_id}).text == expected
    assert http.get("/observation", params={"id": env_id}).json() == start


def test_available_actions(http):
    assert http.get("/available_actions").json() == [
        "move left", "move right", "move up", "move down",
    ]


def test_maze_ids_count_apart_from_wordle(embedded_server, http):
    url = embedded_server("lmrlgym").url
    first = http.post("/create").json()["id"]
    httpx.post(url + "/wordle/create", timeout=10)
    second = http.post("/create").json()["id"]
    assert second == first + 1


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/reset", {"id": 0}), ("POST", "/reset", {"game": 0}),
     ("POST", "/step", {"id": 0}), ("GET", "/observation", None), ("GET", "/detail", None)],
)
def test_missing_fields_are_422(http, method, path, body):
    assert http.request(method, path, json=body).status_code == 422
