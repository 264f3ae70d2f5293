"""Embedded stand-in for AgentGym's ``lmrlgym`` server: Maze under ``/maze``, Wordle
under ``/wordle``, one process, separate id counters (protocol sheet, section 14).

What a client sees is the original's: the same endpoints, JSON shapes and key
order, reward JSON types (``0`` vs ``1.0``), and the same HTTP-200
``{"error": ...}`` messages, including the odd ones that leak from Python
exceptions in the original (``"'observation'"``, ``"0"``, ``""`` for game 25).
The game rules live in :mod:`maze_game` and :mod:`wordle_game`.

Every handler is ``async`` and does microseconds of work, so the event loop
serialises them and no lock is needed.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded import maze_game, wordle_game
from pytest_agentgym.servers.embedded.maze_game import MazeGame, StartRejected
from pytest_agentgym.servers.embedded.wordle_game import WordleGame

ROOT_TEXT = "This is environment LMRL-Gym."


class MazeStepBody(BaseModel):
    id: int
    action: str


class MazeResetBody(BaseModel):
    id: int
    game: int


class WordleStepBody(BaseModel):
    id: int
    action: str


class WordleResetBody(BaseModel):
    id: int
    seed: int


class Refused(Exception):
    """A request the original answers with ``{"error": <message>}`` (HTTP 200)."""


def _error(exc: Exception) -> dict[str, str]:
    return {"error": str(exc)}


class _Registry:
    """Per-id bookkeeping shared by both games: the ``info`` dicts and the id checks."""

    def __init__(self) -> None:
        self.next_id = 0
        self.info: dict[int, dict[str, Any]] = {}

    def new_id(self) -> int:
        env_id = self.next_id
        self.next_id += 1
        return env_id

    def check(self, env_id: int, *, resetting: bool = False) -> None:
        info = self.info.get(env_id)
        if info is None:
            raise Refused(f"The id {env_id} is not valid.")
        if info["deleted"]:  # never true: there is no /close
            raise Refused(f"The task with environment {env_id} has been deleted.")
        if not resetting and info["done"]:
            raise Refused(f"The task with environment {env_id} has finished.")

    def record_step(self, env_id: int, observation: str, reward: Any, done: bool) -> None:
        info = self.info[env_id]
        info.update(observation=observation, reward=info["reward"] + reward, done=done)


class MazeService(_Registry):
    """State of all Maze envs. An env's game is built at reset, not at create."""

    def __init__(self) -> None:
        super().__init__()
        self.games: dict[int, MazeGame] = {}

    def create(self) -> dict[str, Any]:
        env_id = self.new_id()
        self.info[env_id] = {"done": False, "reward": 0, "deleted": False}
        return {"id": env_id}

    def reset(self, env_id: int, game: int) -> dict[str, Any]:
        try:
            self.check(env_id, resetting=True)
            new_game = MazeGame.for_game(game)
        except (Refused, StartRejected) as exc:
            return _error(exc)  # a failed reset leaves the previous state untouched
        self.games[env_id] = new_game
        observation = new_game.observation()
        self.info[env_id] = {
            "maze_name": maze_game.MAZE_NAME,
            "observation": observation,
            "done": False,
            "reward": 0,
            "deleted": False,
        }
        return {"observation": observation}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            self.check(env_id)
            if env_id not in self.games:
                raise Refused(str(env_id))  # the original's KeyError text
        except Refused as exc:
            return _error(exc)
        result = self.games[env_id].step(action)
        self.record_step(env_id, result.observation, result.reward, result.done)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def observation(self, env_id: int) -> Any:
        try:
            self.check(env_id)
            if "observation" not in self.info[env_id]:
                raise Refused("'observation'")
        except Refused as exc:
            return _error(exc)
        return self.info[env_id]["observation"]

    def detail(self, env_id: int) -> Any:
        try:
            self.check(env_id)
            if env_id not in self.games:
                raise Refused("'goal_position'")
        except Refused as exc:
            return _error(exc)
        return dict(self.info[env_id])


