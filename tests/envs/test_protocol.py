"""The protocol client: request shapes per dialect, answer parsing, and one typed
error per way a call can fail.

Parsing and error mapping use an injected ``httpx.MockTransport`` (no sockets);
refused connections, silent servers and dropped connections use real sockets
on loopback started here.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import socket
import threading

import httpx
import pytest

from pytest_agentgym.envs.protocol import (
    EnvBadResponse,
    EnvClient,
    EnvErrorResponse,
    EnvHTTPError,
    EnvServerError,
    EnvTimeout,
    EnvUnreachable,
)

URL = "http://127.0.0.1:36007"


def run(coro):
    return asyncio.run(coro)


class Recorder:
    """A MockTransport handler that answers from a table and records the requests."""

    def __init__(self, answers):
        self.answers = answers  # {(method, path): httpx.Response or callable}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[(request.method, request.url.path)]
        return answer(request) if callable(answer) else answer

    def body(self, index: int):
        return json.loads(self.requests[index].content)


def client_for(answers, dialect="id", env="WebShop", **kwargs):
    recorder = Recorder(answers)
    client = EnvClient(URL, env=env, dialect=dialect,
                       transport=httpx.MockTransport(recorder), **kwargs)
    return client, recorder


# -- request shapes ---------------------------------------------------------------


def test_id_dialect_puts_id_in_bodies_and_queries():
    client, rec = client_for({
        ("POST", "/create"): httpx.Response(200, json={"id": 4}),
        ("POST", "/reset"): httpx.Response(200, json={"observation": "o"}),
        ("POST", "/step"): httpx.Response(200, json={"observation": "p", "reward": 0, "done": False}),
        ("GET", "/observation"): httpx.Response(200, json="p"),
        ("POST", "/close"): httpx.Response(200, json=True),
    }, env="BabyAI")

    async def go():
        env_id = await client.create()
        await client.reset(env_id, {"data_idx": 7})
        await client.step(env_id, "turn left")
        await client.observation(env_id)
        await client.close(env_id)
        return env_id

    assert run(go()) == 4
    assert rec.body(1) == {"id": 4, "data_idx": 7}
    assert rec.body(2) == {"id": 4, "action": "turn left"}
    assert rec.requests[3].url.params["id"] == "4"
    assert rec.body(4) == {"id": 4}


def test_env_idx_dialect_create_bare_int_and_env_idx_everywhere():
    client, rec = client_for({
        ("POST", "/create"): httpx.Response(200, json=48123),
        ("POST", "/reset"): httpx.Response(200, json=["WebShop [SEP] Instruction: [SEP] x", None]),
        ("POST", "/step"): httpx.Response(
            200, json={"state": "s", "reward": 0.0, "done": False, "info": None}),
        ("GET", "/observation"): httpx.Response(200, json="page"),
    }, dialect="env_idx")

    async def go():
        env_id = await client.create()
        reset = await client.reset(env_id, {"session_id": 3})
        step = await client.step(env_id, "search[mug]")
        page = await client.observation(env_id)
        return env_id, reset, step, page

    env_id, reset, step, page = run(go())
    assert env_id == 48123
    assert reset == ["WebShop [SEP] Instruction: [SEP] x", None]  # passed through as it is
    assert step["state"] == "s" and page == "page"
    assert rec.body(1) == {"env_idx": 48123, "session_id": 3}
    assert rec.body(2) == {"env_idx": 48123, "action": "search[mug]"}
    assert rec.requests[3].url.params["env_idx"] == "48123"


def test_env_idx_create_accepts_webarena_dict():
    client, _ = client_for({("POST", "/create"): httpx.Response(200, json={"env_idx": 2})},
                           dialect="env_idx", env="WebArena")
    assert run(client.create()) == 2


@pytest.mark.parametrize("dialect, answer", [
    ("env_idx", True),               # a JSON bool is not an id
    ("env_idx", "12"),
    ("env_idx", {"id": 3}),
    ("env_idx", {"env_idx": False}),
    ("id", 5),                       # the id dialect wants {"id": n}
    ("id", {"id": "5"}),
    ("id", [5]),
])
def test_create_rejects_other_shapes(dialect, answer):
    client, _ = client_for({("POST", "/create"): httpx.Response(200, json=answer)},
                           dialect=dialect)
    with pytest.raises(EnvBadResponse) as info:
        run(client.create())
    assert info.value.endpoint == "/create"
    assert repr(answer)[:10] in str(info.value)


def test_id_create_keeps_whole_answer():
    body = {"id": 0, "observation": "Crafting commands: ...", "done": False, "reward": 0}
    client, _ = client_for({("POST", "/create"): httpx.Response(200, json=body)}, env="TextCraft")
    assert run(client.create()) == 0
    assert client.last_create == body


# -- errors -----------------------------------------------------------------------


def test_http_200_error_body_raises_error_response_naming_everything():
    client, _ = client_for({("POST", "/step"): httpx.Response(
        200, json={"error": "The task with environment 3 has finished."})}, env="BabyAI")
    with pytest.raises(EnvErrorResponse) as info:
        run(client.step(3, "go to red ball 1"))
    error = info.value
    assert error.server_message == "The task with environment 3 has finished."
    assert (error.url, error.endpoint, error.env, error.env_id) == (URL, "/step", "BabyAI", 3)
    text = str(error)
    for part in (URL, "/step", "BabyAI", "env id 3", "has finished"):
        assert part in text


def test_empty_error_string_is_still_an_error():
    # Maze reset with game 25 answers {"error": ""} (sheet §14.1.6).
    client, _ = client_for({("POST", "/reset"): httpx.Response(200, json={"error": ""})}, env="Maze")
    with pytest.raises(EnvErrorResponse) as info:
        run(client.reset(0, {"game": 25}))
    assert info.value.server_message == ""


def test_body_that_is_not_json_raises_bad_response():
    client, _ = client_for({("POST", "/step"): httpx.Response(200, text="<html>oops</html>")})
    with pytest.raises(EnvBadResponse) as info:
        run(client.step(1, "x"))
    assert "not JSON" in str(info.value) and "<html>oops" in str(info.value)
    assert not isinstance(info.value, (EnvErrorResponse, EnvHTTPError))


@pytest.mark.parametrize("status, text, hint", [
    (500, "Internal Server Error", "traceback"),
    (404, '{"detail":"Not Found"}', "no such endpoint"),
    (422, '{"detail":[{"loc":["body","env_idx"],"msg":"Field required"}]}', "dialect"),
    (418, "teapot", None),
])
def test_http_error_status_raises_http_error(status, text, hint):
    client, _ = client_for({("POST", "/reset"): httpx.Response(status, text=text)},
                           dialect="env_idx", env="SQLGym")
    with pytest.raises(EnvHTTPError) as info:
        run(client.reset(9, {"item_id": 9428}))
    error = info.value
    assert error.status_code == status
    assert f"HTTP {status}" in str(error) and text[:20] in str(error)
    assert error.env_id == 9 and error.env == "SQLGym"
    if hint:
        assert hint in str(error)


def test_503_is_retried_then_succeeds():
    answers = iter([httpx.Response(503, text="busy"), httpx.Response(503, text="busy"),
                    httpx.Response(200, json=7)])
    client, rec = client_for({("POST", "/create"): lambda request: next(answers)},
                             dialect="env_idx", retry_delay=0.0)
    assert run(client.create()) == 7
    assert len(rec.requests) == 3


def test_503_that_persists_is_reported_after_the_retries():
    client, rec = client_for({("POST", "/create"): httpx.Response(503, text="busy")},
                             dialect="env_idx", retries_503=2, retry_delay=0.0)
    with pytest.raises(EnvHTTPError) as info:
        run(client.create())
    assert info.value.status_code == 503 and "after 3 tries" in str(info.value)
    assert len(rec.requests) == 3


def test_errors_survive_pickling_with_their_fields():
    error = EnvHTTPError("HTTP 500: x", status_code=500, url=URL, endpoint="/step",
                         env="WebShop", env_id=12)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is EnvHTTPError
    assert (copy.status_code, copy.env_id, str(copy)) == (500, 12, str(error))


@pytest.mark.parametrize("kwargs", [
    {"base_url": "127.0.0.1:36001"}, {"dialect": "idx"}, {"timeout": 0},
])
def test_bad_client_settings_are_refused(kwargs):
    args = {"base_url": URL, "env": "BabyAI", **kwargs}
    with pytest.raises(ValueError):
        EnvClient(args.pop("base_url"), **args)


# -- real sockets -----------------------------------------------------------------


def unused_port() -> int:
    """A port nothing listens on: bound, read, and released (never listened on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SilentServer:
    """A loopback socket that accepts connections and then either never answers
    (``hang``) or reads the request and closes the connection (``drop``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted: list[socket.socket] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "drop":
                conn.recv(65536)
                conn.close()
            else:
                self.accepted.append(conn)  # keep it open, say nothing

    def close(self) -> None:
        self.closing.set()
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_server(request):
    server = SilentServer(request.param)
    yield server
    server.close()


def test_refused_connection_raises_unreachable():
    url = f"http://127.0.0.1:{unused_port()}"

    async def go():
        async with EnvClient(url, env="BabyAI", timeout=5) as client:
            await client.create()

    with pytest.raises(EnvUnreachable) as info:
        run(go())
    assert info.value.url == url and info.value.endpoint == "/create"
    assert "is the server running" in str(info.value)


@pytest.mark.parametrize("silent_server", ["hang"], indirect=True)
def test_server_that_never_answers_raises_timeout(silent_server):
    async def go():
        async with EnvClient(silent_server.url, env="ALFWorld", timeout=0.5) as client:
            await client.step(11, "look")

    with pytest.raises(EnvTimeout) as info:
        run(go())
    assert info.value.env_id == 11 and "0.5 s" in str(info.value)
    assert silent_server.accepted, "the request must have reached the socket"


@pytest.mark.parametrize("silent_server", ["drop"], indirect=True)
def test_connection_dropped_before_answer_raises_unreachable(silent_server):
    async def go():
        async with EnvClient(silent_server.url, env="SciWorld", timeout=5) as client:
            await client.reset(2, {"data_idx": 0})

    with pytest.raises(EnvUnreachable) as info:
        run(go())
    assert "dropped" in str(info.value) and info.value.env_id == 2


def test_every_error_is_an_env_server_error():
    for cls in (EnvErrorResponse, EnvBadResponse, EnvHTTPError, EnvUnreachable, EnvTimeout):
        assert issubclass(cls, EnvServerError)
    distinct = {EnvErrorResponse, EnvBadResponse, EnvHTTPError, EnvUnreachable, EnvTimeout}
    for a in distinct:
        for b in distinct - {a}:
            assert not issubclass(a, b)
