"""Embedded SQLGym server: AgentGym's ``agentenv-sqlgym`` wire protocol (protocol
sheet §7) over the real ``sqlgym`` package (optional extra ``sqlgym``).

    pytest-agentgym serve sqlgym --port 36006

Endpoints and answers are the original's:

* ``GET /`` -> ``"ok"``; ``GET /list_envs`` -> the env ids;
* ``POST /create`` -> a bare int, drawn at random from 0-489576;
* ``POST /reset {"env_idx", "item_id"}`` -> ``[question, null]``; item ids
  0-9427 are BIRD train questions, 9428-10961 BIRD dev questions (item id
  minus 9428);
* ``POST /step {"env_idx", "action"}`` -> ``{"state", "reward", "done": true,
  "info": {"ground_truth"}}``: ``sqlgym.SqlGymEnv.step`` runs the SQL on the
  read-only database; ``state`` is ``str()`` of the rows or of the SQLite
  error, cut to 100 characters plus ``"..."``; reward 1.0 when the rows equal
  the gold query's rows as sets, else 0.0;
* ``GET /observation?env_idx=`` -> the question of the env's last reset.

Where the original fails with an exception (unknown env, step before reset,
an item id outside the data), this server answers the same HTTP 500, with a
``{"detail": ...}`` body that says what was wrong instead of the original's
``Internal Server Error``; so does any failure it did not expect (the type of the
exception, and the call). A missing field is 422, as there.

Two deliberate differences, invisible to a client that creates fewer than 9
envs: the original keeps 8 envs and hands their ids out again round-robin
(two concurrent episodes can then share one env); here every ``/create`` gets
a new id, and at most :data:`MAX_ENVS` envs are kept (``AGENTGYM_SQLGYM_MAX_ENVS``):
past that, a create closes the least recently used env (there is no ``/close``),
whose id then answers HTTP 500 saying it was closed for the cap. The wire shape
is the original's: ``/create`` a bare int, ``/list_envs`` a list of ints (up to the
cap, where the original lists at most 8). ``GET /embedded/envs`` (not in the
original) counts them. And the loaded questions are shared by all envs instead
of loaded once per env.

The data: ``AGENTENV_SQLGYM_BIRD_PATH`` (the original's variable) names a BIRD
directory; unset, the project's shipped data set is used (see
:mod:`sqlgym_bird`). All SQLite work happens on one worker thread (sqlite3
connections belong to the thread that made them); like the original, requests
are served one at a time, but ``GET /`` still answers while a query runs.
"""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.limits import Action, CappedEnvs, cap_from_env, on_worker
from pytest_agentgym.servers.embedded.sqlgym_bird import (
    BIRD_PATH_ENV,
    BirdDataError,
    check_bird_dir,
    shipped_bird_dir,
)
from pytest_agentgym.process import variables

log = logging.getLogger("pytest_agentgym.sqlgym_server")

#: item id ranges of the original, [low, high): 0-9427 BIRD train, 9428-10961 BIRD dev
ITEM_RANGES = {"train": (0, 9428), "dev": (9428, 10962)}
#: the original draws env ids with random.randint(0, 489576)
MAX_ENV_ID = 489576
#: envs kept at once; beyond it the least recently used one is closed (each holds an open
#: database); ``AGENTGYM_SQLGYM_MAX_ENVS`` overrides it
MAX_ENVS = 256
MAX_ENVS_ENV = "AGENTGYM_SQLGYM_MAX_ENVS"
#: what the original's state string keeps before it adds "..."
STATE_CHARS = 100


class StepQuery(BaseModel):
    env_idx: int
    action: Action


class ResetQuery(BaseModel):
    env_idx: int
    item_id: int


class Refused(Exception):
    """A request the original fails with an exception: HTTP 500 here, with this message."""


def split_of(item_id: int) -> tuple[str, int]:
    """(split, index in that split) of an item id, as the original maps it."""
    for split, (low, high) in ITEM_RANGES.items():
        if low <= item_id < high:
            return split, item_id - low
    raise Refused(f"Item id {item_id} is out of range: item ids are 0-9427 (BIRD train) "
                  "and 9428-10961 (BIRD dev)")


def cut_state(result: Any) -> str:
    """The original's ``state``: ``str()`` of the result, cut to 100 characters plus "..."."""
    text = str(result)
    return text[:STATE_CHARS] + "..." if len(text) > STATE_CHARS else text


