"""Every embedded server as a real process on loopback, used the way a careless or
hostile client would: creating environments and never closing them, calling before a
reset, asking for task indices that do not exist.

What is held (docs/servers.md, "Caps and errors of the embedded servers"):

* each server keeps at most its cap of open environments (here set small through its
  ``AGENTGYM_<SERVER>_MAX_ENVS``), counted by the server itself (``GET
  <base>/embedded/envs``), however many are created; past the cap BabyAI, TextCraft,
  Maze, Wordle, ALFWorld and SQLGym close the least recently used environment, whose
  id then answers an error saying so, and SciWorld refuses the create;
* an error names what was wrong (the id, the field and its valid range): never an
  empty message, a bare number (``str(KeyError(0))``) or a bare key (``'observation'``);
* a task index outside the environment's tasks is refused, never played as another
  task (the originals wrap TextCraft's mod 544, count Maze's and SciWorld's negative
  indices from the end, and play Wordle's seed -s as s).

Before this, a client that never closed grew every server without bound (BabyAI
from 84 to 129 MiB over 1500 environments), and ``{"error": "0"}`` / ``{"error": ""}``
were real answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import httpx
import pytest

from helpers.alfworld_support import needs_engine
from helpers.embedded_servers import start_embedded
from helpers.sciworld_support import java_children, needs_simulator
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.servers.embedded import missing_requirements

pytestmark = [pytest.mark.faults, pytest.mark.heavy]

needs_sqlgym = pytest.mark.skipif(
    missing_requirements("sqlgym") is not None,
    reason=f"{missing_requirements('sqlgym')} (the SQLGym server runs the real sqlgym package)")

CAP = 3
UNKNOWN = 987654


@dataclass(frozen=True)
class Case:
    """One embedded server (one game of lmrlgym) and how a client uses it."""

    server: str                                  # pytest-agentgym serve NAME
    label: str
    prefix: str                                  # the environment's base path ("/maze")
    variable: str                                # the cap's environment variable
    key: str                                     # "id" or "env_idx"
    reset: Callable[[int], dict[str, Any]]       # the body of a reset to a real task
    action: str                                  # a step that any running game takes
    #: task index bodies that name no task -> what the refusal must say
    outside: dict[str, tuple[Callable[[int], dict[str, Any]], str]] = field(default_factory=dict)
    #: calls that need a reset first: (method, path) -> what the refusal must say
    unready: tuple[tuple[str, str], ...] = ()
    marks: tuple[Any, ...] = ()

    def param(self) -> Any:
        return pytest.param(self, id=self.label, marks=self.marks)


CASES = [
    Case("babyai", "BabyAI", "", "AGENTGYM_BABYAI_MAX_ENVS", "id",
         lambda env: {"id": env, "data_idx": 1}, "turn left",
         outside={"-1": (lambda env: {"id": env, "data_idx": -1},
                         "data_idx -1 is out of range: BabyAI task indices are 0 or more")},
         unready=(("POST", "/step"), ("POST", "/render"))),
    Case("textcraft", "TextCraft", "", "AGENTGYM_TEXTCRAFT_MAX_ENVS", "id",
         lambda env: {"id": env, "data_idx": 2}, "inventory",
         outside={str(n): (lambda env, n=n: {"id": env, "data_idx": n},
                           f"data_idx {n} is out of range: TextCraft task indices are 0-543")
                  for n in (544, 546, -1)} | {
             "null": (lambda env: {"id": env, "data_idx": None},
                      "data_idx is null: POST /reset takes a whole number data_idx 0-543")}),
    Case("lmrlgym", "Maze", "/maze", "AGENTGYM_MAZE_MAX_ENVS", "id",
         lambda env: {"id": env, "game": 3}, "move up",
         outside={str(n): (lambda env, n=n: {"id": env, "game": n},
                           f"The game {n} is not valid: ") for n in (25, 26, -1, -2, -27)},
         unready=(("POST", "/step"), ("GET", "/observation"), ("GET", "/detail"))),
    Case("lmrlgym", "Wordle", "/wordle", "AGENTGYM_WORDLE_MAX_ENVS", "id",
         lambda env: {"id": env, "seed": 4}, "p a n i c",
         outside={"-3": (lambda env: {"id": env, "seed": -3},
                         "seed -3 is out of range: Wordle seeds are 0 or more")},
         unready=(("GET", "/observation"),)),
    Case("alfworld", "ALFWorld", "", "AGENTGYM_ALFWORLD_MAX_ENVS", "id",
         lambda env: {"id": env, "game": 2420, "world_type": "Text"}, "look",
         outside={str(n): (lambda env, n=n: {"id": env, "game": n, "world_type": "Text"},
                           f"game {n} is not in the ALFWorld mapping: games are 0-2419 (train), "
                           "2420-2619 (test), 2620-2759 (valid_seen) and 2760-2893 (valid_unseen)")
                  for n in (-1, 2894)},
         unready=(("POST", "/step"), ("GET", "/observation"), ("GET", "/available_actions")),
         marks=(needs_engine,)),
    Case("sqlgym", "SQLGym", "", "AGENTGYM_SQLGYM_MAX_ENVS", "env_idx",
         lambda env: {"env_idx": env, "item_id": 9428}, "SELECT 1",
         outside={str(n): (lambda env, n=n: {"env_idx": env, "item_id": n},
                           f"Item id {n} is out of range: item ids are 0-9427 (BIRD train) and "
                           "9428-10961 (BIRD dev)") for n in (-1, 10962)},
         unready=(("POST", "/step"), ("GET", "/observation")),
         marks=(needs_sqlgym,)),
    Case("sciworld", "SciWorld", "", "AGENTGYM_SCIWORLD_MAX_ENVS", "id",
         lambda env: {"id": env, "data_idx": 4240}, "look around",
         outside={str(n): (lambda env, n=n: {"id": env, "data_idx": n},
                           f"data_idx {n} is out of range: SciWorld task indices are 0-4638")
                  for n in (-1, 4639)},
         unready=(("GET", "/observation"),),
         marks=(needs_simulator,)),
]
LRU_CASES = [case.param() for case in CASES if case.server != "sciworld"]
ALL_CASES = [case.param() for case in CASES]


class Client:
    """An HTTP client on one environment of one server, speaking its dialect."""

    def __init__(self, server: Any, case: Case) -> None:
        self.case = case
        self.pid = server.pid
        self.http = httpx.Client(base_url=server.url + case.prefix, timeout=120)

    def create(self) -> Any:
        body = {} if self.case.server == "textcraft" else None  # TextCraft wants a JSON object
        answer = self.http.post("/create", json=body)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        return data["id"] if isinstance(data, dict) and "id" in data else data

    def call(self, method: str, path: str, env_id: int, body: dict[str, Any] | None = None) -> httpx.Response:
        if method == "GET":
            return self.http.get(path, params={self.case.key: env_id})
        return self.http.post(path, json=body if body is not None else {self.case.key: env_id})

    def reset(self, env_id: int, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.http.post("/reset", json=body if body is not None else self.case.reset(env_id))

    def step(self, env_id: int) -> httpx.Response:
        return self.http.post("/step", json={self.case.key: env_id, "action": self.case.action})

    def status(self) -> dict[str, Any]:
        return self.http.get("/embedded/envs").json()


def error_of(case: Case, response: httpx.Response) -> str | None:
    """The error text of an answer in the original's shape, or None when it is no error:
    HTTP 200 ``{"error": ...}`` (id servers) or HTTP 500 ``{"detail": ...}`` (SQLGym)."""
    if case.key == "env_idx":
        if response.status_code == 200:
            return None
        assert response.status_code == 500, response.text
        return response.json()["detail"]
    assert response.status_code == 200, response.text
    data = response.json()
    return data["error"] if isinstance(data, dict) and "error" in data else None


def assert_says_something(text: str | None, *names: str) -> None:
    """Not empty, not a bare number or a bare quoted key, and naming each of ``names``."""
    assert text, f"an empty error: {text!r}"
    assert not re.fullmatch(r"\s*-?\d+\s*", text), f"a bare number as error: {text!r}"
    assert not re.fullmatch(r"\s*'[^']*'\s*", text), f"a bare key as error: {text!r}"
    for name in names:
        assert name in text, f"{name!r} not in the error {text!r}"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """``shared(case)``: one server per case for the module, with its default cap."""
    servers: dict[str, Any] = {}

    def get(case: Case) -> Client:
        if case.server not in servers:
            servers[case.server] = start_embedded(case.server, case.label,
                                                  tmp_path_factory.mktemp(case.server))
        return Client(servers[case.server], case)

    yield get
    for server in servers.values():
        server.stop()


@pytest.fixture
def started(tmp_path):
    """``started(case, cap)``: the case's server as a real process of this test's own,
    with its cap set."""
    servers = []

    def start(case: Case, cap: int | None = CAP, **env: str) -> Client:
        variables = dict(env)
        if cap is not None:
            variables[case.variable] = str(cap)
        server = start_embedded(case.server, case.label, tmp_path, variables)
        servers.append(server)
        return Client(server, case)

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("case", LRU_CASES)
def test_past_the_cap_the_least_recently_used_env_is_closed_and_its_id_says_so(started, case):
    client = started(case)
    first, second, third = (client.create() for _ in range(3))
    for env_id in (first, second, third):
        assert error_of(case, client.reset(env_id)) is None
    assert error_of(case, client.step(first)) is None  # now second is the least recently used
    fourth = client.create()
    status = client.status()
    assert {key: status[key] for key in ("open", "max_envs", "setting", "past_the_cap", "closed_for_cap")} == {
        "open": CAP, "max_envs": CAP, "setting": case.variable,
        "past_the_cap": "the least recently used idle environment is closed", "closed_for_cap": 1}
    assert_says_something(error_of(case, client.step(second)), str(second),
                          f"closed to stay within the cap of {CAP} open environments", case.variable)
    assert_says_something(error_of(case, client.reset(second)), str(second), case.variable)
    for env_id in (first, third):  # the others play on
        assert error_of(case, client.step(env_id)) is None
    assert error_of(case, client.reset(fourth)) is None
    assert error_of(case, client.step(fourth)) is None


@pytest.mark.parametrize("case", LRU_CASES)
def test_a_client_that_never_closes_does_not_grow_the_server_past_its_cap(started, case):
    client = started(case)
    created = []
    for n in range(4 * CAP):
        env_id = client.create()
        created.append(env_id)
        assert error_of(case, client.reset(env_id)) is None
        status = client.status()
        assert status["open"] == min(n + 1, CAP), status
        if case.label == "BabyAI":  # the minigrid levels themselves, not only the ids
            assert status["games"] == min(n + 1, CAP), status
        if case.label == "ALFWorld":
            assert status["open_games"] <= CAP, status
    assert client.status()["closed_for_cap"] == 3 * CAP
    if case.key == "env_idx":  # the original's own listing shows the same envs
        assert client.http.get("/list_envs").json() == created[-CAP:]
    for env_id in created[-CAP:]:
        assert error_of(case, client.step(env_id)) is None


@pytest.mark.parametrize("case", [case.param() for case in CASES if case.server == "sciworld"])
def test_sciworld_refuses_a_create_past_its_cap_until_an_env_is_closed(started, case):
    """Each SciWorld env is a JVM: past the cap the create is refused in the original's
    shape for a failed create ({"error": ...}), and no JVM is started for it."""
    client = started(case, cap=2)
    first, second = client.create(), client.create()
    status = client.status()
    assert (status["open"], status["max_envs"]) == (2, 2)
    assert status["past_the_cap"] == "POST /create is refused until an environment is closed"
    jvms = len(java_children(client.pid))
    refused = client.http.post("/create")
    assert refused.status_code == 200
    assert_says_something(refused.json().get("error"), "already has 2 open environments",
                          "AGENTGYM_SCIWORLD_MAX_ENVS=2", "POST /close")
    assert client.status()["open"] == 2 and len(java_children(client.pid)) == jvms
    assert error_of(case, client.reset(second)) is None  # the open ones still play
    assert client.http.post("/close", json={"id": first}).json() is True
    third = client.create()
    assert third == second + 1 and client.status()["open"] == 2
    assert error_of(case, client.reset(third)) is None


@pytest.mark.parametrize("case", ALL_CASES)
def test_errors_name_the_env_and_what_to_do(shared, case):
    client = shared(case)
    env_id = client.create()
    for method, path in case.unready:
        answer = client.call(method, path, env_id, {case.key: env_id, "action": case.action}
                             if path == "/step" else None)
        assert_says_something(error_of(case, answer), str(env_id), "/reset")
    for method, path in (("POST", "/step"), ("POST", "/reset"), ("GET", "/observation")):
        body = {case.key: UNKNOWN, "action": case.action} if path == "/step" else case.reset(UNKNOWN)
        assert_says_something(error_of(case, client.call(method, path, UNKNOWN, body)), str(UNKNOWN))


@pytest.mark.parametrize("case", ALL_CASES)
def test_a_task_index_that_names_no_task_is_refused_and_plays_nothing(shared, case):
    client = shared(case)
    env_id = client.create()
    assert error_of(case, client.reset(env_id)) is None
    before = client.call("GET", "/observation", env_id)
    for index, (body, expected) in case.outside.items():
        assert_says_something(error_of(case, client.reset(env_id, body(env_id))), expected)
        # the env still holds the game of its last good reset: nothing else was played
        assert client.call("GET", "/observation", env_id).json() == before.json(), index


@pytest.mark.parametrize("case", [case.param() for case in CASES if case.label in ("BabyAI", "Maze")])
@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_cap_stops_the_server_at_start_naming_the_variable(started, case, value):
    with pytest.raises(ServerStartError) as caught:
        started(case, cap=None, **{case.variable: value})
    assert f"{case.variable}={value!r}: expected a whole number of environments, 1 or more" \
        in caught.value.log_tail
