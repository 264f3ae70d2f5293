"""Writes the ALFWorld games that ship with the embedded ALFWorld server.

    python -m pytest_agentgym.servers.embedded.alfworld_games [--out DIR]

Real ALFWorld games are ``game.tw-pddl`` files: JSON documents that TextWorld's
``PddlEnv`` loads, with the keys ``pddl_domain`` (the ALFRED domain),
``grammar`` (the text the game prints), ``pddl_problem`` (one household scene
and its goal), ``walkthrough`` and ``solvable`` (written by alfworld's own
``alfworld-generate``, read by its loader). ALFRED's scenes come from the AI2-THOR
simulator, which this project cannot ship; the scenes here are small rooms
written by hand (:data:`SCENES`), in the same PDDL vocabulary and with the same
object names, placed at the paths that AgentGym's task mapping gives for test
games 2420-2427, so that one index -> path rule serves the shipped games and
the real data alike.

What comes from the ``alfworld`` package, not from here:

* the domain and the grammar (its ``alfworld/data/alfred.pddl`` and
  ``alfred.twl2``), turned back into the form of the ``json_2.1.1`` data that
  AgentGym's pin (alfworld 0.3.3) downloads: alfworld 0.4 ships them patched
  for its ``json_2.1.2`` data ("move X to Y", a ``help`` action), and
  :func:`json_211_logic` undoes exactly that patch (its ``patch_tw-pddl.py``);
* the task sentence: alfworld's ``add_task_to_grammar`` fills "UNKNOWN GOAL"
  from ``traj_data.json`` with its goal templates, as ``alfworld-generate`` does;
* the goal: alfworld's goal library (``alfworld.gen.goal_library``);
* which receptacle holds what, and which objects can be cleaned, heated,
  cooled or switched on (``alfworld.gen.constants``);
* the walkthrough: the game's own planner (fast-downward through
  ``PddlState.replan``), replayed to a win before the file is written.

Run it again after changing a scene; a test checks that the committed files
are what it writes.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentgym.servers.embedded.alfworld_tasks import SHIPPED_DATA, game_dirs, game_file, import_alfworld


#: a receptacle: (ALFRED type, ordinal); an object: (ALFRED type, receptacle it is in)
Recep = tuple[str, int]


@dataclass(frozen=True)
class Scene:
    """One hand-written room at one index of AgentGym's mapping; the task comes from
    the mapping's directory name (``<task type>-<object>-<mrecep>-<parent>-<scene>``)."""

    index: int
    receptacles: tuple[Recep, ...]
    #: (object type, receptacle) for every object in the room
    objects: tuple[tuple[str, Recep], ...]

    @property
    def task_dir(self) -> str:
        return game_dirs()[self.index].split("/")[1]

    @property
    def trial(self) -> str:
        return game_dirs()[self.index].split("/")[2]

    @property
    def task_type(self) -> str:
        return self.task_dir.split("-")[0]

    @property
    def object_target(self) -> str:
        return self.task_dir.split("-")[1]

    @property
    def parent_target(self) -> str:
        """The receptacle to put the object in ("" for look_at_obj_in_light)."""
        return "" if self.task_type == "look_at_obj_in_light" else self.task_dir.split("-")[3]

    @property
    def toggle_target(self) -> str:
        """The lamp of look_at_obj_in_light, whose directory names it where others name the parent."""
        return self.task_dir.split("-")[3] if self.task_type == "look_at_obj_in_light" else ""


KITCHEN_23 = (("Cabinet", 1), ("Cabinet", 2), ("CoffeeMachine", 1), ("CounterTop", 1),
              ("CounterTop", 2), ("Fridge", 1), ("Microwave", 1), ("SinkBasin", 1))

