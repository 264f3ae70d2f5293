"""The embedded lmrlgym server's Wordle half, held to the protocol sheet (section 14.2).

The server runs as a real process on loopback. Expected values come from the
sheet: the 40-word vocabulary in file order (14.2.2), the first target per seed
(14.2.3), the worked seed-0 and seed-36 traces, and the reward and done tables
(14.2.6, 14.2.7). Raw response text is checked where the JSON number type
matters (``0`` and ``1`` vs ``0.0``).
"""

from __future__ import annotations

import json

import httpx
import pytest

from helpers.wordle_facts import FIRST_TARGET, VOCABULARY

SOLVED = '{"observation":"g g g g g\\n","reward":1,"done":true}'
INVALID = '{"observation":"invalid word","reward":0.0,"done":false}'


#: the session's embedded server (and path) that the ``http`` fixture (tests/conftest.py) talks to
EMBEDDED_SERVER = "lmrlgym/wordle"


def new_env(http: httpx.Client, seed: int | None = None) -> int:
    env_id = http.post("/create").json()["id"]
    if seed is not None:
        assert http.post("/reset", json={"id": env_id, "seed": seed}).json() == {
            "id": env_id, "observation": "Let's start Wordle!",
        }
    return env_id


def guess(http: httpx.Client, env_id: int, action: str) -> str:
    response = http.post("/step", json={"id": env_id, "action": action})
    assert response.status_code == 200
    return response.text


def spaced(word: str) -> str:
    return " ".join(word)


def test_sheet_tables_are_consistent():
    assert len(VOCABULARY) == len(set(VOCABULARY)) == 40
    assert len(FIRST_TARGET) == 25 and set(FIRST_TARGET) <= set(VOCABULARY)


def test_vocabulary_before_any_reset(http):
    env_id = new_env(http)
    assert http.get("/filtered_vocab", params={"id": env_id}).json() == VOCABULARY


def test_worked_trace_seed_0(http):
    env_id = new_env(http, 0)
    assert guess(http, env_id, "p a n i c") == '{"observation":"b y b b b\\n","reward":0,"done":false}'
    assert http.get("/filtered_vocab", params={"id": env_id}).json() == [
        "solar", "sugar", "shard", "aloft", "frame", "ultra", "aroma", "shake",
    ]
    assert json.loads(guess(http, env_id, "s h i r e")) == {
        "observation": "b b b y b\n", "reward": 0, "done": False,
    }
    # The re-drawn target was aroma: it is the only word left.
    assert http.get("/filtered_vocab", params={"id": env_id}).json() == ["aroma"]


@pytest.mark.parametrize("action", ["f r a m e", "frame", "  f r a m e \n"])
def test_frame_first_solves_seed_0(http, action):
    env_id = new_env(http, 0)
    assert guess(http, env_id, action) == SOLVED


@pytest.mark.parametrize("seed", range(25))
def test_first_target_per_seed(http, seed):
    env_id = new_env(http, seed)
    assert guess(http, env_id, spaced(FIRST_TARGET[seed])) == SOLVED


@pytest.mark.parametrize("seed", [3, 17, 24])
def test_a_negative_seed_is_refused_and_the_game_is_left_as_it_was(http, seed):
    """The original plays seed -s as seed s (random.Random takes |s|): another task
    index's game. Ours refuses it (docs/envs/maze-wordle.md)."""
    env_id = new_env(http, seed)
    answer = http.post("/reset", json={"id": env_id, "seed": -seed}).json()
    assert answer == {"error": f"seed {-seed} is out of range: Wordle seeds are 0 or more (the original "
                               f"would play seed {-seed} as seed {seed}, another task)"}
    assert guess(http, env_id, spaced(FIRST_TARGET[seed])) == SOLVED


def test_repeated_letters_are_not_counted(http):
    env_id = new_env(http, 36)  # draws aloft
    assert json.loads(guess(http, env_id, "r o b o t"))["observation"] == "b y b y g\n"


