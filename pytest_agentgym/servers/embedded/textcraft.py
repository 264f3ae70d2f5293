"""Embedded TextCraft server, wire-compatible with AgentGym's ``agentenv-textcraft``.

Run it with ``pytest-agentgym serve textcraft --port 36002``. Endpoints, JSON
shapes (and key order), status codes and error bodies follow the original
(protocol sheet section 2):

====================  ===============================  ==========================================
``GET /``             --                                ``"This is environment TextCraft."``
``POST /create``      ``{"commands"?, "goal"?}``        ``{"id", "observation", "done": false, "reward": 0}``
                                                        (a JSON object body is required, even ``{}``;
                                                        it pre-resets with ``data_idx = id``;
                                                        ``commands``/``goal`` are accepted and, as in
                                                        the original, have no effect)
``POST /reset``       ``{"id", "data_idx"=0}``          ``{"id", "observation", "done": false, "reward": 0}``
``POST /step``        ``{"id", "action"}``              ``{"observation", "reward": 0|1, "done"}``; no
                                                        guard after done
``GET /observation``  ``?id=``                          the last observation, a bare JSON string
``GET /detail``       ``?id=``                          ``{"observation", "done", "reward", "deleted"}``
``GET /commands``,    ``?id=``                          HTTP 500 ``Internal Server Error`` (text/plain),
``GET /goal``                                           reproduced on purpose: the original routes these
                                                        to methods its wrapper does not have
``POST /close``       ``{"id"}``                        ``true``; ``false`` for an unknown or closed id
====================  ===============================  ==========================================

Failures are HTTP 200 ``{"error": "..."}``: ``The id N is not valid.`` for an
unknown or closed id (with the reason when it was closed for the cap); a
``data_idx`` outside 0-543, or null, is refused naming the field and the range
(the original wraps it mod 544 and plays another task, or reports Python's
``%`` error for null); any other exception raised while handling a call is
reported the same way, with its type and what was being done. Missing or
mistyped body fields get FastAPI's 422 answer, as in the original (same pydantic
models).

At most :data:`MAX_ENVS` envs are open (``AGENTGYM_TEXTCRAFT_MAX_ENVS``): a create
past that closes the least recently used env (:mod:`.limits`). ``GET
/embedded/envs`` (not in the original) says how many are open.

Task mapping and the crafting-command list: see ``textcraft_tasks``; the rules
of the game: ``textcraft_world``.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.limits import Action, CappedEnvs, cap_from_env, explain
from pytest_agentgym.servers.embedded.textcraft_tasks import TaskOutOfRange, TaskSet, shipped_tasks
from pytest_agentgym.servers.embedded.textcraft_world import CraftingSession

GREETING = "This is environment TextCraft."
#: Envs kept open at once; past it, a create closes the least recently used one.
#: ``AGENTGYM_TEXTCRAFT_MAX_ENVS`` overrides it.
MAX_ENVS = 1024
MAX_ENVS_ENV = "AGENTGYM_TEXTCRAFT_MAX_ENVS"


class CreateRequestBody(BaseModel):
    commands: Optional[str] = None
    goal: Optional[str] = None


class StepRequestBody(BaseModel):
    id: int
    action: Action


class ResetRequestBody(BaseModel):
    id: int
    data_idx: Optional[int] = 0


class CloseRequestBody(BaseModel):
    id: int


class UnknownEnv(Exception):
    """An id that is not open; the message is the original's, with the reason when
    the id was closed for the cap."""


class _Env:
    """One open env: its crafting session and the info dict ``/detail`` shows."""

    __slots__ = ("session", "info")

    def __init__(self, session: CraftingSession, info: dict[str, Any]) -> None:
        self.session = session
        self.info = info


class TextCraftEnvironments:
    """All environment instances of one server process, keyed by id (0, 1, 2, ...),
    at most ``max_envs`` of them (see :mod:`.limits`).

    Every public method returns the JSON value the endpoint answers with. One
    lock serialises the calls; each is a few microseconds of dictionary work.
    """

    def __init__(self, tasks: TaskSet | None = None, max_envs: int | None = None) -> None:
        self.tasks = tasks or shipped_tasks()
        cap = max_envs or cap_from_env(MAX_ENVS_ENV, MAX_ENVS)
        self._envs: CappedEnvs[_Env] = CappedEnvs("the TextCraft server", cap, MAX_ENVS_ENV)
        self._next_id = 0
        self._lock = threading.Lock()

    def create(self) -> dict[str, Any]:
        with self._lock:
            self._envs.make_room()  # every call holds the lock, so none is busy now
            env_id = self._next_id
            self._next_id += 1
            # The original pre-resets with data_idx = id, wrapped mod 544: not a task the
            # client asked for (it resets to its own), so the wrap stays.
            task = self.tasks.task(env_id % len(self.tasks))
            self._envs.add(env_id, _Env(CraftingSession(self.tasks.book, task.goal), {
                "observation": task.observation, "done": False, "reward": 0, "deleted": False,
            }))
            return {"id": env_id, "observation": task.observation, "done": False, "reward": 0}

    def reset(self, env_id: int, data_idx: int | None) -> dict[str, Any]:
        with self._lock:
            try:
                env = self._env(env_id)
                if data_idx is None:
                    # the original computes None % 544 and fails after emptying the inventory
                    env.session.inventory = {}
                    raise TaskOutOfRange(
                        f"data_idx is null: POST /reset takes a whole number data_idx 0-"
                        f"{len(self.tasks) - 1}, or no data_idx at all for task 0")
                task = self.tasks.task(data_idx)
                env.session.inventory = {}
                env.session.restart(task.goal)
                env.info.update(
                    {"observation": task.observation, "done": False, "reward": 0, "deleted": False}
                )
                return {"id": env_id, "observation": task.observation, "done": False, "reward": 0}
            except (UnknownEnv, TaskOutOfRange) as exc:
                return {"error": str(exc)}
            except Exception as exc:  # noqa: BLE001 - reported as data, like the original
                return {"error": explain(exc, f"resetting environment {env_id} to data_idx {data_idx}")}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        with self._lock:
            try:
                env = self._env(env_id)
                observation, reward, done = env.session.step(action)
            except UnknownEnv as exc:
                return {"error": str(exc)}
            except Exception as exc:  # noqa: BLE001
                return {"error": explain(exc, f"step {action!r} in environment {env_id}")}
            answer = {"observation": observation, "reward": reward, "done": done}
            env.info.update(answer)
            return answer

    def observation(self, env_id: int) -> Any:
        with self._lock:
            try:
                return self._env(env_id).info["observation"]
            except UnknownEnv as exc:
                return {"error": str(exc)}

    def detail(self, env_id: int) -> dict[str, Any]:
        with self._lock:
            try:
                return dict(self._env(env_id).info)
            except UnknownEnv as exc:
                return {"error": str(exc)}

    def close(self, env_id: int) -> bool:
        with self._lock:
            return self._envs.pop(env_id) is not None

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the open envs and the cap."""
        with self._lock:
            return self._envs.status()

    def _env(self, env_id: int) -> _Env:
        env = self._envs.get(env_id)
        if env is None:
            raise UnknownEnv(self._envs.unknown(env_id))
        return env


