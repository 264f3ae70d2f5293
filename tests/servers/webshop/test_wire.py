"""The WebShop server's wire (server.py), route by route, in a real uvicorn process on
loopback: the app over the stand-in shop of helpers/webshop_shop.py, served plain and behind the
embedded servers' fast path.

Expected shapes, from the original's agentenv_webshop/server.py and model.py:

* ``GET /`` -> ``"ok"``; ``GET /list_envs`` -> ``List[int]``;
* ``POST /create`` (no body) -> a bare int (``random.randint(0, 48950076)``);
* ``POST /reset`` ``ResetQuery{env_idx: int, session_id: Optional[int] = None}`` ->
  ``Tuple[str, None]``, i.e. ``[observation, null]``;
* ``POST /step`` ``StepQuery{env_idx: int, action: str}`` -> ``StepResponse{state: str,
  reward: float, done: bool, info: None}``;
* ``GET /available_actions?env_idx=`` -> ``{has_search_bar: bool, clickables: List[str]}``;
* ``GET /instruction_text``, ``/observation`` -> a JSON string; ``GET /state`` ->
  ``{url, html, instruction_text}``;
* an exception (unknown env, a session id past the goals) is HTTP 500; a missing
  field is FastAPI's 422.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient
from pytest_agentgym.process.managed import ManagedServer
from pytest_agentgym.servers.embedded.webshop import pages
from pytest_agentgym.servers.embedded.webshop.reward import get_reward

pytestmark = pytest.mark.heavy

HERE = Path(__file__).parent
FACTORY = {"plain": "helpers.webshop_shop:standin_app", "fast path": "helpers.webshop_shop:standin_fast_app"}


def uvicorn_command(factory: str) -> tuple[str, ...]:
    return ("{python}", "-m", "uvicorn", "--factory", "--app-dir", str(HERE.parents[1]), factory,
            "--host", "{host}", "--port", "{port}", "--log-level", "warning")


@pytest.fixture(scope="module", params=sorted(FACTORY))
def server(request, tmp_path_factory):
    logs = tmp_path_factory.mktemp("webshop-logs")
    server = ManagedServer("WebShop", command=uvicorn_command(FACTORY[request.param]), startup_timeout=60,
                           log_path=logs / "webshop.log").start()
    yield server
    server.stop()


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def gold_replies(shop, goal: dict) -> list[str]:
    """A model's replies along the goal's gold path: search its product's title, open it,
    click each of the goal's option values, buy."""
    asin = goal["asin"]
    replies = [f"Action: search[{shop.by_asin[asin]['Title']}]", f"Action: click[{asin}]"]
    replies += [f"Action: click[{value}]" for value in goal["goal_options"].values()]
    return replies + ["Action: click[Buy Now]"]


def new_env(http: httpx.Client, session_id: int | None = 0) -> int:
    env_idx = http.post("/create").json()
    http.post("/reset", json={"env_idx": env_idx, "session_id": session_id})
    return env_idx


def test_root_and_create_and_list_envs(http):
    root = http.get("/")
    assert (root.status_code, root.json()) == (200, "ok")
    created = http.post("/create")
    env_idx = created.json()
    assert created.status_code == 200 and type(env_idx) is int and 0 <= env_idx <= 48950076
    listed = http.get("/list_envs").json()
    assert env_idx in listed and all(type(i) is int for i in listed)
    # a created env is already on a search page (the original resets it when it builds it)
    page = http.get("/observation", params={"env_idx": env_idx}).json()
    assert page.startswith("WebShop [SEP] Instruction: [SEP] ") and page.endswith(" [SEP] Search")


