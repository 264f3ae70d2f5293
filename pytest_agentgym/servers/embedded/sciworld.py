"""Embedded SciWorld server on the real ScienceWorld simulator, wire-compatible with
AgentGym's ``agentenv-sciworld`` (protocol sheet section 5).

Run it with ``pytest-agentgym serve sciworld --port 36008``. It needs the
``sciworld`` extra (the ``scienceworld`` package) and a Java runtime; without
them it exits at once saying what to install. Start-up takes one JVM start
(a few seconds): the simulator is asked for its tasks before the port opens.

====================  ======================  ===================================================
``GET /``             --                      ``"This is environment ScienceWorld."``
``POST /create``      no body                 ``{"id": n}`` (ids 0, 1, 2, ...)
``POST /reset``       ``{"id", "data_idx"}``  ``{"task_name", "var_num", "task_description",
                                              "observation", "reward", "score", "deleted",
                                              "done"}``; the observation is the answer to
                                              ``look around``
``POST /step``        ``{"id", "action"}``    ``{"observation", "reward", "score", "done"}``;
                                              ``reward`` is the change of ``score`` (0-100)
``POST /step_visual`` ``{"id", "action"}``    the step, plus ``info``, ``object_tree``,
                                              ``inventory``, ``moves``; takes raw model text
                                              (``</s>`` dropped, the text after ``Action:``)
``POST /close``       ``{"id"}``              ``true``; an unknown or closed id is HTTP 500
                                              ``Internal Server Error``, as in the original
``GET /observation``  ``?id=``                the last observation (bare JSON string)
``GET /action_hint``  ``?id=``                ``{"possible_actions", "possible_objects"}``
``GET /goals``        ``?id=``                ``{"goals": <goal progress text>}``
``GET /detail``       ``?id=``                the env's info: ``deleted, done`` then the last
                                              reset's and step's fields
``GET /task_description``, ``/object_tree``, ``/state``: as the original's visualisation mode
====================  ======================  ===================================================

Failures are HTTP 200 ``{"error": "<message>"}``: ``The id N is not valid.``,
``The task with environment N has been deleted.``, ``The task with environment N
has finished.`` (step and the GETs after ``done``; ``/reset`` is allowed), and the
message of anything the simulator or the task list raises (``list index out of
range`` for a task index past the end). Missing body fields get FastAPI's 422.

Score and done come from the simulator: ``score`` is its 0-1 score times 100,
rounded; a negative score (the task failed) or more than 100 moves ends the
episode. Task mapping: :mod:`sciworld_tasks`; JVM reuse: :mod:`sciworld_jvms`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, AsyncIterator

from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.sciworld_jvms import SimulatorPool, spares_from_env
from pytest_agentgym.servers.embedded.sciworld_tasks import Game, list_games

GREETING = "This is environment ScienceWorld."


class StepRequestBody(BaseModel):
    id: int
    action: str


class ResetRequestBody(BaseModel):
    id: int
    data_idx: int


class CloseRequestBody(BaseModel):
    id: int


class Refused(ValueError):
    """A call the original refuses with ``{"error": <message>}``."""


def _error(exc: Exception) -> dict[str, str]:
    return {"error": str(exc)}


def _or_default(read: Any, default: Any) -> Any:
    """``read()``, or ``default`` when the simulator raises (the original's visual mode)."""
    try:
        return read()
    except Exception:  # noqa: BLE001
        return default


def visual_action(text: str) -> str:
    """The action ``/step_visual`` takes from raw model text (the original's rule)."""
    if text.endswith("</s>"):
        text = text[: -len("</s>")]
    if "Action:" in text:
        text = text.split("Action:")[1].strip()
    return text


class SciWorldEnvironments:
    """All environments of one server process; each method returns the endpoint's JSON."""

    def __init__(self, pool: SimulatorPool, games: list[Game]) -> None:
        self.pool = pool
        self.games = games
        self._sims: dict[int, Any] = {}
        self._info: dict[int, dict[str, Any]] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._next_id = 0
        self._lock = threading.Lock()

    # -- checks ---------------------------------------------------------------
    def _check(self, env_id: int, *, resetting: bool = False) -> Any:
        info = self._info.get(env_id)
        if info is None:
            raise Refused(f"The id {env_id} is not valid.")
        if info["deleted"]:
            raise Refused(f"The task with environment {env_id} has been deleted.")
        if not resetting and info["done"]:
            raise Refused(f"The task with environment {env_id} has finished.")
        return self._sims[env_id]

    # -- endpoints ------------------------------------------------------------
    def create(self) -> dict[str, Any]:
        try:
            with self._lock:
                env_id = self._next_id
                self._next_id += 1
            simulator = self.pool.take()
            with self._lock:
                self._sims[env_id] = simulator
                self._locks[env_id] = threading.Lock()
                self._info[env_id] = {"deleted": False, "done": False}
            return {"id": env_id}
        except Exception as exc:  # noqa: BLE001 - reported as data, like the original
            return _error(exc)

    def reset(self, env_id: int, data_idx: int) -> dict[str, Any]:
        try:
            simulator = self._check(env_id, resetting=True)
            game = self.games[data_idx]
            with self._locks[env_id]:
                simulator.load(game.task_name, game.variation)
                description = simulator.get_task_description()
                observation, reward, done, info = simulator.step("look around")
            answer = {
                "task_name": game.task_name, "var_num": game.variation,
                "task_description": description, "observation": observation,
                "reward": reward, "score": info["score"], "deleted": False, "done": done,
            }
            self._info[env_id].update(answer)
            return answer
        except Exception as exc:  # noqa: BLE001
            return _error(exc)

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        return self._step(env_id, action, visual=False)

    def step_visual(self, env_id: int, text: str) -> dict[str, Any]:
        return self._step(env_id, visual_action(text), visual=True)

    def _step(self, env_id: int, action: str, *, visual: bool) -> dict[str, Any]:
        try:
            simulator = self._check(env_id)
            with self._locks[env_id]:
                observation, reward, done, info = simulator.step(action)
                answer = {"observation": observation, "reward": reward, "score": info["score"], "done": done}
                if visual:
                    answer.update(info=info, object_tree=_or_default(simulator.getObjectTree, None),
                                  inventory=_or_default(simulator.inventory, ""),
                                  moves=info.get("moves", 0))
            self._info[env_id].update(answer)
            return answer
        except Exception as exc:  # noqa: BLE001
            return _error(exc)

    def close(self, env_id: int) -> bool:
        """Unknown or closed ids raise, so the client gets HTTP 500 as from the original."""
        info = self._info[env_id]  # KeyError for an unknown id
        if info["deleted"]:
            raise Refused(f"The task with environment {env_id} has been deleted.")
        with self._locks[env_id]:
            simulator = self._sims.pop(env_id)
            info["deleted"] = True
        self.pool.give_back(simulator)
        return True

    def ask(self, env_id: int, question: str) -> Any:
        """The read-only GETs: ``question`` names what to answer."""
        try:
            simulator = self._check(env_id)
            info = self._info[env_id]
            if question == "observation":
                return info["observation"]
            if question == "detail":
                return info
            with self._locks[env_id]:
                return self._read(simulator, question, info)
        except Exception as exc:  # noqa: BLE001
            return _error(exc)

    @staticmethod
    def _read(simulator: Any, question: str, info: dict[str, Any]) -> Any:
        if question == "action_hint":
            return {"possible_actions": simulator.get_possible_actions(),
                    "possible_objects": simulator.get_possible_objects()}
        if question == "goals":
            return {"goals": simulator.get_goal_progress()}
        if question == "task_description":
            return {"task_description": simulator.get_task_description()}
        if question == "object_tree":
            return {"object_tree": simulator.getObjectTree()}
        if question == "state":
            return {
                "observation": simulator.look(), "inventory": simulator.inventory(),
                "task_description": simulator.get_task_description(),
                "goal_progress": simulator.get_goal_progress(),
                "possible_actions": simulator.get_possible_actions()[:10],
                "possible_objects": simulator.get_possible_objects()[:10],
                "current_moves": simulator.get_num_moves(), "environment_info": info,
            }
        raise AssertionError(question)

    def shutdown(self) -> None:
        """Stop every JVM: those of open environments and the idle ones."""
        with self._lock:
            sims, self._sims = list(self._sims.values()), {}
        for simulator in sims:
            simulator.close()
        self.pool.close()


def start_environments(spares: int | None = None) -> SciWorldEnvironments:
    """Start the first JVM, read the task list from it, and keep it as a spare."""
    pool = SimulatorPool(spares_from_env() if spares is None else spares)
    first = pool.take()
    games = list_games(first)
    pool.give_back(first)
    return SciWorldEnvironments(pool, games)


_QUESTIONS = ("observation", "action_hint", "goals", "detail", "task_description", "object_tree", "state")


def create_app(environments: SciWorldEnvironments | None = None) -> FastAPI:
    """The FastAPI app; starts the simulator unless ``environments`` is given."""
    envs = environments or start_environments()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        envs.shutdown()  # the JVMs die with this process anyway (py4j's die_on_exit)

    app = FastAPI(title="SciWorld (pytest-agentgym embedded)", lifespan=lifespan)
    app.state.sciworld = envs

    @app.get("/")
    def hello() -> str:
        return GREETING

    @app.post("/create")
    def create() -> Any:
        return envs.create()

    @app.post("/step")
    def step(body: StepRequestBody) -> Any:
        return envs.step(body.id, body.action)

    @app.post("/step_visual")
    def step_visual(body: StepRequestBody) -> Any:
        return envs.step_visual(body.id, body.action)

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> Any:
        return envs.reset(body.id, body.data_idx)

    @app.post("/close")
    def close(body: CloseRequestBody) -> Any:
        return envs.close(body.id)

    for question in _QUESTIONS:
        app.add_api_route(f"/{question}", _getter(envs, question), methods=["GET"],
                          name=f"get_{question}")
    return app


def _getter(envs: SciWorldEnvironments, question: str) -> Any:
    def answer(id: int) -> Any:  # noqa: A002 - the wire name
        return envs.ask(id, question)

    return answer
