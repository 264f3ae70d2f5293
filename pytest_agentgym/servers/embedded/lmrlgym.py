"""Embedded stand-in for AgentGym's ``lmrlgym`` server: Maze under ``/maze``, Wordle
under ``/wordle``, one process, separate id counters (protocol sheet, section 14).

What a client sees is the original's: the same endpoints, JSON shapes and key
order, reward JSON types (``0`` vs ``1.0``), and HTTP-200 ``{"error": ...}``
answers where the original gives them. Three deliberate differences
(docs/envs/maze-wordle.md):

* Error texts say what was wrong where the original's leak a Python exception
  (``"0"`` for a step before any reset, ``"'observation'"``, ``"'goal_position'"``,
  ``""`` for game 25, ``"list index out of range"``).
* A Maze game outside 0-24 and a negative Wordle seed are refused; the original
  counts a negative game from the end of its list and plays seed -s as seed s.
* Each game keeps at most :data:`MAX_ENVS` envs (``AGENTGYM_MAZE_MAX_ENVS``,
  ``AGENTGYM_WORDLE_MAX_ENVS``): there is no ``/close``, so past that a create
  closes the least recently used env, whose id then says so (:mod:`.limits`).
  ``GET /maze/embedded/envs`` and ``/wordle/embedded/envs`` count them.

The game rules live in :mod:`maze_game` and :mod:`wordle_game`.

Every handler is ``async`` and does microseconds of work, so the event loop
serialises them and no lock is needed.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded import maze_game, wordle_game
from pytest_agentgym.servers.embedded.limits import Action, CappedEnvs, cap_from_env
from pytest_agentgym.servers.embedded.maze_game import MazeGame, StartRejected
from pytest_agentgym.servers.embedded.wordle_game import WordleGame

ROOT_TEXT = "This is environment LMRL-Gym."
#: Envs of each game kept at once (there is no /close); past it, a create closes the
#: least recently used one. The variables override it per game.
MAX_ENVS = 1024
MAZE_MAX_ENVS_ENV = "AGENTGYM_MAZE_MAX_ENVS"
WORDLE_MAX_ENVS_ENV = "AGENTGYM_WORDLE_MAX_ENVS"


class MazeStepBody(BaseModel):
    id: int
    action: Action


class MazeResetBody(BaseModel):
    id: int
    game: int


class WordleStepBody(BaseModel):
    id: int
    action: Action


class WordleResetBody(BaseModel):
    id: int
    seed: int


class Refused(Exception):
    """A request the original answers with ``{"error": <message>}`` (HTTP 200)."""


def _error(exc: Exception) -> dict[str, str]:
    return {"error": str(exc)}


class _Env:
    """One env: the original's ``info`` dict and its game (None until a Maze reset)."""

    __slots__ = ("info", "game")

    def __init__(self, info: dict[str, Any], game: Any = None) -> None:
        self.info = info
        self.game = game


class _Registry:
    """Per-id bookkeeping shared by both games: the envs, the cap and the id checks."""

    #: the URL prefix of the game, for messages ("/maze")
    prefix = ""

    def __init__(self, game: str, variable: str, max_envs: int | None = None) -> None:
        self.next_id = 0
        cap = max_envs or cap_from_env(variable, MAX_ENVS)
        self.envs: CappedEnvs[_Env] = CappedEnvs(f"the {game} server", cap, variable)

    def new(self, env: _Env) -> int:
        self.envs.make_room()  # handlers run one at a time on the event loop: none is busy
        env_id = self.next_id
        self.next_id += 1
        self.envs.add(env_id, env)
        return env_id

    def check(self, env_id: int, *, resetting: bool = False) -> _Env:
        env = self.envs.get(env_id)
        if env is None:
            raise Refused(self.envs.unknown(env_id))
        if env.info["deleted"]:  # never true: there is no /close
            raise Refused(f"The task with environment {env_id} has been deleted.")
        if not resetting and env.info["done"]:
            raise Refused(f"The task with environment {env_id} has finished.")
        return env

    def not_reset(self, env_id: int, what: str, call: str, reset_body: str) -> Refused:
        """The refusal of a call that needs a reset first (the original leaks a KeyError)."""
        return Refused(f"environment {env_id} has no {what} yet: POST {self.prefix}/reset "
                       f"{{\"id\": {env_id}, {reset_body}}} before {self.prefix}/{call}")

    @staticmethod
    def record_step(env: _Env, observation: str, reward: Any, done: bool) -> None:
        env.info.update(observation=observation, reward=env.info["reward"] + reward, done=done)

    def status(self) -> dict[str, Any]:
        return self.envs.status()