def _missing_method() -> PlainTextResponse:
    """What the original answers on /commands and /goal (an unhandled AttributeError)."""
    return PlainTextResponse("Internal Server Error", status_code=500)


def create_app(environments: TextCraftEnvironments | None = None) -> FastAPI:
    """The FastAPI app; ``environments`` may be given to share or inspect state in tests."""
    envs = environments or TextCraftEnvironments()
    app = FastAPI(title="TextCraft (pytest-agentgym embedded)")
    # Every handler is a few microseconds of dictionary work under the lock: ``async def``
    # runs it on the event loop, where a ``def`` handler costs a hop to a worker thread
    # and back, more than the work (benchmarks/servers/server_cost.py).

    @app.get("/")
    async def hello() -> str:
        return GREETING

    @app.post("/create")
    async def create(body: CreateRequestBody) -> Any:
        return envs.create()

    @app.post("/step")
    async def step(body: StepRequestBody) -> Any:
        return envs.step(body.id, body.action)

    @app.post("/reset")
    async def reset(body: ResetRequestBody) -> Any:
        return envs.reset(body.id, body.data_idx)

    @app.get("/observation")
    async def get_observation(id: int) -> Any:  # noqa: A002 - the wire name
        return envs.observation(id)

    @app.get("/commands")
    async def get_commands(id: int) -> Any:  # noqa: A002
        return _missing_method()

    @app.get("/goal")
    async def get_goal(id: int) -> Any:  # noqa: A002
        return _missing_method()

    @app.get("/detail")
    async def get_detailed_info(id: int) -> Any:  # noqa: A002
        return envs.detail(id)

    @app.post("/close")
    async def close(body: CloseRequestBody) -> Any:
        return envs.close(body.id)

    @app.get("/embedded/envs")
    async def embedded_envs() -> Any:  # not in the original: see limits.py
        return envs.status()

    return app
