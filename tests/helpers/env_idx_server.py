"""A small env_idx-dialect server, shaped like AgentGym's WebShop or SQLGym (sheet §6-7).

The real servers need gigabytes of data that cannot be had here, so the tests
drive the env_idx dialect and the WebShop/SQLGym adapters against this one,
run as a real process on loopback::

    python tests/helpers/env_idx_server.py --kind webshop --host 127.0.0.1 --port 8123
    python tests/helpers/env_idx_server.py --kind sqlgym --port 8124 --create-shape dict

What it reproduces from the originals:

* ``GET /`` answers ``"ok"``; ``POST /create`` answers a bare JSON int (a random
  id; ``--create-shape dict`` answers WebArena's ``{"env_idx": n}`` instead);
  SQLGym keeps at most 8 envs and then hands the existing ids out round-robin.
* ``POST /reset {"env_idx", "session_id"|"item_id"}`` answers ``[observation, null]``.
* ``POST /step {"env_idx", "action"}`` answers ``{"state", "reward", "done", "info"}``.
* ``GET /observation?env_idx=`` answers the current observation as a JSON string;
  WebShop also has ``GET /available_actions``.
* Errors: the originals have no error handling, so an unknown env id, an item id
  out of range or an observation before any reset is an uncaught exception,
  i.e. HTTP 500 ``Internal Server Error`` (text); a missing body field is
  FastAPI's 422. They never answer ``{"error": ...}``.

What is made up: the catalogue, the goals and the database below (tiny and
fixed), the page texts beyond their ``[SEP]`` shape, and WebShop's reward,
which here is 1.0 for the right product with the right option, 0.5 for the
right product otherwise, 0.0 for anything else (the real one weighs type,
attributes, options and price).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI
from pydantic import BaseModel

SEP = " [SEP] "

# -- WebShop-shaped -------------------------------------------------------------------


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    price: float
    options: tuple[str, ...]


CATALOGUE = (
    Product("B0SHIRT001", "Red Cotton T-Shirt for Men", 19.99, ("small", "medium", "large")),
    Product("B0SHIRT002", "Blue Linen Shirt, Long Sleeve", 34.50, ("medium", "large")),
    Product("B0MUG00003", "Ceramic Coffee Mug, 12 oz", 8.75, ("white", "black")),
    Product("B0LAMP0004", "LED Desk Lamp with USB Port", 25.00, ()),
)

#: session_id -> (instruction, target asin, target option)
GOALS = (
    ("i need a red cotton t-shirt in size large, and price lower than 30.00 dollars",
     "B0SHIRT001", "large"),
    ("i want a black ceramic coffee mug, and price lower than 10.00 dollars",
     "B0MUG00003", "black"),
    ("find me a led desk lamp with a usb port, and price lower than 40.00 dollars",
     "B0LAMP0004", None),
)


@dataclass
class ShopSession:
    goal: int = 0
    page: str = "search"  # search | results | item | done
    results: list[Product] = field(default_factory=list)
    item: Product | None = None
    option: str | None = None

    @property
    def instruction(self) -> str:
        return GOALS[self.goal][0]

    def observation(self) -> str:
        if self.page == "search":
            return SEP.join(["WebShop", "Instruction:", self.instruction, "Search"])
        head = ["Instruction:", self.instruction, "Back to Search"]
        if self.page == "results":
            rows = [f"Page 1 (Total results: {len(self.results)})", "Next >"]
            for product in self.results:
                rows += [product.asin, product.title, f"${product.price:.2f}"]
            return SEP.join(head + rows)
        if self.page == "item":
            assert self.item is not None
            rows = ["< Prev"]
            if self.item.options:
                rows += ["size" if "large" in self.item.options else "color", *self.item.options]
            rows += [self.item.title, f"Price: ${self.item.price:.2f}", "Rating: N.A.",
                     "Description", "Features", "Reviews", "Buy Now"]
            return SEP.join(head + rows)
        assert self.item is not None
        return SEP.join(["Thank you for shopping with us!", "Purchased", "asin", self.item.asin,
                         "options", str(self.option), "Your score (min 0.0, max 1.0)",
                         str(self.reward())])

    def clickables(self) -> list[str]:
        if self.page == "results":
            return ["back to search", "next >"] + [p.asin.lower() for p in self.results]
        if self.page == "item":
            assert self.item is not None
            return ["back to search", "< prev", *self.item.options,
                    "description", "features", "reviews", "buy now"]
        return []

    def reward(self) -> float:
        _, asin, option = GOALS[self.goal]
        if self.item is None or self.item.asin != asin:
            return 0.0
        return 1.0 if option == self.option else 0.5

    def act(self, action: str) -> tuple[float, bool]:
        """Apply one action; an action that does not fit the page changes nothing."""
        action = action.strip()
        if self.page == "done":
            return 0.0, True
        if action.startswith("search[") and action.endswith("]") and self.page == "search":
            words = action[len("search["):-1].lower().split()
            self.results = [p for p in CATALOGUE if any(w in p.title.lower() for w in words)]
            self.page = "results"
        elif action.startswith("click[") and action.endswith("]"):
            value = action[len("click["):-1].strip().lower()
            if value not in self.clickables():
                return 0.0, False
            if value == "back to search":
                self.page, self.item, self.option = "search", None, None
            elif value == "< prev":
                self.page = "results"
            elif self.page == "results" and value != "next >":
                self.item = next(p for p in self.results if p.asin.lower() == value)
                self.page, self.option = "item", None
            elif self.page == "item" and value == "buy now":
                self.page = "done"
                return self.reward(), True
            elif self.page == "item" and self.item and value in self.item.options:
                self.option = value
        return 0.0, False


# -- SQLGym-shaped --------------------------------------------------------------------

SCHEMA = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER, year INTEGER,
                      FOREIGN KEY (singer_id) REFERENCES singer (singer_id));
INSERT INTO singer VALUES (1, 'Ana', 'France', 29), (2, 'Bo', 'Japan', 41),
                          (3, 'Cy', 'France', 35), (4, 'Di', 'Chile', 23);
INSERT INTO concert VALUES (1, 1, 2014), (2, 1, 2015), (3, 2, 2015), (4, 3, 2016);
"""

