"""The shipped ALFWorld games: what the generator writes, that they are valid
ALFWorld games for alfworld's own loader, and that they are the json_2.1.1 kind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers.alfworld_support import SHIPPED, game, needs_engine
from pytest_agentgym.servers.embedded.alfworld_games import SCENES, json_211_logic, write_games
from pytest_agentgym.servers.embedded.alfworld_tasks import SHIPPED_DATA, game_dirs

pytestmark = [needs_engine, pytest.mark.heavy]

#: a clone of alfworld/alfworld, when there is one, to compare with the 0.3.3 files
ALFWORLD_REPO = Path("/work/.mirror/alfworld+alfworld/repo")


def test_the_committed_games_are_what_the_generator_writes(tmp_path):
    written = write_games(tmp_path)
    shipped = sorted(path.relative_to(SHIPPED_DATA) for path in SHIPPED_DATA.rglob("*") if path.is_file())
    assert sorted(path.relative_to(tmp_path) for path in written) == shipped
    for relative in shipped:
        assert (tmp_path / relative).read_bytes() == (SHIPPED_DATA / relative).read_bytes(), relative


def test_the_shipped_games_cover_all_six_task_types_at_their_mapping_paths():
    assert SHIPPED == [scene.index for scene in SCENES] == list(range(2420, 2428))
    kinds = {game_dirs()[index].split("/")[1].split("-")[0] for index in SHIPPED}
    assert kinds == {"pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                     "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                     "pick_two_obj_and_place"}


def test_the_games_carry_the_json_211_domain_and_grammar():
    domain, grammar = json_211_logic()
    assert "(:action help" not in domain and "put {o} in/on {r}" in grammar
    assert "You arrive at {lend.name}." in grammar and "move {o} to {r}" not in grammar
    for index in SHIPPED:
        data = game(index)
        assert data["pddl_domain"] == domain
        assert data["grammar"].replace(data["grammar"].split('"Your task is to: ')[1].split('."')[0],
                                       "UNKNOWN GOAL") == grammar
        assert data["solvable"] is True and data["walkthrough"]


@pytest.mark.skipif(not ALFWORLD_REPO.exists(), reason=f"no alfworld clone at {ALFWORLD_REPO}")
def test_the_json_211_logic_is_alfworld_0_3_3s_files_byte_for_byte():
    def at_033(name: str) -> str:
        return subprocess.run(["git", "-C", str(ALFWORLD_REPO), "show", f"0.3.3:alfworld/data/{name}"],
                              capture_output=True, text=True, check=True).stdout

    assert json_211_logic() == (at_033("alfred.pddl"), at_033("alfred.twl2"))


def test_alfworlds_own_loader_collects_the_shipped_games():
    """alfworld's AlfredTWEnv walks a data directory and keeps the solvable games with a
    traj_data.json of a known task type: all eight are kept."""
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    config = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
              "dataset": {"data_path": str(SHIPPED_DATA / "json_2.1.1" / "valid_train"), "num_train_games": -1}}
    env = AlfredTWEnv(config, train_eval="train")
    assert sorted(env.game_files) == sorted(
        str(SHIPPED_DATA / "json_2.1.1" / game_dirs()[index] / "game.tw-pddl") for index in SHIPPED)


def test_traj_data_names_the_task_of_its_directory():
    for index in SHIPPED:
        folder = SHIPPED_DATA / "json_2.1.1" / game_dirs()[index]
        data = json.loads((folder / "traj_data.json").read_text())
        kind, target = folder.parent.name.split("-")[:2]
        assert data["task_type"] == kind and data["pddl_params"]["object_target"] == target
