"""The embedded BabyAI server: wire-compatible with AgentGym's ``agentenv-babyai``.

Endpoints, JSON shapes and key order, status codes and error texts follow the
original (protocol sheet section 1); the game itself is minigrid's real BabyAI
levels, text-ified by :mod:`.babyai_text` and driven through the macro actions of
:mod:`.babyai_actions`.

Task ``data_idx`` is level ``LEVELS[data_idx % 40]`` with ``seed = data_idx // 40``;
:mod:`.babyai_levels` builds and resets it as minigrid 2.3.1 did under the
original (``GoToObjS6``'s substitute, the old locked-room rule, the double reset).

Deviations from the original, all documented in docs/envs/babyai.md:

* ``POST /close`` on an env that was reset before frees it and answers ``true``
  even when the original would have refused (see :meth:`BabyAIServer.close`).
* The server keeps only the latest observation per env, not the whole history,
  and drops the env's minigrid objects on ``/close`` and on every ``/reset``.
* At most :data:`MAX_ENVS` envs are open (``AGENTGYM_BABYAI_MAX_ENVS``): a create
  past that closes the least recently used env no request is using, whose id then
  answers that it was closed for the cap (:mod:`.limits`).
* Errors say what was wrong: a step before any reset names the env and asks for a
  reset (the original answers the bare id, ``"0"``), and a negative ``data_idx``
  is refused naming the field and the valid range (the original passes gymnasium's
  complaint about a negative seed).
"""

from __future__ import annotations

import base64
import struct
import threading
import zlib
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.babyai_actions import ActionTable
from pytest_agentgym.servers.embedded.babyai_levels import level_of, make_level, reset_like_original
from pytest_agentgym.servers.embedded.babyai_text import action_list_suffix, describe, read_view
from pytest_agentgym.servers.embedded.limits import Action, CapReached, CappedEnvs, cap_from_env, explain

GREETING = "This is environment BabyAI."
NOT_RECOGNIZED = "The action is not recognized. Please check valid actions."
NO_CHANGE = "No change in state."
COMPLETED = "\n The task is completed."

#: Envs kept open at once (one minigrid level each, about 24 kB); past it, a create
#: closes the least recently used idle env. ``AGENTGYM_BABYAI_MAX_ENVS`` overrides it.
MAX_ENVS = 1024
MAX_ENVS_ENV = "AGENTGYM_BABYAI_MAX_ENVS"


class Episode:
    """One BabyAI game: a minigrid level, its latest text, reward and done flag.

    Not thread-safe on its own; the server serialises calls per env id.
    """

    def __init__(self, data_idx: int) -> None:
        level, seed = level_of(data_idx)
        self.env = make_level(level)
        try:
            obs = reset_like_original(self.env, seed)
        except BaseException:
            self.env.close()
            raise
        mission = self.env.unwrapped.mission
        self.goal = mission.replace("then", "and").replace("after you", "and")
        self.reward: float = 0
        self.done = False
        self._look(obs["image"])

    def _look(self, image: np.ndarray) -> None:
        view = read_view(self.env.unwrapped, image)
        self.text = describe(view)
        self.table = ActionTable(view)
        self._image = image

    @property
    def actions(self) -> list[str]:
        return self.table.names

    def step(self, action: str) -> None:
        """Take one text action; updates ``text``, ``reward``, ``done``."""
        action = action.lower().strip()
        if "check" in action:  # any action mentioning "check" lists the actions
            self.text = "You can take the following actions: " + ", ".join(self.actions)
            return
        if action == "":
            self.text = NO_CHANGE
            return
        primitives = self.table.moves.get(action)
        if primitives is None:
            self.text = self.table.refusals.get(action, NOT_RECOGNIZED)
            return
        if not primitives:
            self.text = NO_CHANGE
            return
        for primitive in primitives:
            obs, reward, terminated, _truncated, _info = self.env.step(primitive)
            if not np.any(obs["image"] != self._image):
                break  # the primitive changed nothing: stop the macro here
            self._image = obs["image"]
        self._look(obs["image"])
        done = bool(terminated)
        if done:
            self.text += COMPLETED
        self.reward = reward
        if done and reward <= 0.5:  # the original only trusts a clear success
            done = False
        if reward == 1 and not done:
            done = True
            self.text += COMPLETED
        self.done = done

    def png_data_uri(self) -> str:
        core = self.env.unwrapped
        frame = core.get_frame(highlight=core.highlight, tile_size=core.tile_size)
        return "data:image/png;base64," + base64.b64encode(_png(frame)).decode("ascii")

    def close(self) -> None:
        self.env.close()