@pytest.mark.parametrize("action", ["P A N I C", "panic.", "xxxxx", "frown", "f e l o n", "", "pan ic s"])
def test_invalid_guesses(http, action):
    env_id = new_env(http, 0)
    assert guess(http, env_id, action) == INVALID
    assert http.get("/observation", params={"id": env_id}).json() == "invalid word"
    # Nothing was drawn and nothing was filtered: the seed-0 trace still holds.
    assert http.get("/filtered_vocab", params={"id": env_id}).json() == VOCABULARY
    assert json.loads(guess(http, env_id, "panic"))["observation"] == "b y b b b\n"


def test_done_on_the_sixth_action_counting_invalid_ones(http):
    env_id = new_env(http, 0)
    guess(http, env_id, "panic")
    guess(http, env_id, "shire")  # only aroma is left now
    for _ in range(3):
        assert guess(http, env_id, "xxxxx") == INVALID
    # solar against aroma, position by position: s b, o y, l b, a y, r y
    assert guess(http, env_id, "solar") == '{"observation":"b y b y y\\n","reward":0,"done":true}'
    finished = {"error": f"The task with environment {env_id} has finished."}
    assert json.loads(guess(http, env_id, "aroma")) == finished
    for endpoint in ("/observation", "/detail", "/filtered_vocab"):
        assert http.get(endpoint, params={"id": env_id}).json() == finished
    reset_again = http.post("/reset", json={"id": env_id, "seed": 0}).json()
    assert reset_again == {"id": env_id, "observation": "Let's start Wordle!"}
    assert guess(http, env_id, "frame") == SOLVED


def test_six_invalid_actions_end_the_game(http):
    env_id = new_env(http, 5)
    for _ in range(5):
        assert guess(http, env_id, "nope!") == INVALID
    assert guess(http, env_id, "nope!") == '{"observation":"invalid word","reward":0.0,"done":true}'


def test_detail_keys_and_reward_types(http):
    env_id = new_env(http)
    assert http.get("/detail", params={"id": env_id}).text == '{"done":false,"reward":0,"deleted":false}'
    http.post("/reset", json={"id": env_id, "seed": 0})
    assert http.get("/detail", params={"id": env_id}).text == (
        '{"done":false,"reward":0,"deleted":false,"seed":0,"observation":"Let\'s start Wordle!"}'
    )
    guess(http, env_id, "panic")
    assert '"reward":0,' in http.get("/detail", params={"id": env_id}).text
    guess(http, env_id, "xxxxx")  # adds the float 0.0
    assert http.get("/detail", params={"id": env_id}).text == (
        '{"done":false,"reward":0.0,"deleted":false,"seed":0,"observation":"invalid word"}'
    )


def test_errors(http):
    env_id = new_env(http)
    # the original: {"error": "'observation'"} (its KeyError)
    assert http.get("/observation", params={"id": env_id}).json() == {"error": (
        f'environment {env_id} has no observation yet: POST /wordle/reset {{"id": {env_id}, '
        '"seed": <0 or more>} before /wordle/observation')}
    unknown = 10**6
    expected = {"error": f"The id {unknown} is not valid."}
    assert http.post("/reset", json={"id": unknown, "seed": 0}).json() == expected
    assert http.post("/step", json={"id": unknown, "action": "panic"}).json() == expected
    for endpoint in ("/observation", "/detail", "/filtered_vocab"):
        assert http.get(endpoint, params={"id": unknown}).json() == expected
    assert http.get("/available_actions").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/reset", {"id": 0}), ("POST", "/reset", {"seed": 0}),
     ("POST", "/step", {"id": 0}), ("GET", "/filtered_vocab", None), ("GET", "/detail", None)],
)
def test_missing_fields_are_422(http, method, path, body):
    assert http.request(method, path, json=body).status_code == 422
