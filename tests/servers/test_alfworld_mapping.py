"""ALFWorld's task mapping: game index -> game file, as AgentGym's agentenv-alfworld
maps it (no engine needed)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.alfworld_support import shipped_rule
from pytest_agentgym.servers.embedded.alfworld_tasks import UnknownGame, game_dirs, game_file, task_type

#: sha256 of "<item_id>\t<path under the data directory>" lines, one per game, built from
#: AgentGym 3ef9235's agentenv-alfworld/configs/mappings_{train,test}.json with its
#: env_wrapper's rule (train -> json_2.1.1/train, test -> json_2.1.1/valid_train)
ORIGINAL_MAPPING_SHA256 = "e73d45d71627782c3d9f5974834715e494619cc0874a19d5823ca94644f0f4f4"
#: a clone of WooooDyy/AgentGym, when there is one, for the direct comparison
AGENTGYM_REPO = Path(os.environ.get("AGENTGYM_SOURCE_REPO", "/work/.mirror/WooooDyy+AgentGym/repo"))


#: AgentGym's games; ALFWorld's own valid_seen and valid_unseen follow (2620-2893)
AGENTGYM_GAMES = 2620


def mapping_lines(path_of) -> list[str]:
    return [f"{index}\t{path_of(index)}" for index in range(AGENTGYM_GAMES)]


def original_lines() -> list[str]:
    lines = []
    for split, folder in (("train", "train"), ("test", "valid_train")):
        shown = subprocess.run(
            ["git", "-C", str(AGENTGYM_REPO), "show", f"HEAD:agentenv-alfworld/configs/mappings_{split}.json"],
            capture_output=True, text=True, check=True).stdout
        lines += [f"{entry['item_id']}\tjson_2.1.1/{folder}/{entry['task_type']}/{entry['task_id']}/game.tw-pddl"
                  for entry in json.loads(shown)]
    return lines


def test_the_task_mapping_is_agentgyms_for_all_2620_games():
    lines = mapping_lines(shipped_rule)
    assert len(lines) == 2620
    assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == ORIGINAL_MAPPING_SHA256
    assert lines[2419].split("\t")[1].startswith("json_2.1.1/train/")
    assert lines[2420].split("\t")[1].startswith("json_2.1.1/valid_train/")


@pytest.mark.skipif(not (AGENTGYM_REPO / "HEAD").exists() and not (AGENTGYM_REPO / ".git").exists(),
                    reason=f"no AgentGym clone at {AGENTGYM_REPO} (set AGENTGYM_SOURCE_REPO)")
def test_the_task_mapping_equals_the_original_files():
    assert mapping_lines(shipped_rule) == original_lines()


def test_indices_outside_the_mapping_are_refused_by_name():
    for index in (-1, 2894):
        with pytest.raises(UnknownGame, match=f"game {index} is not in the ALFWorld mapping: .* 2620-2759 "
                                              r"\(valid_seen\) and 2760-2893 \(valid_unseen\)"):
            game_file(Path("/data"), index)


def test_alfworlds_own_splits_follow_agentgyms_games_in_sorted_order():
    dirs = game_dirs()
    assert len(dirs) == 2894
    seen, unseen = dirs[2620:2760], dirs[2760:]
    assert (len(seen), len(unseen)) == (140, 134)
    assert all(d.startswith("valid_seen/") for d in seen) and all(d.startswith("valid_unseen/") for d in unseen)
    assert list(seen) == sorted(seen) and list(unseen) == sorted(unseen)
    assert game_file(Path("/data"), 2620).as_posix().startswith("/data/json_2.1.1/valid_seen/")


def test_task_type_is_the_two_directories_above_the_game_file():
    path = game_file(Path("/data"), 2420)
    assert task_type(path) == ("pick_cool_then_place_in_recep-Mug-None-CoffeeMachine-23/"
                               "trial_T20190908_143209_571893")