class MazeService(_Registry):
    """State of all Maze envs. An env's game is built at reset, not at create."""

    prefix = "/maze"
    GAME_FIELD = '"game": <0-24>'

    def __init__(self, max_envs: int | None = None) -> None:
        super().__init__("Maze", MAZE_MAX_ENVS_ENV, max_envs)

    def create(self) -> dict[str, Any]:
        return {"id": self.new(_Env({"done": False, "reward": 0, "deleted": False}))}

    def reset(self, env_id: int, game: int) -> dict[str, Any]:
        try:
            env = self.check(env_id, resetting=True)
            new_game = MazeGame.for_game(game)
        except (Refused, StartRejected) as exc:
            return _error(exc)  # a failed reset leaves the previous state untouched
        env.game = new_game
        observation = new_game.observation()
        env.info = {
            "maze_name": maze_game.MAZE_NAME,
            "observation": observation,
            "done": False,
            "reward": 0,
            "deleted": False,
        }
        return {"observation": observation}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            env = self.check(env_id)
            if env.game is None:
                raise self.not_reset(env_id, "game", "step", self.GAME_FIELD)
        except Refused as exc:
            return _error(exc)
        result = env.game.step(action)
        self.record_step(env, result.observation, result.reward, result.done)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def observation(self, env_id: int) -> Any:
        try:
            env = self.check(env_id)
            if "observation" not in env.info:
                raise self.not_reset(env_id, "observation", "observation", self.GAME_FIELD)
        except Refused as exc:
            return _error(exc)
        return env.info["observation"]

    def detail(self, env_id: int) -> Any:
        try:
            env = self.check(env_id)
            if env.game is None:
                raise self.not_reset(env_id, "game", "detail", self.GAME_FIELD)
        except Refused as exc:
            return _error(exc)
        return dict(env.info)


class WordleService(_Registry):
    """State of all Wordle envs. A game exists from create on (unseeded until reset)."""

    prefix = "/wordle"

    def __init__(self, max_envs: int | None = None) -> None:
        super().__init__("Wordle", WORDLE_MAX_ENVS_ENV, max_envs)

    def create(self) -> dict[str, Any]:
        # seeded from OS entropy, like the original
        return {"id": self.new(_Env({"done": False, "reward": 0, "deleted": False}, WordleGame()))}

    def reset(self, env_id: int, seed: int) -> dict[str, Any]:
        try:
            env = self.check(env_id, resetting=True)
            if seed < 0:
                raise Refused(f"seed {seed} is out of range: Wordle seeds are 0 or more (the "
                              f"original would play seed {seed} as seed {-seed}, another task)")
        except Refused as exc:
            return _error(exc)
        env.game = WordleGame.seeded(seed)
        observation = wordle_game.RESET_OBSERVATION
        env.info.update(seed=seed, observation=observation, done=False, reward=0, deleted=False)
        return {"id": env_id, "observation": observation}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            env = self.check(env_id)
        except Refused as exc:
            return _error(exc)
        result = env.game.step(action)
        self.record_step(env, result.observation, result.reward, result.done)
        return {"observation": result.observation, "reward": result.reward, "done": result.done}

    def filtered_vocab(self, env_id: int) -> Any:
        try:
            env = self.check(env_id)
        except Refused as exc:
            return _error(exc)
        return list(env.game.candidates)

    def observation(self, env_id: int) -> Any:
        try:
            env = self.check(env_id)
            if "observation" not in env.info:
                raise self.not_reset(env_id, "observation", "observation", '"seed": <0 or more>')
        except Refused as exc:
            return _error(exc)
        return env.info["observation"]

    def detail(self, env_id: int) -> Any:
        try:
            env = self.check(env_id)
        except Refused as exc:
            return _error(exc)
        return dict(env.info)


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

    @app.get("/maze/embedded/envs")
    async def maze_envs() -> Any:  # not in the original: see limits.py
        return maze.status()

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

    @app.get("/wordle/embedded/envs")
    async def wordle_envs() -> Any:  # not in the original: see limits.py
        return wordle.status()

    return app