class SQLGymService:
    """The envs of one server. Not thread-safe: call it from one thread only."""

    def __init__(self, bird_dir: str | Path, *, max_envs: int = MAX_ENVS,
                 rng: random.Random | None = None, shipped: bool = False) -> None:
        self.bird_dir = Path(bird_dir)
        #: whether this is the shipped data set (error texts then say how to use BIRD)
        self.shipped = shipped
        self.sizes = check_bird_dir(self.bird_dir)
        self.max_envs = max_envs
        self.rng = rng or random.Random()
        self._datasets: dict[str, Any] = {}
        #: env id -> sqlgym.SqlGymEnv (None until its first reset); most recently used last
        self.envs: CappedEnvs[Any] = CappedEnvs("the SQLGym server", max_envs, MAX_ENVS_ENV)

    def _data_note(self) -> str:
        if self.shipped:
            return f"the shipped data set; set {BIRD_PATH_ENV} to use BIRD; in {self.bird_dir}"
        return f"data: {self.bird_dir}"

    def _dataset(self, split: str) -> Any:
        if split not in self._datasets:
            from sqlgym.datasets import BirdDataset

            self._datasets[split] = BirdDataset(str(self.bird_dir), split)
        return self._datasets[split]

    def _env(self, env_idx: int, *, reset: bool = False) -> Any:
        if env_idx not in self.envs:
            if self.envs.was_closed_for_cap(env_idx):
                raise Refused(f"Env {env_idx} not found: {self.envs.closed_for_cap(env_idx)}")
            raise Refused(f"Env {env_idx} not found: create one with POST /create")
        env = self.envs.get(env_idx)
        if env is None and not reset:
            raise Refused(f"Env {env_idx} has no question yet: POST /reset "
                          '{"env_idx", "item_id"} before /step or /observation')
        return env

    def create(self) -> int:
        for _, dropped in self.envs.make_room():  # one thread serves every call: none is busy
            if dropped is not None and dropped.conn is not None:
                dropped.conn.close()
        env_idx = self.rng.randint(0, MAX_ENV_ID)
        while env_idx in self.envs:
            env_idx = self.rng.randint(0, MAX_ENV_ID)
        self.envs.add(env_idx, None)
        return env_idx

    def reset(self, env_idx: int, item_id: int) -> tuple[str, None]:
        env = self._env(env_idx, reset=True)
        split, index = split_of(item_id)
        if split not in self.sizes:
            raise Refused(f"item id {item_id} is a BIRD {split} question, but the data has no "
                          f"{split}/{split}.json; point {BIRD_PATH_ENV} at data with that split "
                          f"(data: {self.bird_dir})")
        if index >= self.sizes[split]:
            # the essentials first: clients show the start of this text
            low = ITEM_RANGES[split][0]
            raise Refused(f"item id {item_id} is past the data: it has {self.sizes[split]} {split} questions, "
                          f"item ids {low}-{low + self.sizes[split] - 1} ({self._data_note()})")
        dataset = self._dataset(split)
        if env is None or env.dataset is not dataset:
            from sqlgym import SqlGymEnv

            if env is not None and env.conn is not None:
                env.conn.close()
            env = SqlGymEnv(dataset)
            self.envs.add(env_idx, env)
        return env.reset(index), None

    def step(self, env_idx: int, action: str) -> dict[str, Any]:
        env = self._env(env_idx)
        result, reward, terminated, info, _ = env.step(action)
        return {"state": cut_state(result), "reward": float(reward), "done": bool(terminated), "info": info}

    def observation(self, env_idx: int) -> str:
        return self._env(env_idx).observation

    def list_envs(self) -> list[int]:
        return list(self.envs)

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the open envs and the cap."""
        return self.envs.status()


def data_dir() -> tuple[Path, bool]:
    """(directory, shipped): ``AGENTENV_SQLGYM_BIRD_PATH`` when set, else the shipped
    data set (built on first use)."""
    configured = variables.value(BIRD_PATH_ENV)
    return (Path(configured), False) if configured else (shipped_bird_dir(), True)


def create_app(bird_dir: str | Path | None = None) -> FastAPI:
    try:
        directory, shipped = (Path(bird_dir), False) if bird_dir is not None else data_dir()
        service = SQLGymService(directory, shipped=shipped,
                                max_envs=cap_from_env(MAX_ENVS_ENV, MAX_ENVS))
    except BirdDataError as exc:
        raise SystemExit(f"sqlgym server: {exc}") from None
    sizes = ", ".join(f"{split}: {n} questions" for split, n in service.sizes.items())
    log.warning("SQLGym data: %s (%s)", service.bird_dir, sizes)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlgym")
    app = FastAPI(title="pytest-agentgym SQLGym (agentenv-sqlgym compatible)")
    app.state.service = service

    async def run(call: Callable[[], Any], doing: str) -> Any:
        """``call`` on the SQLite thread; a failure is the original's HTTP 500, with a
        body that says what was wrong (``doing``: what the call was)."""
        return await on_worker(worker, call, doing, refused=(Refused,), log=log, server="SQLGym")

    @app.get("/")
    async def root() -> str:
        return "ok"

    @app.get("/list_envs")
    async def list_envs() -> Any:
        return await run(service.list_envs, "listing the envs")

    @app.post("/create")
    async def create() -> Any:
        return await run(service.create, "creating an env")

    @app.post("/reset")
    async def reset(query: ResetQuery) -> Any:
        return await run(lambda: service.reset(query.env_idx, query.item_id),
                         f"resetting env {query.env_idx} to item id {query.item_id}")

    @app.post("/step")
    async def step(query: StepQuery) -> Any:
        return await run(lambda: service.step(query.env_idx, query.action),
                         f"step {query.action!r} in env {query.env_idx}")

    @app.get("/observation")
    async def observation(env_idx: int) -> Any:
        return await run(lambda: service.observation(env_idx), f"reading the observation of env {env_idx}")

    @app.get("/embedded/envs")
    async def embedded_envs() -> Any:  # not in the original: see limits.py
        return await run(service.status, "counting the envs")

    return app
