"""Embedded ALFWorld server on the real TextWorld ALFWorld engine, wire-compatible
with AgentGym's ``agentenv-alfworld`` (protocol sheet section 4).

Run it with ``pytest-agentgym serve alfworld --port 36005``. It needs the
``alfworld`` extra (the ``alfworld`` and ``textworld`` packages, with
fast-downward); without them it exits at once saying what to install.

====================  ==================================  ==========================================
``GET /``             --                                  ``"This is environment AlfWorld."``
``POST /create``      no body                             ``{"id": n}`` (ids 0, 1, 2, ...)
``POST /reset``       ``{"id", "game", "world_type"}``    ``{"id", "observation",
                                                          "available_actions", "task_type"}``
``POST /step``        ``{"id", "action"}``                ``{"observation", "reward": float(won),
                                                          "available_actions", "done"}``
``GET /observation``  ``?id=``                            the last observation (bare string)
``GET /available_actions`` ``?id=``                       the last available actions (bare list)
``GET /detail``       ``?id=``                            the env's info dict
====================  ==================================  ==========================================

There is no ``/close``, as in the original. Each reset plays the game file the
task mapping names (:mod:`alfworld_tasks`) the way the original does: TextWorld's
batch gym env of one game, wrapped in alfworld's ``AlfredDemangler`` (no
shuffling) and ``AlfredInfos``, 50 steps at most, asking for ``won``,
``admissible_commands`` and the game file. The reset's observation drops the
welcome paragraph (everything up to the first blank line); a step's drops the
"You arrive at loc N. " prefix. An action that is not one of the admissible
commands is answered "Nothing happens.".

Failures are HTTP 200 ``{"error": "<message>"}``: ``The id N is not valid.``,
``The task with environment N has finished.`` (after ``done``, until the next
reset), ``world_type must be one of "Text", "Embody" and "Hybrid"``. Five are
clearer than the original's: a game outside 0-2619 (the original says ``list
index out of range``, and takes negative indices from the end) and a game whose
file is not in the data (the original says ``Unable to find game '<path>'.``)
name the game, the file and how to point the server at the data; a step before
any reset says so (the original answers the bare env id), and so do
``/observation`` and ``/available_actions`` before any reset (the original
answers ``'observation'``, the text of its KeyError). Any other failure names its
exception type and the call. Every other answer was compared with the
original's, byte for byte (docs/envs/alfworld.md).

At most :data:`MAX_ENVS` env ids are kept (``AGENTGYM_ALFWORLD_MAX_ENVS``): there is
no ``/close``, so past that a create forgets the least recently used env, whose id
then answers that it was closed for the cap (:mod:`.limits`). ``GET
/embedded/envs`` (not in the original) counts the envs and the open games.

Engines are reused, which the original does not do. TextWorld loads a private
copy of fast-downward's 33 MB library for every engine it builds and never
unloads it (unloading it crashes the process at exit), and the original builds
one per reset: each reset holds another 33 MB of deleted file in the temporary
directory and about 1.5 MiB of memory until the server exits. Here a game that
ends (``done``: the env refuses steps until its next reset) or is replaced by a
reset gives its engine back for the next reset, and at most
``AGENTGYM_ALFWORLD_MAX_GAMES`` (default 32) unfinished games stay open: past
that, the least recently used one is closed, and a step on it says so and asks
for a reset. A client that keeps fewer unfinished envs than that sees no
difference. The env is built directly, not registered in TextWorld's gym
registry on every reset. All engine work is done under one lock, one request
at a time, as the original's ``async`` handlers do, but in FastAPI's thread
pool, so ``GET /`` answers while a reset runs.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.limits import Action, CappedEnvs, cap_from_env, explain
from pytest_agentgym.servers.embedded.alfworld_tasks import (
    DATA_ENV,
    UnknownGame,
    data_dir,
    describe_data,
    game_file,
    import_alfworld,
    shipped_indices,
    task_type,
)

GREETING = "This is environment AlfWorld."
MAX_GAMES_ENV = "AGENTGYM_ALFWORLD_MAX_GAMES"
DEFAULT_MAX_GAMES = 32
#: env ids kept (each an info dict of a few kB; its game counts against the games' cap);
#: past it, a create forgets the least recently used env. The variable overrides it.
MAX_ENVS = 1024
MAX_ENVS_ENV = "AGENTGYM_ALFWORLD_MAX_ENVS"
#: base_config.yaml's max_nb_steps_per_episode (dagger training, the env's step limit)
MAX_STEPS = 50
WORLD_TYPES = ("Text", "Embody", "Hybrid")


class StepRequestBody(BaseModel):
    id: int
    action: Action


class ResetRequestBody(BaseModel):
    id: int
    game: int
    world_type: str


class Refused(ValueError):
    """A call answered with ``{"error": <message>}``."""


def strip_arrival(observation: str) -> str:
    """The original's ``process_ob``: drop a leading "You arrive at loc N. "."""
    if observation.startswith("You arrive at loc "):
        return observation[observation.find(". ") + 2:]
    return observation