DB_DESCRIPTION = (
    "concert_singer contains tables such as singer, concert. "
    "Table singer has columns such as singer_id, name, country, age. "
    "singer_id is the primary key. "
    "Table concert has columns such as concert_id, singer_id, year. "
    "concert_id is the primary key. "
    "The singer_id of concert is the foreign key of singer_id of singer."
)

#: item_id -> (question, gold SQL)
QUESTIONS = (
    ("How many singers are from France?",
     "SELECT count(*) FROM singer WHERE country = 'France'"),
    ("List the names of singers who gave a concert in 2015.",
     "SELECT DISTINCT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id "
     "WHERE c.year = 2015"),
    ("What is the age of the oldest singer?", "SELECT max(age) FROM singer"),
)


class SqlSession:
    def __init__(self) -> None:
        self.item: int | None = None

    @property
    def observation(self) -> str:
        if self.item is None:
            raise RuntimeError("observation before reset")  # the original: AttributeError
        return f"{DB_DESCRIPTION}\n\n{QUESTIONS[self.item][0]}"


def _database() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(SCHEMA)
    conn.execute("PRAGMA query_only = ON")  # the originals open BIRD read-only
    return conn


# -- the app --------------------------------------------------------------------------


class ResetQuery(BaseModel):
    env_idx: int
    session_id: Optional[int] = None
    item_id: Optional[int] = None


class StepQuery(BaseModel):
    env_idx: int
    action: str


def create_app(kind: str = "webshop", create_shape: str = "int") -> FastAPI:
    """The app; ``kind`` is "webshop" or "sqlgym", ``create_shape`` "int" or "dict"."""
    if kind not in ("webshop", "sqlgym"):
        raise ValueError(f"kind must be webshop or sqlgym, got {kind!r}")
    app = FastAPI()
    lock = threading.Lock()
    envs: dict[int, Any] = {}
    order: list[int] = []
    cursor = {"next": -1}
    capacity = 8 if kind == "sqlgym" else 8000
    id_range = 489576 if kind == "sqlgym" else 48950076
    db = _database() if kind == "sqlgym" else None

    @app.get("/")
    def root() -> str:
        return "ok"

    @app.get("/list_envs")
    def list_envs() -> list[int]:
        return list(envs)

    @app.post("/create")
    def create() -> Any:
        with lock:
            if len(envs) == capacity:  # the originals' round-robin reuse
                cursor["next"] = (cursor["next"] + 1) % capacity
                env_idx = order[cursor["next"]]
            else:
                rng = random.Random(time.time_ns())
                env_idx = rng.randint(0, id_range)
                while env_idx in envs:
                    env_idx = rng.randint(0, id_range)
                envs[env_idx] = ShopSession() if kind == "webshop" else SqlSession()
                order.append(env_idx)
        return {"env_idx": env_idx} if create_shape == "dict" else env_idx

    @app.post("/reset")
    def reset(query: ResetQuery) -> tuple[str, None]:
        env = envs[query.env_idx]  # unknown id: KeyError, HTTP 500
        if kind == "webshop":
            goal = query.session_id if query.session_id is not None else 0
            envs[query.env_idx] = env = ShopSession(goal=goal % len(GOALS))
            return env.observation(), None
        item = query.item_id if query.item_id is not None else 0
        if not 0 <= item < len(QUESTIONS):
            raise ValueError(f"Item id {item} is out of range.")
        env.item = item
        return env.observation, None

    @app.post("/step")
    def step(query: StepQuery) -> dict[str, Any]:
        env = envs[query.env_idx]
        if kind == "webshop":
            with lock:
                reward, done = env.act(query.action)
            return {"state": env.observation(), "reward": reward, "done": done, "info": None}
        if env.item is None:
            raise RuntimeError("step before reset")
        gold = QUESTIONS[env.item][1]
        with lock:
            expected = db.execute(gold).fetchall()
            try:
                rows: Any = db.execute(query.action).fetchall()
                reward = 1.0 if set(rows) == set(expected) else 0.0
            except sqlite3.Error as exc:
                rows, reward = exc, 0.0
        state = str(rows)
        if len(state) > 100:
            state = state[:100] + "..."
        return {"state": state, "reward": reward, "done": True,
                "info": {"ground_truth": gold}}

    @app.get("/observation")
    def observation(env_idx: int) -> str:
        env = envs[env_idx]
        return env.observation() if kind == "webshop" else env.observation

    if kind == "webshop":
        @app.get("/available_actions")
        def available_actions(env_idx: int) -> dict[str, Any]:
            env = envs[env_idx]
            return {"has_search_bar": env.page == "search", "clickables": env.clickables()}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=("webshop", "sqlgym"), default="webshop")
    parser.add_argument("--create-shape", choices=("int", "dict"), default="int")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(create_app(args.kind, args.create_shape), host=args.host, port=args.port,
                log_level="warning")


def command(kind: str = "webshop", create_shape: str = "int") -> list[str]:
    """The argv (with ``{python}``, ``{host}``, ``{port}`` placeholders) that runs this
    server, for :class:`pytest_agentgym.servers.lifecycle.ManagedServer`."""
    return ["{python}", str(Path(__file__).resolve()), "--kind", kind,
            "--create-shape", create_shape, "--host", "{host}", "--port", "{port}"]


if __name__ == "__main__":
    main()