#: the shipped games: test items 2420-2427 of AgentGym's mapping (all six task types)
SCENES: tuple[Scene, ...] = (
    Scene(2420, KITCHEN_23,
          (("Mug", ("Cabinet", 2)), ("Apple", ("CounterTop", 1)), ("Egg", ("Fridge", 1)),
           ("Potato", ("CounterTop", 2)))),
    Scene(2421, (("ArmChair", 1), ("CoffeeTable", 1), ("Drawer", 1), ("SideTable", 1), ("SideTable", 2),
           ("Sofa", 1)),
          (("TissueBox", ("SideTable", 1)), ("TissueBox", ("Drawer", 1)),
           ("RemoteControl", ("Sofa", 1)), ("KeyChain", ("CoffeeTable", 1)))),
    Scene(2422, (("BathtubBasin", 1), ("Cabinet", 1), ("Cabinet", 2), ("CounterTop", 1),
           ("GarbageCan", 1), ("SinkBasin", 1), ("Toilet", 1)),
          (("SoapBar", ("Toilet", 1)), ("SoapBottle", ("CounterTop", 1)),
           ("ToiletPaper", ("Cabinet", 1)), ("Cloth", ("BathtubBasin", 1)))),
    Scene(2423, (("ArmChair", 1), ("Bed", 1), ("Desk", 1), ("Drawer", 1), ("SideTable", 1)),
          (("Pillow", ("Bed", 1)), ("Laptop", ("Desk", 1)), ("CellPhone", ("ArmChair", 1)),
           ("Book", ("SideTable", 1)))),
    Scene(2424, (("Cabinet", 1), ("CounterTop", 1), ("Fridge", 1), ("Microwave", 1), ("SideTable", 1),
           ("SinkBasin", 1)),
          (("Apple", ("Fridge", 1)), ("Bread", ("CounterTop", 1)), ("Mug", ("SideTable", 1)),
           ("Tomato", ("CounterTop", 1)))),
    Scene(2425, (("Cabinet", 1), ("CounterTop", 1), ("Drawer", 1), ("Shelf", 1), ("Shelf", 2),
           ("SinkBasin", 1)),
          (("DishSponge", ("Drawer", 1)), ("Fork", ("CounterTop", 1)), ("Plate", ("Shelf", 2)))),
    Scene(2426, (("Cabinet", 1), ("CounterTop", 1), ("CounterTop", 2), ("DiningTable", 1), ("Fridge", 1),
           ("Microwave", 1)),
          (("Tomato", ("DiningTable", 1)), ("Lettuce", ("Fridge", 1)), ("Bowl", ("Cabinet", 1)))),
    Scene(2427, (("Bed", 1), ("Desk", 1), ("Drawer", 1), ("Dresser", 1), ("SideTable", 1)),
          (("Book", ("Bed", 1)), ("DeskLamp", ("SideTable", 1)), ("Pen", ("Desk", 1)),
           ("AlarmClock", ("Dresser", 1)), ("CellPhone", ("Drawer", 1)))),
)

#: the part of alfworld's patch_tw-pddl.py (json_2.1.1 -> 2.1.2) that rewrites text
GRAMMAR_PATCH = (
    ("You arrive at {lend.name}.", "You arrive at {r.name}."),
    ("put {o} in/on {r}", "move {o} to {r}"),
    ("You put the {o.name} in/on the {r.name}.", "You move the {o.name} to the {r.name}."),
)


def json_211_logic() -> tuple[str, str]:
    """(domain, grammar) as in the ``json_2.1.1`` games: the installed alfworld's
    files with its 2.1.2 patch undone (no ``help`` action, "put X in/on Y")."""
    import_alfworld()
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    domain = Path(ALFRED_PDDL_PATH).read_text()
    grammar = Path(ALFRED_TWL2_PATH).read_text()
    if "(:action help" in domain:
        before, help_and_rest = domain.split("(:action help", 1)
        domain = before + help_and_rest[help_and_rest.index("\n)\n") + 3:].lstrip("\n")
    if "\naction help {" in grammar:
        grammar = grammar[:grammar.index("\naction help {")]
    for old, new in GRAMMAR_PATCH:
        grammar = grammar.replace(new, old)
    return domain, grammar


def thor_name(kind: str, number: int, salt: int) -> str:
    """A THOR-style object id, mangled as ALFRED's PDDL writes them
    (``Mug|+01.25|+00.90|-02.10`` -> ``Mug_bar__plus_01_dot_25_bar_...``)."""
    rng = random.Random(f"{salt}/{kind}/{number}")
    coords = "|".join(f"{rng.uniform(-3, 3):+06.2f}" for _ in range(3))
    name = f"{kind}|{coords}"
    if kind.endswith("Basin"):  # THOR's sink and bathtub basins: Sink|x|y|z|SinkBasin
        name = f"{kind[:-len('Basin')]}|{coords}|{kind}"
    return mangle(name)


def mangle(name: str) -> str:
    for old, new in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"),
                     (",", "_comma_")):
        name = name.replace(old, new)
    return name


def location(number: int) -> str:
    return mangle(f"loc|{number}|{-number}|{number % 4}|{30 + 15 * (number % 3)}")


