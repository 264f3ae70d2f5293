"""The embedded ALFWorld server on the real TextWorld engine, as a real process:
AgentGym's task mapping, the original's answers and its refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from helpers.alfworld_support import SHIPPED, needs_engine, shipped_rule, start_server, task_sentence, walkthrough
from pytest_agentgym.servers.embedded.alfworld_tasks import game_dirs, game_file

pytestmark = [needs_engine, pytest.mark.heavy]


#: the session's embedded server that the ``http`` fixture (tests/conftest.py) talks to
EMBEDDED_SERVER = "alfworld"


def post(http: httpx.Client, path: str, body: dict | None = None):
    answer = http.post(path, json=body) if body is not None else http.post(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def new_game(http: httpx.Client, game: int) -> tuple[int, dict]:
    env_id = post(http, "/create")["id"]
    return env_id, post(http, "/reset", {"id": env_id, "game": game, "world_type": "Text"})


def test_greeting_and_create(http):
    assert http.get("/").json() == "This is environment AlfWorld."
    first, second = post(http, "/create"), post(http, "/create")
    assert set(first) == {"id"} and second["id"] == first["id"] + 1


@pytest.mark.parametrize("game", SHIPPED)
def test_reset_answers_the_originals_shape_without_the_welcome_paragraph(http, game):
    env_id, body = new_game(http, game)
    assert set(body) == {"id", "observation", "available_actions", "task_type"}
    assert body["id"] == env_id
    assert body["task_type"] == "/".join(game_dirs()[game].split("/")[1:])
    observation = body["observation"]
    assert "Welcome to TextWorld" not in observation and "\n\n" not in observation
    assert observation.startswith("You are in the middle of a room. Looking quickly around you, you see ")
    assert observation.endswith("\n" + task_sentence(game))
    actions = body["available_actions"]
    assert actions == sorted(set(actions)) and {"look", "inventory"} <= set(actions)
    assert all(action.startswith("go to ") for action in actions if action not in ("look", "inventory"))


def test_an_invalid_action_gets_nothing_happens_and_changes_nothing(http):
    env_id, body = new_game(http, 2420)
    for action in ("open fridge 1", "fly to the moon", "take mug 1 from cabinet 1"):
        step = post(http, "/step", {"id": env_id, "action": action})
        assert step == {"observation": "Nothing happens.", "reward": 0.0,
                        "available_actions": body["available_actions"], "done": False}


def test_the_walkthrough_wins_with_reward_1_then_the_env_refuses_steps_until_reset(http):
    env_id, _ = new_game(http, 2420)
    actions = walkthrough(2420)
    for action in actions[:-1]:
        step = post(http, "/step", {"id": env_id, "action": action})
        assert step["reward"] == 0.0 and step["done"] is False, (action, step)
        assert not step["observation"].startswith("You arrive at loc"), step  # the original's process_ob
    last = post(http, "/step", {"id": env_id, "action": actions[-1]})
    assert last["reward"] == 1.0 and last["done"] is True
    assert last["observation"] == "You put the mug 1 in/on the coffeemachine 1."  # the json_2.1.1 grammar
    assert post(http, "/step", {"id": env_id, "action": "look"}) == {
        "error": f"The task with environment {env_id} has finished."}
    again = post(http, "/reset", {"id": env_id, "game": 2420, "world_type": "Text"})
    assert again["id"] == env_id and "error" not in again


def test_going_to_a_receptacle_drops_the_location_prefix(http):
    env_id, _ = new_game(http, 2427)
    step = post(http, "/step", {"id": env_id, "action": "go to bed 1"})
    assert step["observation"] == "On the bed 1, you see a book 1."
    assert "take book 1 from bed 1" in step["available_actions"]


def test_the_episode_ends_after_50_steps_without_a_win(http):
    env_id, _ = new_game(http, 2423)
    steps = [post(http, "/step", {"id": env_id, "action": "look"}) for _ in range(50)]
    assert [step["done"] for step in steps] == [False] * 49 + [True]
    assert {step["reward"] for step in steps} == {0.0}
    assert "error" in post(http, "/step", {"id": env_id, "action": "look"})


def test_the_gets_answer_the_last_state(http):
    env_id, body = new_game(http, 2427)
    assert http.get("/observation", params={"id": env_id}).json() == body["observation"]
    assert http.get("/available_actions", params={"id": env_id}).json() == body["available_actions"]
    step = post(http, "/step", {"id": env_id, "action": "go to bed 1"})
    detail = http.get("/detail", params={"id": env_id}).json()
    assert detail == {"world_type": "Text", "game": 2427, "observation": step["observation"],
                      "available_actions": step["available_actions"], "done": False, "reward": 0.0,
                      "deleted": False}
    # as the original: /observation keeps the reset's text until a step writes its own
    assert http.get("/observation", params={"id": env_id}).json() == step["observation"]


def test_refusals_say_what_was_wrong(http):
    env_id = post(http, "/create")["id"]
    assert post(http, "/step", {"id": env_id, "action": "look"}) == {
        "error": f"environment {env_id} has no game yet: POST /reset first"}
    assert post(http, "/reset", {"id": 999, "game": 2420, "world_type": "Text"}) == {
        "error": "The id 999 is not valid."}
    assert post(http, "/reset", {"id": env_id, "game": 2420, "world_type": "Textual"}) == {
        "error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}
    assert post(http, "/reset", {"id": env_id, "game": 2894, "world_type": "Text"}) == {
        "error": "game 2894 is not in the ALFWorld mapping: games are 0-2419 (train), 2420-2619 (test), "
                 "2620-2759 (valid_seen) and 2760-2893 (valid_unseen)"}
    assert http.post("/reset", json={"id": env_id, "game": 2420}).status_code == 422
    # the original answers the text of its KeyError, "'observation'"
    assert http.get("/observation", params={"id": env_id}).json() == {"error": (
        f'environment {env_id} has no observation yet: POST /reset {{"id": {env_id}, "game": <0-2619>, '
        '"world_type": "Text"} before /observation')}


def test_a_game_whose_file_is_missing_names_the_file_and_how_to_point_at_the_data(http):
    env_id = post(http, "/create")["id"]
    message = post(http, "/reset", {"id": env_id, "game": 0, "world_type": "Text"})["error"]
    expected = game_file(Path("x"), 0).relative_to("x").as_posix()
    assert "game 0 is " in message and message.split(", which")[0].endswith(expected)
    assert f"the shipped games (games {', '.join(map(str, SHIPPED))})" in message
    assert "set ALFWORLD_DATA to a directory holding ALFWorld's json_2.1.1 games" in message


def test_alfworld_data_points_the_server_at_other_data_by_the_same_rule_for_all_2620_games(tmp_path):
    """An empty ALFWORLD_DATA: the server looks every game of the mapping up under it."""
    server = start_server(tmp_path, env={"ALFWORLD_DATA": str(tmp_path / "data")})
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            env_id = post(client, "/create")["id"]
            for game in range(2620):
                message = post(client, "/reset", {"id": env_id, "game": game, "world_type": "Text"})["error"]
                path = str(tmp_path / "data" / shipped_rule(game))
                assert message.startswith(f"game {game} is {path}, which is not in the data directory "
                                          f"{tmp_path / 'data'}"), message
    finally:
        server.stop()


def fast_downward_copies(pid: int) -> int:
    """How many private copies of fast-downward's library the process has mapped."""
    return len({m.path for m in psutil.Process(pid).memory_maps(grouped=False) if "libdownward" in m.path})


