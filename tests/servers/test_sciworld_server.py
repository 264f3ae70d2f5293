"""The embedded SciWorld server, a real process on the real ScienceWorld simulator,
held to the original agentenv-sciworld server's answers.

The expected answers are data produced by the original: ``sciworld_original_answers.json``
(its answers to a fixed call sequence, from a fresh start) and
``sciworld_games_original.json`` (its task list, dumped from its own code). Both were
recorded with scienceworld 1.2.3 (see their ``about`` fields).
"""

from __future__ import annotations

import json

import httpx
import psutil
import pytest

from helpers.sciworld_support import DATA, ORIGINAL_GAMES, java_children, needs_simulator, start_server

pytestmark = [needs_simulator, pytest.mark.heavy]

ORIGINAL = json.loads((DATA / "sciworld_original_answers.json").read_text())["calls"]
#: where ours answers on purpose with a clearer message (docs/envs/sciworld.md):
#: (method, path, the original's answer) -> ours; the status is the original's
CLEARER = {
    ("GET", "/observation?id=0", '{"error": "\'observation\'"}'): {"error": (  # its KeyError
        'environment 0 has no observation yet: POST /reset {"id": 0, "data_idx": <0-4638>} '
        "before /observation")},
    ("POST", "/reset", '{"error": "list index out of range"}'): {"error": (
        "data_idx 4639 is out of range: SciWorld task indices are 0-4638 (the simulator's "
        "(task, variation) pairs)")},
    # close twice, and an unknown id: HTTP 500, the original's unhandled exception
    ("POST", "/close", '"Internal Server Error"'): None,
}
CLOSE_500 = ["POST /close: The task with environment 1 has been deleted.", "POST /close: The id 98 is not valid."]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = start_server(tmp_path_factory.mktemp("sciworld"))
    yield running
    running.stop()


def call(url: str, row: dict) -> tuple[int, object]:
    if row["body"] is None:
        response = httpx.request(row["method"], url + row["path"], timeout=120)
    else:
        response = httpx.request(row["method"], url + row["path"], json=row["body"], timeout=120)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def test_every_answer_equals_the_originals_from_a_fresh_start(server):
    """Create, reset, invalid actions, a gold path to score 100, the done guard, close
    twice (HTTP 500), a deleted env, bad bodies (422): status, body and key order."""
    clearer, closes = [], []
    for row in ORIGINAL:
        status, answer = call(server.url, row)
        where = f"{row['method']} {row['path']} {json.dumps(row['body'])}"
        assert status == row["status"], where
        key = (row["method"], row["path"], json.dumps(row["answer"]))
        if key in CLEARER:
            clearer.append(key)
            if CLEARER[key] is None:
                closes.append(answer)
            else:
                assert answer == CLEARER[key], where
            continue
        assert answer == row["answer"], where
        if isinstance(answer, dict):
            assert list(answer) == list(row["answer"]), f"key order of {where}"
    assert set(clearer) == set(CLEARER) and len(clearer) == 4  # each departure, where it was recorded
    assert closes == CLOSE_500


def test_an_invalid_action_gets_the_originals_answer_and_changes_nothing(server):
    env_id = httpx.post(server.url + "/create", timeout=120).json()["id"]
    reset = httpx.post(server.url + "/reset", json={"id": env_id, "data_idx": 3236}, timeout=120).json()
    assert reset["task_name"] == "find-non-living-thing" and reset["score"] == 0
    for action in ("fly to the moon", "pick up the ocean", "Action: look around"):
        answer = httpx.post(server.url + "/step", json={"id": env_id, "action": action}, timeout=120).json()
        assert answer == {"observation": "No known action matches that input.",
                          "reward": 0, "score": 0, "done": False}
    look = httpx.post(server.url + "/step", json={"id": env_id, "action": "look around"}, timeout=120).json()
    assert look["observation"].startswith("This room is called the ")
    assert httpx.post(server.url + "/close", json={"id": env_id}, timeout=120).json() is True


