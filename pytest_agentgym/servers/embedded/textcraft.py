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
unknown or closed id; any other exception raised while handling a call is
reported the same way with its message. Missing or mistyped body fields get
FastAPI's 422 answer, as in the original (same pydantic models).

Task mapping and the crafting-command list: see ``textcraft_tasks``; the rules
of the game: ``textcraft_world``.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.textcraft_tasks import TaskSet, shipped_tasks
from pytest_agentgym.servers.embedded.textcraft_world import CraftingSession

GREETING = "This is environment TextCraft."


class CreateRequestBody(BaseModel):
    commands: Optional[str] = None
    goal: Optional[str] = None


class StepRequestBody(BaseModel):
    id: int
    action: str


class ResetRequestBody(BaseModel):
    id: int
    data_idx: Optional[int] = 0


class CloseRequestBody(BaseModel):
    id: int


class UnknownEnv(Exception):
    def __init__(self, env_id: int) -> None:
        super().__init__(f"The id {env_id} is not valid.")


class TextCraftEnvironments:
    """All environment instances of one server process, keyed by id (0, 1, 2, ...).

    Every public method returns the JSON value the endpoint answers with. One
    lock serialises the calls; each is a few microseconds of dictionary work.
    """

    def __init__(self, tasks: TaskSet | None = None) -> None:
        self.tasks = tasks or shipped_tasks()
        self._sessions: dict[int, CraftingSession] = {}
        self._info: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._lock = threading.Lock()

    def create(self) -> dict[str, Any]:
        with self._lock:
            env_id = self._next_id
            self._next_id += 1
            task = self.tasks.task(env_id)
            self._sessions[env_id] = CraftingSession(self.tasks.book, task.goal)
            self._info[env_id] = {
                "observation": task.observation, "done": False, "reward": 0, "deleted": False,
            }
            return {"id": env_id, "observation": task.observation, "done": False, "reward": 0}

    def reset(self, env_id: int, data_idx: int | None) -> dict[str, Any]:
        with self._lock:
            try:
                session = self._session(env_id)
                session.inventory = {}
                if data_idx is None:
                    # the original computes None % 544 and reports Python's message
                    raise TypeError("unsupported operand type(s) for %: 'NoneType' and 'int'")
                task = self.tasks.task(data_idx)
                session.restart(task.goal)
                self._info[env_id].update(
                    {"observation": task.observation, "done": False, "reward": 0, "deleted": False}
                )
                return {"id": env_id, "observation": task.observation, "done": False, "reward": 0}
            except Exception as exc:  # noqa: BLE001 - reported as data, like the original
                return {"error": str(exc)}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        with self._lock:
            try:
                observation, reward, done = self._session(env_id).step(action)
            except Exception as exc:  # noqa: BLE001
                return {"error": str(exc)}
            answer = {"observation": observation, "reward": reward, "done": done}
            self._info[env_id].update(answer)
            return answer

    def observation(self, env_id: int) -> Any:
        with self._lock:
            try:
                self._session(env_id)
            except UnknownEnv as exc:
                return {"error": str(exc)}
            return self._info[env_id]["observation"]

    def detail(self, env_id: int) -> dict[str, Any]:
        with self._lock:
            try:
                self._session(env_id)
            except UnknownEnv as exc:
                return {"error": str(exc)}
            return dict(self._info[env_id])

    def close(self, env_id: int) -> bool:
        with self._lock:
            if env_id not in self._sessions:
                return False
            del self._sessions[env_id]
            del self._info[env_id]
            return True

    def _session(self, env_id: int) -> CraftingSession:
        try:
            return self._sessions[env_id]
        except KeyError:
            raise UnknownEnv(env_id) from None


def _missing_method() -> PlainTextResponse:
    """What the original answers on /commands and /goal (an unhandled AttributeError)."""
    return PlainTextResponse("Internal Server Error", status_code=500)


def create_app(environments: TextCraftEnvironments | None = None) -> FastAPI:
    """The FastAPI app; ``environments`` may be given to share or inspect state in tests."""
    envs = environments or TextCraftEnvironments()
    app = FastAPI(title="TextCraft (pytest-agentgym embedded)")

    @app.get("/")
    def hello() -> str:
        return GREETING

    @app.post("/create")
    def create(body: CreateRequestBody) -> Any:
        return envs.create()

    @app.post("/step")
    def step(body: StepRequestBody) -> Any:
        return envs.step(body.id, body.action)

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> Any:
        return envs.reset(body.id, body.data_idx)

    @app.get("/observation")
    def get_observation(id: int) -> Any:  # noqa: A002 - the wire name
        return envs.observation(id)

    @app.get("/commands")
    def get_commands(id: int) -> Any:  # noqa: A002
        return _missing_method()

    @app.get("/goal")
    def get_goal(id: int) -> Any:  # noqa: A002
        return _missing_method()

    @app.get("/detail")
    def get_detailed_info(id: int) -> Any:  # noqa: A002
        return envs.detail(id)

    @app.post("/close")
    def close(body: CloseRequestBody) -> Any:
        return envs.close(body.id)

    return app
