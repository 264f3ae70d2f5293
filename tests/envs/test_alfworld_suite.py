"""`pytest suites/moderate --agentgym-envs=ALFWorld` on the local node, end to end: the
embedded ALFWorld server and the reference agent (its own ALFWorld policy, not a
replay) spawned as real processes, on the shipped games."""

from __future__ import annotations

import html
import json

import pytest

from helpers.alfworld_support import REAL_DATA, SHIPPED, needs_engine, needs_real_data
from helpers.projects import copy_shipped_suite, episodes, run
from pytest_agentgym.servers.embedded.alfworld_tasks import NOT_COMPARABLE

pytestmark = [needs_engine, pytest.mark.heavy]


def copy_suite(pytester: pytest.Pytester) -> None:
    copy_shipped_suite(pytester, "suites/moderate/alfworld.yaml")


def test_the_moderate_suite_runs_alfworld_on_the_local_node(pytester, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    copy_suite(pytester)
    result = run(pytester, "suites/moderate", "--agentgym-envs=ALFWorld", "--agentgym-run-id=alf")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*node local*", "collected 8 items", f"agentgym: {NOT_COMPARABLE}",
                                 "GATE PASSED: ALFWorld success_rate >= 0.8: success_rate = 1.000*"])
    run_dir = pytester.path / "reports" / "alf"  # the generated games' label, as WebShop's catalogue's
    assert NOT_COMPARABLE in json.loads((run_dir / "run.json").read_text())["notes"]
    assert NOT_COMPARABLE in html.unescape((run_dir / "report.html").read_text())
    records = episodes(pytester, "alf")
    assert sorted(r["task_index"] for r in records) == SHIPPED
    for record in records:
        assert record["error"] is None and record["stop_reason"] == "done", record["task_index"]
        assert record["reward"] == 1.0 and record["success"] is True, record["task_index"]
        observations = [turn["observation"] for turn in record["turns"]]
        assert "Nothing happens." not in observations, record["task_index"]  # every action was admissible


@needs_real_data
def test_a_run_on_alfworlds_own_games_names_the_data(pytester, monkeypatch):
    """With ALFWORLD_DATA the local node's suite is the 200 test items (two played here, both
    won by the reference policy); the run records which data it played, not the label."""
    monkeypatch.setenv("ALFWORLD_DATA", str(REAL_DATA))
    copy_suite(pytester)
    result = run(pytester, "suites/moderate", "--agentgym-envs=ALFWorld", "--agentgym-tasks=2422,2423",
                 "--agentgym-run-id=real")
    assert result.ret == 0, result.stdout.str()[-3000:]
    note = f"ALFWorld plays ALFWorld's own games from {REAL_DATA}: valid_train (200 games, items 2420-2619, sha256 "
    result.stdout.fnmatch_lines([f"agentgym: {note}*"])
    assert NOT_COMPARABLE not in result.stdout.str()
    notes = json.loads((pytester.path / "reports" / "real" / "run.json").read_text())["notes"]
    assert [n for n in notes if n.startswith(note)] and NOT_COMPARABLE not in notes
    assert [(r["task_index"], r["reward"]) for r in sorted(episodes(pytester, "real"), key=lambda r: r["task_index"])] \
        == [(2422, 1.0), (2423, 1.0)]


@pytest.mark.faults
def test_a_game_the_data_does_not_have_is_an_env_error_naming_the_file(pytester, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    copy_suite(pytester)
    result = run(pytester, "suites/moderate", "--agentgym-envs=ALFWorld", "--agentgym-tasks=2428",
                 "--agentgym-run-id=missing")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "ALFWorld[[]2428]: env error EnvErrorResponse:*game 2428 is */json_2.1.1/valid_train/*/game.tw-pddl, "
        "which is not in the shipped games*"])
    (record,) = episodes(pytester, "missing")
    assert record["outcome"] == "error" and record["reward"] is None
    assert record["error"]["type"] == "EnvErrorResponse"
    assert "set ALFWORLD_DATA to a directory holding ALFWorld's json_2.1.1 games" in record["error"]["message"]


def test_the_reference_policy_reads_every_goal_template_of_alfworld():
    """Each of alfworld's task sentences for the six task types (its goal library's
    templates, as add_task_to_grammar fills them) is read as the right task."""
    import alfworld.gen.goal_library as goals

    from pytest_agentgym.model.reference.alfworld import read_task

    kinds = {"pick_and_place_simple": "place", "pick_clean_then_place_in_recep": "clean",
             "pick_heat_then_place_in_recep": "heat", "pick_cool_then_place_in_recep": "cool",
             "pick_two_obj_and_place": "two", "look_at_obj_in_light": "look"}
    for task_type, kind in kinds.items():
        for template in goals.gdict[task_type]["templates"]:
            sentence = template.format(obj="soapbar", recep="garbagecan", toggle="floorlamp", mrecep="")
            task = read_task(sentence)
            target = "floorlamp" if kind == "look" else "garbagecan"
            assert (task.kind, task.thing, task.target) == (kind, "soapbar", target), sentence
