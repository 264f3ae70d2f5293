"""Two small tasks shaped like AgentBench's ALFWorld and WebShop, for tests/helpers/agentbench_server.py.

What is reproduced from AgentBench (``src/server/task.py`` and its tasks, v0.2):

* a sample is a coroutine that talks to the agent through its session: the
  session's ``history`` is a list of ``{"role": "user"|"agent", "content"}``;
  ``await session.action()`` hands the history to the agent and returns its reply
  (``{"status": "normal"|"cancelled"|..., "content"}``), appended as an agent turn;
* the opening is the instructions (user), an acknowledgement (agent), a one-shot
  example (user/agent turns) and the task (user);
* ALFWorld: the reply's ``ACTION: ...`` is matched against the admissible
  commands (no ``ACTION:``, or nothing close: ``agent invalid action``; the same
  output three times running: ``agent invalid action``); after each valid action
  the previous user turn loses its "AVAILABLE ACTIONS" part; the result is
  ``{"result": won, "log": [...], "init_prompt": ...}``, and ``0`` when the sample
  ended early; ``max_step`` rounds without winning: ``task limit reached``;
* WebShop: each round is "Observation: ...\\n\\nAvailable Actions: {json}"; the
  reply must hold ``Action: search[...]`` or ``click[...]`` (else ``agent
  validation failed``, reward 0); the result is ``{"reward", "history"}``; 10
  rounds without buying: ``task limit reached``.

What is made up: the instructions and example texts, the household (six rooms'
worth of receptacles, one object per game), the nearest-command rule (most shared
words, where AgentBench uses a BLEU score), and the shop (tests/helpers/env_idx_server.py's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from helpers.env_idx_server import GOALS, ShopSession


class Cancelled(Exception):
    """The agent side gave the sample up (``/cancel``)."""


@dataclass
class Finish:
    status: str
    result: Any


# -- ALFWorld-shaped ---------------------------------------------------------------------

HOUSE_INSTRUCTIONS = (
    "You are an agent in a simulated household. Each turn you get what you see and a list "
    "of commands you may use; answer with a line 'THOUGHT: ...' (optional) and a line "
    "'ACTION: <one of the commands>'. Only listed commands are accepted.")
HOUSE_ACK = "OK. I'll follow your instructions and try my best to solve the task."
HOUSE_EXAMPLE = (
    ("Here is one example.\nYou are in the middle of a room. Your task is to: put a cup in "
     "sink 1.", "THOUGHT: The cup may be on the table.\nACTION: go to table 1"),
    ("You arrive at table 1. On the table 1, you see a cup 1.", "ACTION: take cup 1 from table 1"),
    ("You pick up the cup 1 from the table 1.", "ACTION: go to sink 1"),
    ("You arrive at sink 1. On the sink 1, you see nothing.", "ACTION: put cup 1 in/on sink 1"),
)
RECEPTACLES = ("cabinet 1", "coffeemachine 1", "countertop 1", "desk 1", "fridge 1", "shelf 1")
#: game index -> (object, where it lies, where it must go)
GAMES = (
    ("apple 1", "countertop 1", "fridge 1"),
    ("mug 1", "cabinet 1", "coffeemachine 1"),
    ("book 1", "shelf 1", "desk 1"),
    ("bread 1", "fridge 1", "countertop 1"),
    ("pen 1", "desk 1", "shelf 1"),
    ("plate 1", "coffeemachine 1", "cabinet 1"),
)


@dataclass
class House:
    obj: str
    place: str | None
    target: str
    at: str | None = None
    holding: bool = False

    def commands(self) -> list[str]:
        found = [f"go to {r}" for r in RECEPTACLES if r != self.at]
        if self.at is not None and self.place == self.at and not self.holding:
            found.append(f"take {self.obj} from {self.at}")
        if self.holding and self.at is not None:
            found.append(f"put {self.obj} in/on {self.at}")
        return found + ["inventory", "look"]

    def step(self, command: str) -> tuple[str, bool]:
        """Apply an admissible command: (observation, won)."""
        if command.startswith("go to "):
            self.at = command[len("go to "):]
            here = f"a {self.obj}" if self.place == self.at and not self.holding else "nothing"
            return f"You arrive at {self.at}. On the {self.at}, you see {here}.", False
        if command.startswith("take "):
            self.holding, self.place = True, None
            return f"You pick up the {self.obj} from the {self.at}.", False
        if command.startswith("put "):
            self.holding, self.place = False, self.at
            return f"You put the {self.obj} in/on the {self.at}.", self.at == self.target
        if command == "inventory":
            return (f"You are carrying: a {self.obj}." if self.holding
                    else "You are not carrying anything."), False
        return f"You are facing the {self.at or 'middle of the room'}. Next to it, you see nothing.", False


def nearest(reply: str, choices: list[str]) -> str | None:
    """The command the reply means: ``ACTION: ...``'s first line, lower-cased; when it
    is not a choice, the choice sharing the most words with it (None if none does)."""
    found = re.search(r"ACTION:(.*)", reply)
    if not found:
        return None
    action = found.group(1).strip().lower().split("\n")[0]
    if action in choices:
        return action
    words = set(action.split())
    scored = max(choices, key=lambda c: len(words & set(c.split())))
    return scored if words & set(scored.split()) else None


async def play_house(index: int, session: "Any", max_step: int) -> Finish:
    obj, place, target = GAMES[index]
    house = House(obj, place, target)
    session.inject("user", HOUSE_INSTRUCTIONS)
    session.inject("agent", HOUSE_ACK)
    for said, answered in HOUSE_EXAMPLE:
        session.inject("user", said)
        session.inject("agent", answered)
    seen = ", ".join(f"a {r}" for r in RECEPTACLES)
    first = (f"Here is your task. You are in the middle of a room. Looking quickly around you, "
             f"you see {seen}.\nYour task is to: put a {obj.split()[0]} in {target}.")
    log: dict[str, Any] = {"log": [], "init_prompt": first}
    session.inject("user", first + available(house.commands()))
    for round_ in range(1, max_step + 1):
        output = (await session.action()).get("content") or ""
        choices = house.commands()
        command = nearest(output, choices)
        if command is None:
            return Finish("agent invalid action", {**log, "result": 0})
        previous = session.history[-2]
        previous["content"] = previous["content"].split("AVAILABLE ACTIONS")[0]
        observation, won = house.step(command)
        session.inject("user", observation + available(house.commands()))
        log["log"].append({"round": round_, "output": output, "action": command,
                           "observation": observation, "done": won})
        if len(log["log"]) > 3 and len({entry["output"] for entry in log["log"][-3:]}) == 1:
            return Finish("agent invalid action", {**log, "result": 0})
        if won:
            return Finish("completed", {**log, "result": True})
    return Finish("task limit reached", {**log, "result": 0})


def available(commands: list[str]) -> str:
    return " AVAILABLE ACTIONS: " + "\n".join(commands) + "\n"


# -- WebShop-shaped -----------------------------------------------------------------------

SHOP_INSTRUCTIONS = (
    "You are shopping on a web site. Each round you get the page you see and what you can "
    "do on it. Search with search[keywords] when there is a search bar, or press one of the "
    "clickables with click[value]. Answer with 'Thought:' and your reasoning, then "
    "'Action:' and one action.")
SHOP_ACK = "Ok."
SHOP_ROUNDS = 10
_SHOP_ACTION = re.compile(r"[Aa]ction: *\n* *((search|click)\[.+?])")
SHOP_TASKS = len(GOALS)


async def play_shop(index: int, session: "Any") -> Finish:
    shop = ShopSession(goal=index)
    session.inject("user", SHOP_INSTRUCTIONS)
    session.inject("agent", SHOP_ACK)
    steps: list[dict[str, Any]] = []
    reward = 0.0
    for _ in range(SHOP_ROUNDS):
        actions = json.dumps({"has_search_bar": shop.page == "search", "clickables": shop.clickables()})
        observation = shop.observation()
        session.inject("user", f"Observation:\n{observation}\n\nAvailable Actions:\n{actions}")
        response = (await session.action()).get("content") or ""
        found = _SHOP_ACTION.search(response)
        steps.append({"observation": observation, "available_actions": actions,
                      "response": response, "action": found.group(1) if found else None})
        if not found:
            return Finish("agent validation failed", {"reward": 0, "history": steps})
        reward, done = shop.act(found.group(1))
        steps[-1].update(reward=reward, done=done)
        if done:
            return Finish("completed", {"reward": reward, "history": steps})
    return Finish("task limit reached", {"reward": reward, "history": steps})


@dataclass
class TaskDef:
    name: str
    indices: list[int] = field(default_factory=list)
    max_step: int = 35

    async def play(self, index: int, session: Any) -> Finish:
        if self.name.startswith("alfworld"):
            return await play_house(index, session, self.max_step)
        return await play_shop(index, session)


def task(name: str, max_step: int = 35) -> TaskDef:
    if name.startswith("alfworld"):
        return TaskDef(name, list(range(len(GAMES))), max_step)
    if name.startswith("webshop"):
        return TaskDef(name, list(range(SHOP_TASKS)), max_step)
    raise SystemExit(f"unknown task {name!r}: this test server has alfworld-* and webshop-*")
