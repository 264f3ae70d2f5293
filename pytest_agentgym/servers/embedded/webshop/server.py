"""Embedded WebShop server: AgentGym's ``agentenv-webshop`` wire protocol (protocol
sheet §6) over one shop built once per process.

    pytest-agentgym serve webshop --port 36007

Endpoints and answers are the original's (agentenv_webshop/server.py, model.py):

* ``GET /`` -> ``"ok"``; ``GET /list_envs`` -> the env ids;
* ``POST /create`` -> a bare int, drawn at random from 0-48950076; the new env is
  already reset to a random session (the original resets it when it builds it);
* ``POST /reset {"env_idx", "session_id": int | null}`` -> ``[observation, null]``;
  session id N plays goal N of the shuffled goal list;
* ``POST /step {"env_idx", "action"}`` -> ``{"state", "reward", "done", "info": null}``;
* ``GET /observation``, ``/available_actions`` (``{"has_search_bar", "clickables"}``),
  ``/instruction_text`` (the current page's heading), ``/state`` (``{"url", "html",
  "instruction_text"}``), each with ``?env_idx=``.

Where the original fails with an exception (an unknown env, a session id past the
goals, ``/instruction_text`` on the done page, ``search[<a> ...]``), this server answers
the same HTTP 500, with a ``{"detail": ...}`` body that says what was wrong instead of
``Internal Server Error``. A missing field is 422, as there.

Differences, none visible to a client playing episodes: the original builds the
whole shop (products, prices, goals, search engine) on every ``/create``; here one
shop and one search index are built when the server starts, in the background
(``GET /`` answers at once, the first other request waits for them), and shared by
every env. Prices are fixed per product (the original draws each env's prices with a
time-seeded random). The original keeps 8000 envs and then hands their ids out again
round-robin; here every ``/create`` gets a new id and at most :data:`MAX_ENVS` envs are
kept (``AGENTGYM_WEBSHOP_MAX_ENVS``), the least recently used closed past that.
``/state``'s ``html`` is a small document of our own with the same text, not the
original's template (docs/envs/webshop.md). ``GET /embedded/envs`` (not in the
original) counts the envs; ``GET /embedded/data`` says which data the shop is and, for
the project catalogue, the note a run records (not comparable with published scores). Requests are served one at a time on one worker thread.

The shop: ``AGENTENV_WEBSHOP_DATA`` names a directory with the original's data files;
unset, the project catalogue is used (not comparable with published WebShop scores).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.limits import Action, CappedEnvs, cap_from_env, explain, on_worker
from pytest_agentgym.servers.embedded.webshop.session import (
    Catalogue,
    IndexLike,
    Reward,
    SessionError,
    ShopLike,
    WebShopSession,
)

log = logging.getLogger("pytest_agentgym.webshop_server")

#: the original draws env ids with random.randint(0, 48950076)
MAX_ENV_ID = 48950076
#: envs kept at once (each holds a page and a few fields); ``AGENTGYM_WEBSHOP_MAX_ENVS`` overrides it
MAX_ENVS = 1024
MAX_ENVS_ENV = "AGENTGYM_WEBSHOP_MAX_ENVS"
#: what a run records when the shop is not WebShop's own data
NOT_COMPARABLE = ("WebShop plays the project catalogue: not comparable with published WebShop scores "
                  "(AGENTENV_WEBSHOP_DATA names WebShop's own files; docs/envs/webshop.md)")


class StepQuery(BaseModel):
    env_idx: int
    action: Action


class ResetQuery(BaseModel):
    env_idx: int
    session_id: Optional[int] = None


class WebShopService:
    """The envs of one server. Not thread-safe: call it from one thread only."""

    def __init__(self, catalogue: Catalogue, *, max_envs: int = MAX_ENVS,
                 rng: random.Random | None = None, tagger: str | None = None) -> None:
        self.catalogue = catalogue
        #: the noun tagger behind the reward's r_type (nouns.py), by name
        self.tagger = tagger
        self.rng = rng or random.Random()
        self.envs: CappedEnvs[WebShopSession] = CappedEnvs("the WebShop server", max_envs, MAX_ENVS_ENV)

    def _env(self, env_idx: int) -> WebShopSession:
        env = self.envs.get(env_idx)
        if env is None:
            if self.envs.was_closed_for_cap(env_idx):
                raise SessionError(f"Env {env_idx} not found: {self.envs.closed_for_cap(env_idx)}")
            raise SessionError(f"Env {env_idx} not found: create one with POST /create")
        return env

    def create(self) -> int:
        self.envs.make_room()  # one thread serves every call: no env is busy
        env_idx = self.rng.randint(0, MAX_ENV_ID)
        while env_idx in self.envs:
            env_idx = self.rng.randint(0, MAX_ENV_ID)
        env = WebShopSession(self.catalogue, random.Random(self.rng.random()))
        env.reset(None)
        self.envs.add(env_idx, env)
        return env_idx

    def reset(self, env_idx: int, session_id: int | None) -> tuple[str, None]:
        return self._env(env_idx).reset(session_id)

    def step(self, env_idx: int, action: str) -> dict[str, Any]:
        state, reward, done, info = self._env(env_idx).step(action)
        return {"state": state, "reward": float(reward), "done": bool(done), "info": info}

    def observation(self, env_idx: int) -> str:
        return self._env(env_idx).observation

    def available_actions(self, env_idx: int) -> dict[str, Any]:
        return self._env(env_idx).available_actions()

    def instruction_text(self, env_idx: int) -> str:
        return self._env(env_idx).instruction_heading()

    def state(self, env_idx: int) -> dict[str, str]:
        return self._env(env_idx).state()

    def list_envs(self) -> list[int]:
        return list(self.envs)

    def data(self) -> dict[str, Any]:
        """``GET /embedded/data``: which data the shop is, and what a score on it compares with."""
        shop = self.catalogue.shop
        comparable = bool(getattr(shop, "comparable", False))
        note = None if comparable else NOT_COMPARABLE
        return {"source": getattr(shop, "source", None), "comparable": comparable, "note": note,
                "noun_tagger": self.tagger}

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the open envs and the cap."""
        shop = self.catalogue.shop
        return self.envs.status(products=len(shop.products), goals=len(shop.goals),
                                source=getattr(shop, "source", None), noun_tagger=self.tagger)