class WordleService(_Registry):
    """State of all Wordle envs. A game exists from create on (unseeded until reset)."""

    def __init__(self) -> None:
        super().__init__()
        self.games: dict[int, WordleGame] = {}

    def create(self) -> dict[str, Any]:
        env_id = self.new_id()
        self.games[env_id] = WordleGame()  # seeded from OS entropy, like the original
        self.info[env_id] = {"done": False, "reward": 0, "deleted": False}
        return {"id": env_id}

    def reset(self, env_id: int, seed: int) -> dict[str, Any]:
        try:
            self.check(env_id, resetting=True)
        except Refused as exc:
            return _error(exc)
        self.games[env_id] = WordleGame.seeded(seed)
        observation = wordle_game.RESET_OBSERVATION
        self.info[env_id].update(
            seed=seed, observation=observation, done=False, reward=0, deleted=False
        )
        return {"id": env_id, "observation": observation}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            self.check(env_id)
        except Refused as exc:
            return _error(exc)
        result = self.games[env_id].step(action)
        self.record_step(env_id, result.observation, result.reward, result.done)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def filtered_vocab(self, env_id: int) -> Any:
        try:
            self.check(env_id)
        except Refused as exc:
            return _error(exc)
        return list(self.games[env_id].candidates)

    def observation(self, env_id: int) -> Any:
        try:
            self.check(env_id)
            if "observation" not in self.info[env_id]:
                raise Refused("'observation'")
        except Refused as exc:
            return _error(exc)
        return self.info[env_id]["observation"]

    def detail(self, env_id: int) -> Any:
        try:
            self.check(env_id)
        except Refused as exc:
            return _error(exc)
        return dict(self.info[env_id])


def create_app() -> FastAPI:
    """A fresh app with its own Maze and Wordle state (ids start at 0 for each)."""
    app = FastAPI(title="pytest-agentgym embedded LMRL-Gym (Maze, Wordle)")
    maze = MazeService()
    wordle = WordleService()
    app.state.maze = maze
    app.state.wordle = wordle

    @app.get("/")
    async def hello() -> str:
        return ROOT_TEXT

    @app.post("/maze/create")
    async def maze_create() -> Any:
        return maze.create()

    @app.post("/maze/step")
    async def maze_step(body: MazeStepBody) -> Any:
        return maze.step(body.id, body.action)

    @app.post("/maze/reset")
    async def maze_reset(body: MazeResetBody) -> Any:
        return maze.reset(body.id, body.game)

    @app.get("/maze/available_actions")
    async def maze_available_actions() -> Any:
        return list(maze_game.AVAILABLE_ACTIONS)

    @app.get("/maze/observation")
    async def maze_observation(id: int) -> Any:  # noqa: A002 - the wire name
        return maze.observation(id)

    @app.get("/maze/detail")
    async def maze_detail(id: int) -> Any:  # noqa: A002
        return maze.detail(id)

    @app.post("/wordle/create")
    async def wordle_create() -> Any:
        return wordle.create()

    @app.post("/wordle/step")
    async def wordle_step(body: WordleStepBody) -> Any:
        return wordle.step(body.id, body.action)

    @app.post("/wordle/reset")
    async def wordle_reset(body: WordleResetBody) -> Any:
        return wordle.reset(body.id, body.seed)

    @app.get("/wordle/filtered_vocab")
    async def wordle_filtered_vocab(id: int) -> Any:  # noqa: A002
        return wordle.filtered_vocab(id)

    @app.get("/wordle/observation")
    async def wordle_observation(id: int) -> Any:  # noqa: A002
        return wordle.observation(id)

    @app.get("/wordle/detail")
    async def wordle_detail(id: int) -> Any:  # noqa: A002
        return wordle.detail(id)

    return app