def test_reset_answers_observation_and_null(http, shop):
    env_idx = http.post("/create").json()
    answer = http.post("/reset", json={"env_idx": env_idx, "session_id": 2})
    instruction = shop.goals[2]["instruction_text"]
    assert answer.status_code == 200
    assert answer.json() == [f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search", None]
    assert http.get("/observation", params={"env_idx": env_idx}).json() == answer.json()[0]
    without = http.post("/reset", json={"env_idx": env_idx})  # session_id defaults to None
    assert without.status_code == 200 and without.json()[1] is None


def test_page_routes(http, shop):
    env_idx = new_env(http, 1)
    instruction = shop.goals[1]["instruction_text"]
    q = {"env_idx": env_idx}
    assert http.get("/available_actions", params=q).json() == {"has_search_bar": True, "clickables": ["search"]}
    assert http.get("/instruction_text", params=q).json() == f"Instruction: {instruction}"
    state = http.get("/state", params=q).json()
    assert list(state) == ["url", "html", "instruction_text"]
    assert state["url"] == "http://127.0.0.1:3000/1"
    assert state["instruction_text"] == f"Instruction: {instruction}"
    assert state["html"].startswith("<!DOCTYPE html>") and 'id="search_input"' in state["html"]


def test_step_answers_state_reward_done_and_null_info(http):
    env_idx = new_env(http)
    answer = http.post("/step", json={"env_idx": env_idx, "action": "search[shampoo]"})
    body = answer.json()
    assert answer.status_code == 200 and list(body) == ["state", "reward", "done", "info"]
    assert (body["reward"], body["done"], body["info"]) == (0.0, False, None)
    assert type(body["reward"]) is float
    assert "Page 1 (Total results: 12)" in body["state"]
    assert http.get("/observation", params={"env_idx": env_idx}).json() == body["state"]
    actions = http.get("/available_actions", params={"env_idx": env_idx}).json()
    assert actions["has_search_bar"] is False and actions["clickables"][:2] == ["back to search", "next >"]
    assert http.get("/instruction_text", params={"env_idx": env_idx}).json().startswith("Instruction:i ")
    invalid = http.post("/step", json={"env_idx": env_idx, "action": "click[nothing]"}).json()
    assert invalid == {"state": body["state"], "reward": 0.0, "done": False, "info": None}


@pytest.mark.parametrize("method, path, body, params", [
    ("POST", "/step", {"env_idx": 7, "action": "search[x]"}, None),
    ("POST", "/reset", {"env_idx": 7, "session_id": 0}, None),
    ("GET", "/observation", None, {"env_idx": 7}),
    ("GET", "/available_actions", None, {"env_idx": 7}),
    ("GET", "/instruction_text", None, {"env_idx": 7}),
    ("GET", "/state", None, {"env_idx": 7}),
])
def test_an_unknown_env_is_http_500_saying_so(http, method, path, body, params):
    if 7 in http.get("/list_envs").json():
        pytest.skip("env id 7 was drawn")  # one chance in 48950077
    answer = http.request(method, path, json=body, params=params)
    assert answer.status_code == 500
    assert answer.json() == {"detail": "Env 7 not found: create one with POST /create"}


def test_other_failures_are_http_500_or_422(http, shop):
    env_idx = http.post("/create").json()
    past = http.post("/reset", json={"env_idx": env_idx, "session_id": len(shop.goals)})
    assert past.status_code == 500 and "out of range" in past.json()["detail"]
    assert http.post("/step", json={"env_idx": env_idx}).status_code == 422
    assert http.get("/observation").status_code == 422
    new_env(http)
    done_env = new_env(http)
    for action in ("search[soap]", "click[b000soap01]", "click[buy now]"):
        http.post("/step", json={"env_idx": done_env, "action": action})
    heading = http.get("/instruction_text", params={"env_idx": done_env})
    assert heading.status_code == 500 and "done page has no instruction" in heading.json()["detail"]


def test_embedded_envs_counts(http):
    status = http.get("/embedded/envs").json()
    assert status["setting"] == "AGENTGYM_WEBSHOP_MAX_ENVS" and status["max_envs"] == 1024
    assert status["open"] == len(http.get("/list_envs").json())
    assert status["products"] == 14


async def episode(url: str, session_id: int, replies: list[str]):
    """An episode through the harness's client and WebShop adapter: (opening, step results)."""
    adapter = adapter_class("WebShop")()
    results = []
    async with EnvClient(url, env="WebShop", dialect="env_idx", timeout=30) as client:
        opening = await adapter.open(client, session_id)
        for reply in replies:
            body = await client.step(opening.env_id, adapter.parse_action(reply).action)
            results.append(adapter.read_step(body))
    return opening, results


def test_an_episode_through_the_harness_adapter_is_paid_the_purchase_reward(server, shop):
    n = next(i for i, goal in enumerate(shop.goals) if goal["asin"] == "B000SOAP01")
    goal = shop.goals[n]
    color = goal["goal_options"]["color"]
    replies = [f"Thought: I search.\nAction: {action}" for action in
               ("search[olive soap bar]", "click[B000SOAP01]", f"click[{color}]", "click[Buy Now]")]
    opening, results = asyncio.run(episode(server.url, n, replies))
    assert opening.first_observation == f"WebShop [SEP] Instruction: [SEP] {goal['instruction_text']} [SEP] Search"
    expected = get_reward(shop.by_asin["B000SOAP01"], goal, shop.prices["B000SOAP01"], {"color": color})
    assert [(r.reward, r.done) for r in results] == [(0.0, False)] * 3 + [(expected, True)]
    assert expected == 1.0
    assert results[-1].observation == pages.done_page("B000SOAP01", {"color": color}, expected).observation


def test_the_real_factory_says_when_the_shop_cannot_be_built(tmp_path, tmp_path_factory):
    """``create_app()`` with no arguments loads the real shop: with AGENTENV_WEBSHOP_DATA
    naming a directory without the data, GET / still answers and /create says why."""
    logs = tmp_path_factory.mktemp("webshop-bad-data")
    command = ("{python}", "-m", "uvicorn", "--factory",
               "pytest_agentgym.servers.embedded.webshop.server:create_app",
               "--host", "{host}", "--port", "{port}", "--log-level", "warning")
    server = ManagedServer("WebShop", command=command, startup_timeout=60, log_path=logs / "webshop.log",
                           env={"AGENTENV_WEBSHOP_DATA": str(tmp_path / "nothing-here")}).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert http.get("/").json() == "ok"
            answer = http.post("/create")
            assert answer.status_code == 500
            assert answer.json()["detail"].startswith("building the WebShop shop failed: ")
    finally:
        server.stop()


def test_the_real_shop_end_to_end(tmp_path_factory):
    """The real factory (project catalogue, BM25 index, reward) in its own process: a
    purchase found by searching the goal product's title is paid what reward.py says."""
    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop

    if os.environ.get("AGENTENV_WEBSHOP_DATA"):
        pytest.skip("AGENTENV_WEBSHOP_DATA is set: this test plays the project catalogue")
    shop = load_shop(None)
    logs = tmp_path_factory.mktemp("webshop-real")
    command = ("{python}", "-m", "uvicorn", "--factory",
               "pytest_agentgym.servers.embedded.webshop.server:create_app",
               "--host", "{host}", "--port", "{port}", "--log-level", "warning")
    server = ManagedServer("WebShop", command=command, startup_timeout=120, log_path=logs / "webshop.log",
                           env={"AGENTENV_WEBSHOP_DATA": ""}).start()
    try:
        goal = shop.goals[0]
        asin = goal["asin"]
        opening, results = asyncio.run(episode(server.url, 0, gold_replies(shop, goal)))
        assert goal["instruction_text"] in opening.first_observation
        assert f"[SEP] {asin} [SEP]" in results[0].observation  # the title's search lists it
        expected = get_reward(shop.by_asin[asin], goal, shop.prices[asin], dict(goal["goal_options"]))
        assert (results[-1].reward, results[-1].done) == (expected, True)
        assert expected == 1.0
    finally:
        server.stop()


def test_past_the_cap_the_least_recently_used_env_is_closed_and_says_so(catalogue):
    """The service behind the routes, in this process: at most max_envs envs."""
    import random

    from pytest_agentgym.servers.embedded.webshop.server import WebShopService
    from pytest_agentgym.servers.embedded.webshop.session import SessionError

    service = WebShopService(catalogue, max_envs=2, rng=random.Random(3))
    first, second = service.create(), service.create()
    service.reset(first, 0)  # first is now the most recently used
    third = service.create()
    assert service.list_envs() == [first, third]
    with pytest.raises(SessionError, match=f"Env {second} not found: environment {second} was closed to stay "
                                           "within the cap of 2 open environments"):
        service.observation(second)


def test_serve_webshop_plays_the_data_that_agentenv_webshop_data_names(tmp_path_factory):
    """``pytest-agentgym serve webshop`` (the command the harness spawns) with
    AGENTENV_WEBSHOP_DATA naming a directory in the original's file format (the fixture:
    items_shuffle_1000.json and items_ins_v2_1000.json): the shop is that data, labelled by
    its path, and a purchase along a goal's gold path is paid what reward.py says."""
    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop
    from pytest_agentgym.servers.embedded.webshop.nouns import default_tagger
    from pytest_agentgym.servers.pool import embedded_command

    data = HERE / "fixtures" / "data"
    shop = load_shop(data)
    logs = tmp_path_factory.mktemp("webshop-data")
    server = ManagedServer("WebShop", command=embedded_command("webshop"), startup_timeout=120,
                           log_path=logs / "webshop.log", env={"AGENTENV_WEBSHOP_DATA": str(data)}).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            http.post("/create").raise_for_status()
            status = http.get("/embedded/envs").json()
        assert (status["products"], status["goals"]) == (len(shop.products), len(shop.goals)) == (5, len(shop.goals))
        assert status["source"] == str(data) and status["noun_tagger"] == default_tagger().name
        goal = shop.goals[0]
        asin = goal["asin"]
        opening, results = asyncio.run(episode(server.url, 0, gold_replies(shop, goal)))
        assert goal["instruction_text"] in opening.first_observation
        expected = get_reward(shop.by_asin[asin], goal, shop.prices[asin], dict(goal["goal_options"]))
        assert (results[-1].reward, results[-1].done) == (expected, True) and expected > 0
    finally:
        server.stop()