def build_catalogue(data_dir: str | Path | None = None) -> tuple[Catalogue, str]:
    """The real shop (``catalogue.load_shop``: ``data_dir``, else ``AGENTENV_WEBSHOP_DATA``,
    else the project catalogue), its BM25 index and the original's reward with the noun
    tagger this machine has (spaCy with a model, else the rules: nouns.py); and that
    tagger's name."""
    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop
    from pytest_agentgym.servers.embedded.webshop.nouns import default_tagger
    from pytest_agentgym.servers.embedded.webshop.reward import get_reward
    from pytest_agentgym.servers.embedded.webshop.search import SearchIndex

    shop = load_shop(data_dir)
    tagger = default_tagger()
    return Catalogue(shop, SearchIndex.build(shop.products), functools.partial(get_reward, tagger=tagger)), tagger.name


def create_app(shop: ShopLike | None = None, index: IndexLike | None = None, *,
               reward: Reward | None = None, data_dir: str | Path | None = None,
               rng: random.Random | None = None) -> FastAPI:
    """The app. With no arguments it serves the real shop (:func:`build_catalogue`),
    built on its worker thread right away; ``shop``/``index``/``reward`` replace the
    real pieces (all three together)."""
    if (shop is None) != (index is None) or (shop is None) != (reward is None):
        raise ValueError("create_app: give shop, index and reward together, or none of them")
    max_envs = cap_from_env(MAX_ENVS_ENV, MAX_ENVS)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webshop")

    def build() -> WebShopService:
        tagger = None
        if shop is None:
            catalogue, tagger = build_catalogue(data_dir)
        else:
            catalogue = Catalogue(shop, index, reward)  # type: ignore[arg-type]
        source = getattr(catalogue.shop, "source", "given shop")
        log.warning("WebShop shop: %d products, %d goals (%s); noun tagger: %s", len(catalogue.shop.products),
                    len(catalogue.shop.goals), source, tagger or "the reward given")
        return WebShopService(catalogue, max_envs=max_envs, rng=rng, tagger=tagger)

    ready: Future[WebShopService] = worker.submit(build)
    app = FastAPI(title="pytest-agentgym WebShop (agentenv-webshop compatible)")
    app.state.ready = ready

    async def run(call: Callable[[WebShopService], Any], doing: str) -> Any:
        """``call`` on the worker thread once the shop is built; a failure is the
        original's HTTP 500, with a body that says what was wrong."""
        try:
            service = await asyncio.wrap_future(ready)
        except Exception as exc:  # noqa: BLE001 - every request says why the shop is missing
            return JSONResponse({"detail": explain(exc, "building the WebShop shop")}, status_code=500)
        return await on_worker(worker, functools.partial(call, service), doing, refused=(SessionError,), log=log,
                               server="WebShop")

    @app.get("/")
    async def root() -> str:
        return "ok"

    @app.get("/list_envs")
    async def list_envs() -> Any:
        return await run(lambda s: s.list_envs(), "listing the envs")

    @app.post("/create")
    async def create() -> Any:
        return await run(lambda s: s.create(), "creating an env")

    @app.post("/step")
    async def step(query: StepQuery) -> Any:
        return await run(lambda s: s.step(query.env_idx, query.action),
                         f"step {query.action!r} in env {query.env_idx}")

    @app.get("/available_actions")
    async def available_actions(env_idx: int) -> Any:
        return await run(lambda s: s.available_actions(env_idx),
                         f"reading the available actions of env {env_idx}")

    @app.get("/instruction_text")
    async def instruction_text(env_idx: int) -> Any:
        return await run(lambda s: s.instruction_text(env_idx), f"reading the instruction of env {env_idx}")

    @app.get("/observation")
    async def observation(env_idx: int) -> Any:
        return await run(lambda s: s.observation(env_idx), f"reading the observation of env {env_idx}")

    @app.get("/state")
    async def state(env_idx: int) -> Any:
        return await run(lambda s: s.state(env_idx), f"reading the state of env {env_idx}")

    @app.post("/reset")
    async def reset(query: ResetQuery) -> Any:
        return await run(lambda s: s.reset(query.env_idx, query.session_id),
                         f"resetting env {query.env_idx} to session {query.session_id}")

    @app.get("/embedded/data")
    async def embedded_data() -> Any:  # not in the original: the harness records the note in run.json
        return await run(lambda s: s.data(), "describing the data")

    @app.get("/embedded/envs")
    async def embedded_envs() -> Any:  # not in the original: see limits.py
        return await run(lambda s: s.status(), "counting the envs")

    return app
