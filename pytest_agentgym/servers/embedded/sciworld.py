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
``POST /close``       ``{"id"}``              ``true``; an unknown or closed id is HTTP 500, as
                                              in the original, whose body says which id and why
                                              (the original's: ``Internal Server Error``)
``GET /observation``  ``?id=``                the last observation (bare JSON string)
``GET /action_hint``  ``?id=``                ``{"possible_actions", "possible_objects"}``
``GET /goals``        ``?id=``                ``{"goals": <goal progress text>}``
``GET /detail``       ``?id=``                the env's info: ``deleted, done`` then the last
                                              reset's and step's fields
``GET /task_description``, ``/object_tree``, ``/state``: as the original's visualisation mode
====================  ======================  ===================================================

Failures are HTTP 200 ``{"error": "<message>"}``: ``The id N is not valid.``,
``The task with environment N has been deleted.``, ``The task with environment N
has finished.`` (step and the GETs after ``done``; ``/reset`` is allowed), and
anything the simulator raises, with its type and the call. Deliberate
differences (docs/envs/sciworld.md): a ``data_idx`` outside the task list is
refused naming the valid range (the original says ``list index out of range``
past the end and counts a negative index from the end), and ``/observation``
before any reset asks for a reset (the original: ``'observation'``). Missing body
fields get FastAPI's 422.

**The cap.** Each open environment holds a JVM (a few hundred MB), so at most
:data:`MAX_ENVS` are open at once (``AGENTGYM_SCIWORLD_MAX_ENVS``); past that,
``/create`` is refused with ``{"error": ...}`` (the original's answer to a create
that fails) until one is closed: closing another client's environment behind its
back would cost it its episode. ``GET /embedded/envs`` (not in the original)
counts the open environments and the JVMs. A closed id is remembered (the last
few thousand) to answer "has been deleted", as the original does forever.

Score and done come from the simulator: ``score`` is its 0-1 score times 100,
rounded; a negative score (the task failed) or more than 100 moves ends the
episode. Task mapping: :mod:`sciworld_tasks`; JVM reuse: :mod:`sciworld_jvms`.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Any, AsyncIterator

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.limits import (
    Action,
    REMEMBERED_CLOSURES,
    CapReached,
    CappedEnvs,
    cap_from_env,
    explain,
)
from pytest_agentgym.servers.embedded.sciworld_jvms import SimulatorPool, spares_from_env
from pytest_agentgym.servers.embedded.sciworld_tasks import Game, list_games

GREETING = "This is environment ScienceWorld."
#: Environments open at once (one JVM each); past it, /create is refused until one is
#: closed. ``AGENTGYM_SCIWORLD_MAX_ENVS`` overrides it.
MAX_ENVS = 64
MAX_ENVS_ENV = "AGENTGYM_SCIWORLD_MAX_ENVS"


class StepRequestBody(BaseModel):
    id: int
    action: Action


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


class _Env:
    """One open environment: its simulator (a JVM), the info dict ``/detail`` shows, and
    the lock that serialises the calls on it."""

    __slots__ = ("simulator", "info", "lock")

    def __init__(self) -> None:
        self.simulator: Any = None
        self.info: dict[str, Any] = {"deleted": False, "done": False}
        self.lock = threading.Lock()


class SciWorldEnvironments:
    """All environments of one server process; each method returns the endpoint's JSON."""

    def __init__(self, pool: SimulatorPool, games: list[Game], max_envs: int | None = None) -> None:
        self.pool = pool
        self.games = games
        cap = max_envs or cap_from_env(MAX_ENVS_ENV, MAX_ENVS)
        self._envs: CappedEnvs[_Env] = CappedEnvs("the SciWorld server", cap, MAX_ENVS_ENV, refuse=True)
        #: ids closed by the client, newest last (the original answers "has been deleted")
        self._deleted: OrderedDict[int, None] = OrderedDict()
        self._next_id = 0
        self._lock = threading.Lock()

    # -- checks ---------------------------------------------------------------
    def _env(self, env_id: int) -> _Env:
        with self._lock:
            env = self._envs.get(env_id)
            if env is None:
                if env_id in self._deleted:
                    raise Refused(f"The task with environment {env_id} has been deleted.")
                raise Refused(f"The id {env_id} is not valid.")
            return env

    @staticmethod
    def _check(env: _Env, env_id: int, *, resetting: bool = False) -> Any:
        """Call with ``env.lock`` held: the simulator, after the original's checks."""
        if env.info["deleted"]:  # closed while this call waited for the lock
            raise Refused(f"The task with environment {env_id} has been deleted.")
        if not resetting and env.info["done"]:
            raise Refused(f"The task with environment {env_id} has finished.")
        return env.simulator

    def game(self, data_idx: int) -> Game:
        """The task of ``data_idx``; the original indexes a Python list (negative from the end)."""
        if not 0 <= data_idx < len(self.games):
            raise Refused(f"data_idx {data_idx} is out of range: SciWorld task indices are "
                          f"0-{len(self.games) - 1} (the simulator's (task, variation) pairs)")
        return self.games[data_idx]

    # -- endpoints ------------------------------------------------------------
    def create(self) -> dict[str, Any]:
        env = _Env()
        try:
            with self._lock:
                self._envs.make_room()  # refuses past the cap
                env_id = self._next_id
                self._next_id += 1
                self._envs.add(env_id, env)
                env.lock.acquire()  # calls on this id wait for its JVM
        except CapReached as exc:
            return _error(exc)
        try:
            env.simulator = self.pool.take()
            return {"id": env_id}
        except Exception as exc:  # noqa: BLE001 - reported as data, like the original
            with self._lock:
                self._envs.pop(env_id)
            env.info["deleted"] = True
            return {"error": explain(exc, f"starting the simulator of environment {env_id}")}
        finally:
            env.lock.release()

    def reset(self, env_id: int, data_idx: int) -> dict[str, Any]:
        try:
            env = self._env(env_id)
            with env.lock:
                simulator = self._check(env, env_id, resetting=True)
                game = self.game(data_idx)
                simulator.load(game.task_name, game.variation)
                description = simulator.get_task_description()
                observation, reward, done, info = simulator.step("look around")
                answer = {
                    "task_name": game.task_name, "var_num": game.variation,
                    "task_description": description, "observation": observation,
                    "reward": reward, "score": info["score"], "deleted": False, "done": done,
                }
                env.info.update(answer)
            return answer
        except Refused as exc:
            return _error(exc)
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"resetting environment {env_id} to data_idx {data_idx}")}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        return self._step(env_id, action, visual=False)

    def step_visual(self, env_id: int, text: str) -> dict[str, Any]:
        return self._step(env_id, visual_action(text), visual=True)

    def _step(self, env_id: int, action: str, *, visual: bool) -> dict[str, Any]:
        try:
            env = self._env(env_id)
            with env.lock:
                simulator = self._check(env, env_id)
                observation, reward, done, info = simulator.step(action)
                answer = {"observation": observation, "reward": reward, "score": info["score"], "done": done}
                if visual:
                    answer.update(info=info, object_tree=_or_default(simulator.getObjectTree, None),
                                  inventory=_or_default(simulator.inventory, ""),
                                  moves=info.get("moves", 0))
                env.info.update(answer)
            return answer
        except Refused as exc:
            return _error(exc)
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"step {action!r} in environment {env_id}")}

    def close(self, env_id: int) -> bool:
        """Free the environment and give its JVM back. An unknown or closed id raises
        :class:`Refused`, which the route answers with HTTP 500 as the original does."""
        with self._lock:
            env = self._envs.peek(env_id)
            if env is None:
                if env_id in self._deleted:
                    raise Refused(f"The task with environment {env_id} has been deleted.")
                raise Refused(f"The id {env_id} is not valid.")
        with env.lock:
            if env.info["deleted"]:
                raise Refused(f"The task with environment {env_id} has been deleted.")
            env.info["deleted"] = True
            simulator, env.simulator = env.simulator, None
        with self._lock:
            self._envs.pop(env_id)
            self._deleted[env_id] = None
            while len(self._deleted) > REMEMBERED_CLOSURES:
                self._deleted.popitem(last=False)
        self.pool.give_back(simulator)
        return True

    def ask(self, env_id: int, question: str) -> Any:
        """The read-only GETs: ``question`` names what to answer."""
        try:
            env = self._env(env_id)
            with env.lock:
                simulator = self._check(env, env_id)
                info = env.info
                if question == "observation":
                    if "observation" not in info:  # the original answers its KeyError
                        raise Refused(f"environment {env_id} has no observation yet: POST /reset "
                                      f'{{"id": {env_id}, "data_idx": <0-{len(self.games) - 1}>}} '
                                      f"before /observation")
                    return info["observation"]
                if question == "detail":
                    return dict(info)
                return self._read(simulator, question, info)
        except Refused as exc:
            return _error(exc)
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"reading /{question} of environment {env_id}")}

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

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the open environments, the cap and the JVMs."""
        with self._lock:
            return self._envs.status(idle_jvms=self.pool.idle, jvms_started=self.pool.started)

    def shutdown(self) -> None:
        """Stop every JVM: those of open environments and the idle ones."""
        with self._lock:
            envs = self._envs.values()
            for env_id in list(self._envs):
                self._envs.pop(env_id)
        for env in envs:
            if env.simulator is not None:
                env.simulator.close()
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
        try:
            return envs.close(body.id)
        except Refused as exc:  # the original's unhandled exception: HTTP 500
            return PlainTextResponse(f"POST /close: {exc}", status_code=500)

    @app.get("/embedded/envs")
    def embedded_envs() -> Any:  # not in the original: see limits.py
        return envs.status()

    for question in _QUESTIONS:
        app.add_api_route(f"/{question}", _getter(envs, question), methods=["GET"],
                          name=f"get_{question}")
    return app


def _getter(envs: SciWorldEnvironments, question: str) -> Any:
    def answer(id: int) -> Any:  # noqa: A002 - the wire name
        return envs.ask(id, question)

    return answer
