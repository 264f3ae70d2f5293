"""ALFWorld's own games (``../shared/alfworld``, read through ``ALFWORLD_DATA``) on the
embedded server as a real process: AgentGym's 200 test games (items 2420-2619) are won
by their walkthroughs, and the server names the data it plays. Skipped with the reason
where the folder is absent; nothing is downloaded. The generated games' label is here
too: a server without the data says a score on it is not comparable."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from helpers.alfworld_support import REAL_DATA, needs_engine, needs_real_data, real_walkthrough, start_server, task_kind
from pytest_agentgym.servers.embedded.alfworld_tasks import NOT_COMPARABLE, game_file, task_type

pytestmark = [needs_engine, pytest.mark.heavy]

TEST_ITEMS = range(2420, 2620)
SEEN_ITEMS, UNSEEN_ITEMS = range(2620, 2760), range(2760, 2894)
#: the first test game of each of the six task types, in index order
SAMPLE = sorted({task_kind(index): index for index in reversed(TEST_ITEMS)}.values())


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    server = start_server(tmp_path_factory.mktemp("alfworld-real"), env={"ALFWORLD_DATA": str(REAL_DATA)})
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield client
    finally:
        server.stop()


def post(client: httpx.Client, path: str, body: dict | None = None) -> dict:
    answer = client.post(path, json=body) if body is not None else client.post(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def play_walkthrough(client: httpx.Client, env_id: int, index: int) -> tuple[dict, dict, int]:
    """(the reset's answer, the last step's answer, steps taken) of the game's walkthrough."""
    reset = post(client, "/reset", {"id": env_id, "game": index, "world_type": "Text"})
    assert "error" not in reset, (index, reset)
    last, steps = {}, 0
    for action in real_walkthrough(index):
        last = post(client, "/step", {"id": env_id, "action": action})
        steps += 1
        assert "error" not in last and "Nothing happens." not in last["observation"], (index, action, last)
        if last["done"]:
            break
    return reset, last, steps


def test_the_sample_covers_the_six_task_types():
    assert len(SAMPLE) == 6 and len({task_kind(index) for index in SAMPLE}) == 6


@needs_real_data
def test_a_real_game_of_each_task_type_is_won_by_its_walkthrough(real_server):
    env_id = post(real_server, "/create")["id"]
    for index in SAMPLE:
        reset, last, steps = play_walkthrough(real_server, env_id, index)
        assert reset["task_type"] == task_type(game_file(REAL_DATA, index)), index
        assert "Your task is to: " in reset["observation"] and reset["available_actions"], index
        assert (last["reward"], last["done"], steps) == (1.0, True, len(real_walkthrough(index))), index


@needs_real_data
def test_the_server_names_the_real_data_it_plays(real_server):
    """Each split: the games found, the items, a sha256 over its game files in item order."""
    expected, parts = {}, []
    for split, items, games in (("valid_train", TEST_ITEMS, 200), ("valid_seen", SEEN_ITEMS, 140),
                                ("valid_unseen", UNSEEN_ITEMS, 134)):
        digest = hashlib.sha256()
        for index in items:
            digest.update(game_file(REAL_DATA, index).read_bytes())
        span = f"{items[0]}-{items[-1]}"
        expected[split] = {"games": games, "of": games, "items": span, "sha256": digest.hexdigest()[:16]}
        parts.append(f"{split} ({games} games, items {span}, sha256 {digest.hexdigest()[:16]})")
    answer = real_server.get("/embedded/data").json()
    assert answer["comparable"] is True and answer["splits"] == expected
    assert answer["note"] == f"ALFWorld plays ALFWorld's own games from {REAL_DATA}: {'; '.join(parts)}"


@needs_real_data
def test_alfworlds_own_splits_play_at_their_own_items(real_server):
    """valid_seen is items 2620-2759, valid_unseen 2760-2893: a game of each is won by its walkthrough."""
    env_id = post(real_server, "/create")["id"]
    for index, split in ((SEEN_ITEMS[0], "valid_seen"), (UNSEEN_ITEMS[-1], "valid_unseen")):
        assert game_file(REAL_DATA, index).relative_to(REAL_DATA).parts[:2] == ("json_2.1.1", split)
        reset, last, steps = play_walkthrough(real_server, env_id, index)
        assert reset["task_type"] == task_type(game_file(REAL_DATA, index)), index
        assert (last["reward"], last["done"], steps) == (1.0, True, len(real_walkthrough(index))), index


def test_the_generated_games_are_labelled_not_comparable(tmp_path):
    server = start_server(tmp_path, env={"ALFWORLD_DATA": ""})
    try:
        answer = httpx.get(server.url + "/embedded/data", timeout=60).json()
    finally:
        server.stop()
    assert answer["comparable"] is False and answer["source"] == "generated"
    assert answer["note"] == NOT_COMPARABLE
    assert NOT_COMPARABLE.startswith("ALFWorld plays the project's generated games: not comparable with "
                                     "published ALFWorld scores")


@needs_real_data
@pytest.mark.slow
def test_all_200_test_games_are_won_by_their_walkthroughs(real_server):
    env_id = post(real_server, "/create")["id"]
    lost = []
    for index in TEST_ITEMS:
        _, last, _ = play_walkthrough(real_server, env_id, index)
        if (last.get("reward"), last.get("done")) != (1.0, True):
            lost.append(index)
    assert lost == []