def test_task_index_names_the_originals_task_and_variation_where_each_task_starts(server):
    """A real /reset at the first index of every task and the last index; -1 and one
    past the end are refused naming the range (the original takes -1 as a Python list
    index, the last task, and answers "list index out of range" past the end).
    (Every index: the next test.)"""
    boundaries = {0, len(ORIGINAL_GAMES) - 1}
    for index in range(1, len(ORIGINAL_GAMES)):
        if ORIGINAL_GAMES[index][0] != ORIGINAL_GAMES[index - 1][0]:
            boundaries.add(index)
    env_id = httpx.post(server.url + "/create", timeout=120).json()["id"]
    for index in sorted(boundaries):
        answer = httpx.post(server.url + "/reset", json={"id": env_id, "data_idx": index}, timeout=120).json()
        assert [answer.get("task_name"), answer.get("var_num")] == list(ORIGINAL_GAMES[index]), index
        assert answer["done"] is False and answer["deleted"] is False  # some tasks start above 0
    for outside in (-1, len(ORIGINAL_GAMES)):
        refused = httpx.post(server.url + "/reset", json={"id": env_id, "data_idx": outside}, timeout=120)
        assert refused.json() == {"error": f"data_idx {outside} is out of range: SciWorld task indices are "
                                           f"0-{len(ORIGINAL_GAMES) - 1} (the simulator's (task, variation) pairs)"}
    httpx.post(server.url + "/close", json={"id": env_id}, timeout=120)


def test_the_task_list_equals_agentgyms_for_all_indices():
    """The server's own task list (built from the simulator at start-up) against the
    list the original builds, all 4,639 indices."""
    from pytest_agentgym.servers.embedded.sciworld_tasks import list_games, start_simulator

    simulator = start_simulator()
    try:
        ours = [(game.task_name, game.variation) for game in list_games(simulator)]
    finally:
        simulator.close()
    assert len(ours) == len(ORIGINAL_GAMES) == 4639
    assert ours == ORIGINAL_GAMES


def test_a_closed_envs_jvm_serves_the_next_create_and_stop_ends_every_jvm(tmp_path):
    """Default: the start-up JVM and closed ones are kept (2 spares); stopping the
    server ends them all."""
    server = start_server(tmp_path)
    try:
        assert len(java_children(server.proc.pid)) == 1  # the one that listed the tasks
        first = httpx.post(server.url + "/create", timeout=120).json()["id"]
        assert len(java_children(server.proc.pid)) == 1  # it took the spare
        second = httpx.post(server.url + "/create", timeout=120).json()["id"]
        assert len(java_children(server.proc.pid)) == 2
        for env_id in (first, second):
            assert httpx.post(server.url + "/close", json={"id": env_id}, timeout=120).json() is True
        third = httpx.post(server.url + "/create", timeout=120).json()["id"]
        assert len(java_children(server.proc.pid)) == 2  # reused, none started
        answer = httpx.post(server.url + "/reset", json={"id": third, "data_idx": 4240}, timeout=120).json()
        assert answer["task_name"] == "lifespan-longest-lived" and answer["score"] == 0
        jvms = java_children(server.proc.pid)
    finally:
        server.stop()
    gone, alive = psutil.wait_procs(jvms, timeout=30)
    assert alive == [], f"JVMs left after the server stopped: {[p.pid for p in alive]}"


def test_with_no_spares_each_create_starts_a_jvm_and_close_ends_it_like_the_original(tmp_path):
    server = start_server(tmp_path, env={"AGENTGYM_SCIWORLD_SPARE_JVMS": "0"})
    try:
        assert java_children(server.proc.pid) == []  # the start-up JVM is closed, as in the original
        env_id = httpx.post(server.url + "/create", timeout=120).json()["id"]
        (jvm,) = java_children(server.proc.pid)
        assert httpx.post(server.url + "/close", json={"id": env_id}, timeout=120).json() is True
        gone, alive = psutil.wait_procs([jvm], timeout=30)
        assert alive == []
    finally:
        server.stop()


def test_step_visual_takes_raw_model_text_and_adds_tree_inventory_and_moves(server):
    env_id = httpx.post(server.url + "/create", timeout=120).json()["id"]
    httpx.post(server.url + "/reset", json={"id": env_id, "data_idx": 4240}, timeout=120)
    answer = httpx.post(server.url + "/step_visual", timeout=120,
                        json={"id": env_id, "action": "Thought: where am I?\nAction: look around</s>"}).json()
    assert list(answer) == ["observation", "reward", "score", "done", "info", "object_tree", "inventory", "moves"]
    assert answer["observation"].startswith("This room is called the hallway.")
    assert answer["moves"] == answer["info"]["moves"] == 0  # "look around" takes no time
    assert isinstance(answer["object_tree"], dict) and "In your inventory" in answer["inventory"]
    detail = httpx.get(server.url + "/detail", params={"id": env_id}, timeout=120).json()
    assert detail["moves"] == answer["moves"]  # kept in the env's info, as the original does
    httpx.post(server.url + "/close", json={"id": env_id}, timeout=120)