def pddl_problem(scene: Scene) -> str:
    """The scene in ALFRED's PDDL vocabulary, with the task's goal from alfworld's goal library."""
    import_alfworld()
    import alfworld.gen.constants as constants
    import alfworld.gen.goal_library as goals

    movable = set(constants.MOVABLE_RECEPTACLES)
    rtypes = sorted(set(constants.RECEPTACLES) - movable)
    otypes = sorted(set(constants.OBJECTS_SET) - set(rtypes))
    recep_ids = {recep: thor_name(recep[0], recep[1], scene.index) for recep in scene.receptacles}
    recep_locs = {recep: location(n + 1) for n, recep in enumerate(scene.receptacles)}
    counts: dict[str, int] = {}
    objects = []
    for kind, recep in scene.objects:
        counts[kind] = counts.get(kind, 0) + 1
        objects.append((thor_name(kind, counts[kind], scene.index), kind, recep))

    declared = ["agent1 - agent"]
    declared += [f"{kind}Type - otype" for kind in otypes] + [f"{kind}Type - rtype" for kind in rtypes]
    declared += [f"{name} - object" for name, _, _ in objects]
    declared += [f"{name} - receptacle" for name in recep_ids.values()]
    declared += [f"{loc} - location" for loc in [location(0), *recep_locs.values()]]

    facts = ["(atLocation agent1 %s)" % location(0)]
    for recep, name in recep_ids.items():
        facts += [f"(receptacleType {name} {recep[0]}Type)", f"(receptacleAtLocation {name} {recep_locs[recep]})"]
        if recep[0] in constants.OPENABLE_CLASS_LIST:
            facts.append(f"(openable {name})")
    abilities = {"cleanable": "Cleanable", "heatable": "Heatable", "coolable": "Coolable",
                 "toggleable": "Toggleable"}
    for name, kind, recep in objects:
        facts += [f"(objectType {name} {kind}Type)", f"(inReceptacle {name} {recep_ids[recep]})",
                  f"(objectAtLocation {name} {recep_locs[recep]})"]
        if kind not in constants.VAL_ACTION_OBJECTS["Toggleable"]:
            facts.append(f"(pickupable {name})")
        if kind in movable:
            facts.append(f"(isReceptacleObject {name})")
        facts += [f"({predicate} {name})" for predicate, group in abilities.items()
                  if kind in constants.VAL_ACTION_OBJECTS[group]]
    kinds = sorted({kind for _, kind, _ in objects})
    for rtype in sorted({recep[0] for recep in scene.receptacles}):
        facts += [f"(canContain {rtype}Type {kind}Type)" for kind in kinds
                  if kind in constants.VAL_RECEPTACLE_OBJECTS.get(rtype, ())]

    goal = goals.gdict[scene.task_type]["pddl"].format(
        obj=scene.object_target, recep=scene.parent_target, toggle=scene.toggle_target,
        mrecep="None").replace("#", "-")
    body = "\n        ".join(declared)
    init = "\n        ".join(facts)
    return (f"(define (problem plan_{scene.trial})\n    (:domain alfred)\n    (:objects\n        {body}\n"
            f"    )\n    (:init\n        {init}\n    )\n{goal.rstrip()}\n")


def traj_data(scene: Scene) -> dict[str, Any]:
    """The fields of ALFRED's ``traj_data.json`` that alfworld reads for a TextWorld game."""
    return {
        "task_id": scene.trial,
        "task_type": scene.task_type,
        "pddl_params": {
            "object_target": scene.object_target, "parent_target": scene.parent_target,
            "toggle_target": scene.toggle_target, "mrecep_target": "", "object_sliced": False,
        },
        "scene": {"scene_num": int(scene.task_dir.rsplit("-", 1)[1])},
        "note": "hand-written scene for pytest-agentgym (alfworld_games.py), not an ALFRED recording",
    }


def solve(game: dict[str, Any]) -> list[str]:
    """The planner's command sequence for a game, replayed to a win through the
    wrappers the server uses; raises when the game cannot be won."""
    import_alfworld()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    env = AlfredInfos(AlfredDemangler(PddlEnv(textworld.EnvInfos(policy_commands=True)), shuffle=False))
    env.load(game)
    walkthrough = list(env.reset()["policy_commands"])
    won = False
    for command in walkthrough:
        state, _, won = env.step(command)
        if state.feedback == "Nothing happens.":
            raise ValueError(f"the planner's command {command!r} does nothing")
    env.close()
    if not won:
        raise ValueError(f"the planner's commands {walkthrough} do not win the game")
    return walkthrough


def build(scene: Scene, domain: str, grammar: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(game.tw-pddl content, traj_data.json content) of one scene."""
    import_alfworld()
    from alfworld.agents.utils.misc import add_task_to_grammar

    data = traj_data(scene)
    state = random.getstate()
    random.seed(scene.index)  # alfworld draws the goal template with the random module
    try:
        task_grammar = add_task_to_grammar(grammar, data)
    finally:
        random.setstate(state)
    game = {"pddl_domain": domain, "grammar": task_grammar, "pddl_problem": pddl_problem(scene),
            "solvable": None, "walkthrough": None}
    game["walkthrough"] = solve(game)
    game["solvable"] = True
    return game, data


def write_games(root: Path) -> list[Path]:
    """Write every scene's ``game.tw-pddl`` and ``traj_data.json`` under ``root``."""
    domain, grammar = json_211_logic()
    written = []
    for scene in SCENES:
        game, data = build(scene, domain, grammar)
        folder = game_file(root, scene.index).parent
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in (("game.tw-pddl", game), ("traj_data.json", data)):
            (folder / name).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
            written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=SHIPPED_DATA,
                        help=f"data directory to write (default: {SHIPPED_DATA})")
    args = parser.parse_args(argv)
    for path in write_games(args.out):
        print(path)


if __name__ == "__main__":
    main()