def open_game(path: Path) -> Any:
    """A TextWorld batch env of the one game ``path``, as AgentGym's ``init_env`` builds it."""
    import_alfworld()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.gym.envs import TextworldBatchGymEnv

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    return TextworldBatchGymEnv([str(path)], infos, batch_size=1, asynchronous=True,
                                max_episode_steps=MAX_STEPS,
                                wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])


def load_game(engine: Any, path: Path) -> Any:
    """Point an engine from :func:`open_game` at another game; ``engine.reset()`` starts it.
    TextWorld keeps the PDDL backend (and its copy of fast-downward) across loads."""
    engine.gamefiles = [str(path)]
    engine.seed(1234)  # TextworldBatchGymEnv's own seed: rebuilds its cycle over the game list
    return engine


def max_engines() -> int:
    """How many games may be open at once (``AGENTGYM_ALFWORLD_MAX_GAMES``, default 32)."""
    return cap_from_env(MAX_GAMES_ENV, DEFAULT_MAX_GAMES, unit="games")


class ALFWorldEnvironments:
    """The envs of one server: id -> the open game (an engine) and the info dict
    ``/detail`` shows. Engines are reused: a game that ends (or is replaced by a
    reset) gives its engine back, and the least recently used open game is closed
    when more than ``max_games`` are open (see the module docstring)."""

    def __init__(self, root: Path | None = None, *, shipped: bool | None = None,
                 max_games: int | None = None, max_envs: int | None = None) -> None:
        if root is None:
            root, shipped = data_dir()
        self.root = Path(root)
        self.shipped = bool(shipped)
        self.max_games = max_games or max_engines()
        self._lock = threading.Lock()
        #: env id -> engine of its open game; least recently used first
        self._open: OrderedDict[int, Any] = OrderedDict()
        #: engines of ended games, ready for the next reset
        self._idle: list[Any] = []
        #: envs whose unfinished game was closed to stay within max_games
        self._evicted: set[int] = set()
        #: env id -> the info dict /detail shows; least recently used first
        self._info: CappedEnvs[dict[str, Any]] = CappedEnvs(
            "the ALFWorld server", max_envs or cap_from_env(MAX_ENVS_ENV, MAX_ENVS), MAX_ENVS_ENV)
        self._next_id = 0

    def create(self) -> dict[str, int]:
        with self._lock:  # every call holds it, so no env is busy now
            for old, _ in self._info.make_room():
                self._release(old)
                self._evicted.discard(old)
            env_id = self._next_id
            self._next_id += 1
            self._info.add(env_id, {"done": False, "reward": 0, "deleted": False})
        return {"id": env_id}

    def _check(self, env_id: int, *, resetting: bool = False) -> None:
        info = self._info.get(env_id)
        if info is None:
            raise Refused(self._info.unknown(env_id))
        if info["deleted"]:
            raise Refused(f"The task with environment {env_id} has been deleted.")
        if not resetting and info["done"]:
            raise Refused(f"The task with environment {env_id} has finished.")

    def game_path(self, game: int) -> Path:
        try:
            path = game_file(self.root, game)
        except UnknownGame as exc:
            raise Refused(str(exc)) from None
        if not path.is_file():
            where = (f"the shipped games (games {', '.join(map(str, shipped_indices()))})"
                     if self.shipped else f"the data directory {self.root}")
            raise Refused(f"game {game} is {path}, which is not in {where}; set {DATA_ENV} to a "
                          f"directory holding ALFWorld's json_2.1.1 games (alfworld-download puts "
                          f"them in ~/.cache/alfworld) and restart the server")
        return path

    def _release(self, env_id: int) -> None:
        engine = self._open.pop(env_id, None)
        if engine is not None:
            self._idle.append(engine)

    def _engine_for(self, env_id: int, path: Path) -> Any:
        self._release(env_id)
        self._evicted.discard(env_id)
        while len(self._open) >= self.max_games:
            oldest, engine = self._open.popitem(last=False)
            self._idle.append(engine)
            self._evicted.add(oldest)
        engine = load_game(self._idle.pop(), path) if self._idle else open_game(path)
        self._open[env_id] = engine
        return engine

    def reset(self, env_id: int, game: int, world_type: str) -> dict[str, Any]:
        if world_type not in WORLD_TYPES:
            return {"error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}
        try:
            with self._lock:
                self._check(env_id, resetting=True)
                engine = self._engine_for(env_id, self.game_path(game))
                observations, infos = engine.reset()
                observation = "\n".join(observations[0].split("\n\n")[1:])
                actions = infos.get("admissible_commands", [[]])[0]
                self._info.add(env_id, {"world_type": world_type, "game": game,
                                        "observation": observation, "available_actions": actions,
                                        "done": False, "reward": 0, "deleted": False})
                return {"id": env_id, "observation": observation, "available_actions": actions,
                        "task_type": task_type(infos["extra.gamefile"][0])}
        except Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # the original answers any failure as {"error": str(exc)}
            return {"error": explain(exc, f"resetting environment {env_id} to game {game}")}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            with self._lock:
                self._check(env_id)
                engine = self._open.get(env_id)
                if engine is None:
                    if env_id in self._evicted:
                        raise Refused(f"environment {env_id}'s game was closed: more than "
                                      f"{self.max_games} games were open at once ({MAX_GAMES_ENV}); "
                                      f"POST /reset to start it again")
                    raise Refused(f"environment {env_id} has no game yet: POST /reset first")
                self._open.move_to_end(env_id)
                observations, _, dones, infos = engine.step([action])
                payload = {"observation": strip_arrival(observations[0]),
                           "reward": float(infos["won"][0]),
                           "available_actions": infos.get("admissible_commands", [[]])[0],
                           "done": bool(dones[0])}
                self._info.peek(env_id).update(payload)
                if payload["done"]:  # refused from now on until a reset: the engine can serve others
                    self._release(env_id)
                return payload
        except Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"step {action!r} in environment {env_id}")}

    def ask(self, env_id: int, field: str | None) -> Any:
        """``/observation``, ``/available_actions`` (a field of the info) or ``/detail`` (None)."""
        try:
            with self._lock:
                self._check(env_id)
                info = self._info.peek(env_id)
                if field is None:
                    return dict(info)
                if field not in info:  # the original answers its KeyError: "'observation'"
                    raise Refused(f"environment {env_id} has no {field.replace('_', ' ')} yet: "
                                  f'POST /reset {{"id": {env_id}, "game": <0-2619>, "world_type": '
                                  f'"Text"}} before /{field}')
                return info[field]
        except Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"reading /{field or 'detail'} of environment {env_id}")}

    def engines(self) -> tuple[int, int]:
        """(open games, idle engines): every engine holds its own copy of fast-downward."""
        with self._lock:
            return len(self._open), len(self._idle)

    def data(self) -> dict[str, Any]:
        """``GET /embedded/data``: which games these are, and the note a run records about them."""
        return describe_data(self.root, self.shipped)

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the env ids kept, the cap, and the games."""
        with self._lock:
            return self._info.status(open_games=len(self._open), idle_engines=len(self._idle),
                                     max_games=self.max_games, games_setting=MAX_GAMES_ENV)


def create_app(environments: ALFWorldEnvironments | None = None) -> FastAPI:
    """The FastAPI app over ``environments`` (default: the configured data directory)."""
    envs = environments or ALFWorldEnvironments()
    app = FastAPI(title="pytest-agentgym ALFWorld (TextWorld engine)")

    @app.get("/")
    def hello() -> str:
        return GREETING

    @app.post("/create")
    def create() -> Any:
        return envs.create()

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> Any:
        return envs.reset(body.id, body.game, body.world_type)

    @app.post("/step")
    def step(body: StepRequestBody) -> Any:
        return envs.step(body.id, body.action)

    @app.get("/observation")
    def observation(id: int) -> Any:  # noqa: A002 - the wire name
        return envs.ask(id, "observation")

    @app.get("/available_actions")
    def available_actions(id: int) -> Any:  # noqa: A002
        return envs.ask(id, "available_actions")

    @app.get("/detail")
    def detail(id: int) -> Any:  # noqa: A002
        return envs.ask(id, None)

    @app.get("/embedded/envs")
    def embedded_envs() -> Any:  # not in the original: see limits.py
        return envs.status()

    @app.get("/embedded/data")
    def embedded_data() -> Any:  # not in the original: the generated games are not comparable
        return envs.data()

    return app