def _png(rgb: np.ndarray) -> bytes:
    """Encode an (h, w, 3) uint8 array as a PNG file (no imaging library needed)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    height, width, _ = rgb.shape
    rows = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


@dataclass
class _Slot:
    """Per-id state: the original's info dict (score, done) plus the episode."""

    episode: Episode | None = None
    score: float = 0
    done: bool = False
    #: why the id no longer answers (closed, or closed for the cap); None while open
    gone: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Refused(Exception):
    """Becomes the original's HTTP 200 ``{"error": ...}`` answer."""


def check_data_idx(data_idx: int) -> None:
    """Refuse a task index that names no task (the original fails on the negative seed)."""
    if data_idx < 0:
        raise _Refused(f"data_idx {data_idx} is out of range: BabyAI task indices are 0 or more "
                       f"(level data_idx % 40, seed data_idx // 40)")


class BabyAIServer:
    """All envs of one server process, keyed by the ids ``create`` hands out; at most
    ``max_envs`` open at once (see :mod:`.limits`)."""

    def __init__(self, max_envs: int | None = None) -> None:
        self._lock = threading.Lock()
        self._next_id = 0
        cap = max_envs or cap_from_env(MAX_ENVS_ENV, MAX_ENVS)
        self._slots: CappedEnvs[_Slot] = CappedEnvs("the BabyAI server", cap, MAX_ENVS_ENV)

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def max_envs(self) -> int:
        return self._slots.cap

    def create(self) -> dict[str, Any]:
        with self._lock:
            try:
                closed = self._slots.make_room(busy=lambda slot: slot.lock.locked())
            except CapReached as exc:
                return {"error": str(exc)}
            env_id = self._next_id
            self._next_id += 1
            self._slots.add(env_id, _Slot())
            reasons = {old: self._slots.unknown(old) for old, _ in closed}
        for old, slot in closed:  # a request that already holds the slot finishes first
            self._free(slot, reasons[old])
        return {"id": env_id}

    @staticmethod
    def _free(slot: _Slot, reason: str) -> None:
        with slot.lock:
            slot.gone = reason
            if slot.episode is not None:
                slot.episode.close()
                slot.episode = None

    def _slot(self, slot: _Slot, env_id: int, *, resetting: bool = False) -> _Slot:
        """The slot, checked like the original's ``_check_id``; call with its lock held."""
        if slot.gone is not None:
            raise _Refused(slot.gone)
        if not resetting and slot.done:
            raise _Refused(f"The task with environment {env_id} has finished.")
        return slot

    def _locked(self, env_id: int) -> _Slot:
        """The slot of an open id (now the most recently used); lock it before use."""
        with self._lock:
            slot = self._slots.get(env_id)
            if slot is None:
                raise _Refused(self._slots.unknown(env_id))
        return slot

    def reset(self, env_id: int, data_idx: int) -> dict[str, Any]:
        try:
            slot = self._locked(env_id)
            with slot.lock:
                self._slot(slot, env_id, resetting=True)
                check_data_idx(data_idx)
                episode = Episode(data_idx)
                if slot.episode is not None:
                    slot.episode.close()
                slot.episode = episode
                slot.score, slot.done = episode.reward, episode.done
                return {
                    "observation": f"Your goal: {episode.goal}\n{episode.text}"
                    + action_list_suffix(episode.actions),
                    "reward": episode.reward,
                    "score": episode.reward,
                    "deleted": False,
                    "done": episode.done,
                }
        except _Refused as exc:  # the original answers every failure this way
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"resetting environment {env_id} to data_idx {data_idx}")}

    def step(self, env_id: int, action: str) -> dict[str, Any]:
        try:
            slot = self._locked(env_id)
            with slot.lock:
                self._slot(slot, env_id)
                episode = self._episode(slot, env_id, "step")
                episode.step(action)
                slot.score = slot.score + episode.reward
                slot.done = episode.done
                return {
                    "observation": episode.text + action_list_suffix(episode.actions),
                    "reward": episode.reward,
                    "score": slot.score,
                    "done": episode.done,
                }
        except _Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"step {action!r} in environment {env_id}")}

    def observe(self, env_id: int) -> dict[str, Any]:
        try:
            slot = self._locked(env_id)
            with slot.lock:
                self._slot(slot, env_id)
                episode = slot.episode
                if episode is None:
                    return {
                        "observation": "Environment not initialized",
                        "reward": 0,
                        "score": 0,
                        "done": False,
                        "deleted": False,
                    }
                return {
                    "observation": f"Your goal: {episode.goal}\n{episode.text}"
                    + action_list_suffix(episode.actions),
                    "reward": episode.reward,
                    "score": slot.score,
                    "done": episode.done,
                    "deleted": False,
                }
        except _Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"reading the observation of environment {env_id}")}

    def render(self, env_id: int) -> Any:
        try:
            slot = self._locked(env_id)
            with slot.lock:
                self._slot(slot, env_id)
                return self._episode(slot, env_id, "render").png_data_uri()
        except _Refused as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            return {"error": explain(exc, f"rendering environment {env_id}")}

    def close(self, env_id: int) -> bool:
        """Free the env. ``False`` for an unknown or already closed id and, like the
        original (whose close fails on a never-reset env), for an env that was
        created but never reset; that id stays usable. Deviation: the original
        also answers ``false`` to every later close of such an id and never frees
        it; here a later close after a reset frees it and answers ``true``."""
        with self._lock:
            slot = self._slots.peek(env_id)
            if slot is None or slot.episode is None:
                return False
            self._slots.pop(env_id)
        self._free(slot, f"The id {env_id} is not valid.")
        return True

    def status(self) -> dict[str, Any]:
        """``GET /embedded/envs``: the open envs and the cap."""
        with self._lock:
            games = sum(slot.episode is not None for slot in self._slots.values())
            return self._slots.status(games=games)

    @staticmethod
    def _episode(slot: _Slot, env_id: int, call: str) -> Episode:
        if slot.episode is None:
            # The original fails on its env dict here and answers str(KeyError(id)): "0".
            raise _Refused(f"environment {env_id} has no game yet: POST /reset "
                           f'{{"id": {env_id}, "data_idx": <task index>}} before /{call}')
        return slot.episode


