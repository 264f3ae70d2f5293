"""Big and broken actions at the embedded servers' ``/step`` (servers/embedded/limits.py),
each against a real server process (``pytest-agentgym serve NAME``, with and without the
fast path):

* a 5.5 MB action is refused (HTTP 413, a ``{"detail": ...}`` body naming the limit)
  before its body is read: the answer comes while most of the body is still unsent, and
  a small step of another client is answered meanwhile;
* an action with a lone surrogate (``"go to \\udc80"``, valid JSON, not valid UTF-8) is
  answered, with the character replaced by U+FFFD, and the env's reads keep working
  (before: TextCraft answered the step and every later /observation and /detail with a
  bare 500; WebShop's /state was a 500 for good; SQLGym answered a UTF-8 error); SciWorld
  (the action goes on through py4j to the JVM) and ALFWorld (TextWorld) included, skipped
  where their simulators are not installed.
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.servers.embedded import missing_requirements
from pytest_agentgym.servers.embedded.limits import MAX_STEP_BODY
from pytest_agentgym.servers.pool import embedded_command

pytestmark = pytest.mark.faults  # issue 39: a 5.5 MB action, a lone surrogate

BIG = 5_500_000
LONE = "\udc80"


def serve(name: str, tmp_path, *, fast_path: bool = True) -> ManagedServer:
    why = missing_requirements(name)
    if why:
        pytest.skip(why)
    port = free_port()
    command = [*embedded_command(name), *(() if fast_path else ("--no-fast-path",))]
    return ManagedServer(name, command=command, port=port, log_path=tmp_path / f"{name}-{port}.log",
                         startup_timeout=180, label=f"embedded server {name}").start()


def rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def read_answer(sock: socket.socket) -> tuple[int, dict]:
    """One HTTP/1.1 answer with a Content-Length body, read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), json.loads(body[:length])


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "fastapi-only"])
def test_a_huge_webshop_action_is_refused_before_it_is_read_and_others_go_on(tmp_path, fast_path):
    server = serve("webshop", tmp_path, fast_path=fast_path)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            mine, other = client.post("/create").json(), client.post("/create").json()
            before = rss_kb(server.proc.pid)
            body = json.dumps({"env_idx": mine, "action": "search[" + "tea " * (BIG // 4) + "]"}).encode()
            head = (f"POST /step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
                sock.sendall(head + body[:65536])  # the rest of the 5.5 MB is never sent
                small = client.post("/step", json={"env_idx": other, "action": "search[green tea]"})
                assert small.status_code == 200 and "[SEP]" in small.json()["state"]
                status, answer = read_answer(sock)
            after = rss_kb(server.proc.pid)
            assert status == 413
            assert f"({len(body)} bytes) is larger than this server reads for a step ({MAX_STEP_BODY} bytes" \
                in answer["detail"]
            # the env that sent it is untouched and still plays
            assert client.get("/observation", params={"env_idx": mine}).json().startswith("WebShop [SEP]")
            # sent whole (the client does not wait for the answer): refused all the same
            whole = client.post("/step", content=body, headers={"content-type": "application/json"})
            assert whole.status_code == 413 and "larger than this server reads" in whole.json()["detail"]
            # one byte under the limit is a step like any other
            fits = json.dumps({"env_idx": mine, "action": "search[tea]"})
            fits = fits[:-2] + " " * (MAX_STEP_BODY - len(fits)) + fits[-2:]
            assert len(fits) == MAX_STEP_BODY
            assert client.post("/step", content=fits, headers={"content-type": "application/json"}).status_code == 200
            print(f"webshop ({'fast path' if fast_path else 'FastAPI only'}) RSS before {before} kB, "
                  f"after the refused 5.5 MB step {after} kB, after the whole one {rss_kb(server.proc.pid)} kB")
            assert after - before < 20_000  # kB: the 5.5 MB body was not read in
    finally:
        server.stop()


def _reset(path: str, **body):
    return lambda i: (path, {"id": i, **body})


LONE_CASES = [
    pytest.param("textcraft", "", {}, None, lambda i: {"id": i, "action": f"get 1 {LONE}"},
                 lambda i: [("/observation", {"id": i}), ("/detail", {"id": i})], id="textcraft"),
    pytest.param("lmrlgym", "/maze", None, _reset("/maze/reset", game=0), lambda i: {"id": i, "action": f"move {LONE}"},
                 lambda i: [("/maze/observation", {"id": i}), ("/maze/detail", {"id": i})], id="lmrlgym"),
    pytest.param("babyai", "", None, _reset("/reset", data_idx=0), lambda i: {"id": i, "action": f"go to {LONE}"},
                 lambda i: [("/observation", {"id": i})], id="babyai"),
    pytest.param("webshop", "", None, None, lambda i: {"env_idx": i, "action": f"search[tea {LONE}]"},
                 lambda i: [("/state", {"env_idx": i}), ("/observation", {"env_idx": i})], id="webshop"),
    pytest.param("sqlgym", "", None, lambda i: ("/reset", {"env_idx": i, "item_id": 0}),
                 lambda i: {"env_idx": i, "action": f"SELECT '{LONE}'"},
                 lambda i: [("/observation", {"env_idx": i})], id="sqlgym"),
    # a JVM per env (ScienceWorld's simulator): the action crosses py4j into Java (about 9 s)
    pytest.param("sciworld", "", None, _reset("/reset", data_idx=4240), lambda i: {"id": i, "action": f"look at {LONE}"},
                 lambda i: [("/observation", {"id": i}), ("/state", {"id": i}), ("/detail", {"id": i})],
                 id="sciworld"),
    # TextWorld's parser and the PDDL engine (about 5 s)
    pytest.param("alfworld", "", None, _reset("/reset", game=2420, world_type="Text"),
                 lambda i: {"id": i, "action": f"go to {LONE}"},
                 lambda i: [("/observation", {"id": i}), ("/available_actions", {"id": i}), ("/detail", {"id": i})],
                 id="alfworld"),
]


@pytest.mark.parametrize("name, base, create, reset, step, reads", LONE_CASES)
def test_a_lone_surrogate_in_an_action_is_replaced_and_the_env_keeps_answering(tmp_path, name, base, create,
                                                                              reset, step, reads):
    server = serve(name, tmp_path)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            made = client.post(f"{base}/create", **({} if create is None else {"json": create})).json()
            env = made if isinstance(made, int) else made["id"]
            if reset is not None:
                path, body = reset(env)
                client.post(path, json=body).raise_for_status()
            # json.dumps writes the lone surrogate as the escape \udc80: valid JSON
            sent = json.dumps(step(env))
            assert "\\udc80" in sent
            answer = client.post(f"{base}/step", content=sent, headers={"content-type": "application/json"})
            assert answer.status_code == 200, answer.text
            assert "utf-8" not in answer.text.lower()  # not a UTF-8 error passed on as the state
            for path, params in reads(env) * 2:  # and again: it stays readable
                read = client.get(path, params=params)
                assert read.status_code == 200, f"{path}: {read.status_code} {read.text[:200]}"
            if name == "webshop":  # the query kept the replacement character
                assert "\ufffd" in client.get("/state", params={"env_idx": env}).json()["url"] + \
                    client.get("/state", params={"env_idx": env}).json()["html"]
    finally:
        server.stop()