def test_engines_are_reused_and_at_most_max_games_stay_open(tmp_path):
    server = start_server(tmp_path, env={"AGENTGYM_ALFWORLD_MAX_GAMES": "2"})
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for game in SHIPPED:  # eight won games, one after the other: one engine serves them all
                env_id, _ = new_game(client, game)
                for action in walkthrough(game):
                    last = post(client, "/step", {"id": env_id, "action": action})
                assert last["reward"] == 1.0 and last["done"] is True
            assert fast_downward_copies(server.pid) == 1
            first, second, third = (new_game(client, 2423)[0] for _ in range(3))  # unfinished
            assert fast_downward_copies(server.pid) == 2
            assert post(client, "/step", {"id": first, "action": "look"}) == {
                "error": f"environment {first}'s game was closed: more than 2 games were open at once "
                         "(AGENTGYM_ALFWORLD_MAX_GAMES); POST /reset to start it again"}
            for env_id in (second, third):
                assert "error" not in post(client, "/step", {"id": env_id, "action": "go to bed 1"})
            again = post(client, "/reset", {"id": first, "game": 2423, "world_type": "Text"})
            assert again["id"] == first and "error" not in again
            assert fast_downward_copies(server.pid) == 2
    finally:
        server.stop()


def test_a_bad_max_games_stops_the_server_saying_why():
    done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "serve", "alfworld", "--port", "9"],
                          env={**os.environ, "AGENTGYM_ALFWORLD_MAX_GAMES": "none"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "AGENTGYM_ALFWORLD_MAX_GAMES='none': expected a whole number of games, 1 or more" in done.stderr