class StepRequestBody(BaseModel):
    id: int
    action: Action


class ResetRequestBody(BaseModel):
    id: int
    data_idx: int


class CloseRequestBody(BaseModel):
    id: int


def greeting(cap: int = MAX_ENVS) -> str:
    """``GET /``: the original's sentence, then what this re-implementation changes."""
    return (
        f"{GREETING} [pytest-agentgym embedded re-implementation on minigrid "
        f"{version('minigrid')}, with minigrid 2.3.1's level rules. Deviations: "
        "BabyAI-GoToObjS6-v0 (data_idx % 40 == 3) is built as BabyAI-GoToObjS4-v0, "
        "the room_size=4 level that id named in minigrid < 2.5; "
        "POST /close frees any env that was reset; "
        f"at most {cap} envs are open at once ({MAX_ENVS_ENV}), past that a create closes "
        "the least recently used one; errors name the env and what to do. "
        "Details: docs/envs/babyai.md]"
    )


def create_app() -> FastAPI:
    """A fresh app with its own, empty env table."""
    server = BabyAIServer()
    app = FastAPI(title="BabyAI (pytest-agentgym embedded)")
    app.state.babyai = server
    text = greeting(server.max_envs)
    # ``async def``: handlers of about a millisecond or less, run on the event loop, which
    # spares the hop to a worker thread and back (benchmarks/servers/server_cost.py). ``/reset``
    # and ``/render`` (a level built, a frame drawn: several milliseconds, more for the
    # large levels) stay ``def``: on a worker thread they do not hold up the other envs'
    # requests for their whole length.

    @app.get("/")
    async def hello() -> str:
        return text

    @app.post("/create")
    async def create() -> dict[str, int]:
        return server.create()

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> Any:
        return server.reset(body.id, body.data_idx)

    @app.post("/step")
    async def step(body: StepRequestBody) -> Any:
        return server.step(body.id, body.action)

    @app.get("/observation")
    async def observation(id: int) -> Any:  # noqa: A002  (the wire name)
        return server.observe(id)

    @app.post("/close")
    async def close(body: CloseRequestBody) -> bool:
        return server.close(body.id)

    @app.post("/render")
    def render(body: CloseRequestBody) -> Any:
        return server.render(body.id)

    @app.get("/embedded/envs")
    async def embedded_envs() -> dict[str, Any]:  # not in the original: see limits.py
        return server.status()

    return app
