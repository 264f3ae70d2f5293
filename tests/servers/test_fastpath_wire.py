"""The fast path of the embedded servers answers byte for byte as their FastAPI apps do.

For each server, two real processes on loopback: ``pytest-agentgym serve NAME`` (the
fast path in front) and ``pytest-agentgym serve NAME --no-fast-path`` (the FastAPI
app alone). Both get the same requests, well-formed and malformed, in the same order
from a fresh state, over raw sockets; their answers must be the same bytes (status
line, headers, body), apart from the ``date`` header. Each request also says who
should answer it on the fast server, the fast path or FastAPI (``GET
/embedded/fastpath`` counts them), so a fast path that handed everything to FastAPI,
or served a request it should not, fails too.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass

import pytest

from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.servers.embedded import missing_requirements
from pytest_agentgym.servers.pool import embedded_command

pytestmark = pytest.mark.heavy

#: who answers a request on the fast server: the fast path, FastAPI, or either (pydantic's
#: lax rules decide, and either way the answer must be the same)
FAST, FASTAPI, EITHER = "fast path", "FastAPI", "either"


@dataclass(frozen=True)
class Ask:
    method: str
    target: str
    body: bytes | None = None
    content_type: str | None = "application/json"
    by: str = FAST
    #: compare the answers with every number masked (ids drawn at random)
    masked: bool = False

    def wire(self, keep_alive: bool = False) -> bytes:
        head = [f"{self.method} {self.target} HTTP/1.1", "host: 127.0.0.1", "accept: */*"]
        if not keep_alive:
            head.append("connection: close")
        if self.body is not None:
            if self.content_type is not None:
                head.append(f"content-type: {self.content_type}")
            head.append(f"content-length: {len(self.body)}")
        elif self.method == "POST":
            head.append("content-length: 0")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + (self.body or b"")


def post(target: str, value: object = None, *, raw: bytes | None = None, by: str = FAST,
         content_type: str | None = "application/json") -> Ask:
    body = raw if raw is not None else (None if value is None else json.dumps(value, ensure_ascii=False).encode())
    return Ask("POST", target, body, content_type, by)


def get(target: str, by: str = FAST) -> Ask:
    return Ask("GET", target, by=by)


def malformed(target: str, valid: dict, field: str, *, optional: bool = False, key: str = "id") -> list[Ask]:
    """The ways a JSON body can be wrong, for a route whose body ``valid`` is well-formed
    (``field``: one of its fields, ``optional`` when the model has a default for it; ``key``:
    the env id's field)."""
    missing = {k: v for k, v in valid.items() if k != field}
    return [
        post(target, missing, by=FAST if optional else FASTAPI),           # missing field
        post(target, {**valid, field: [1]}, by=FASTAPI),                   # wrong type
        post(target, {**valid, field: 1.5}, by=FASTAPI),                   # wrong type
        post(target, {**valid, key: "zero"}, by=FASTAPI),                  # wrong type
        post(target, {**valid, key: True}, by=EITHER),
        post(target, {**valid, key: str(valid[key])}, by=EITHER),          # lax: "0" is 0
        post(target, {**valid, "unexpected": 1}),                          # extra fields are ignored
        post(target, raw=b'{"id": 0,', by=FASTAPI),                        # bad JSON
        post(target, raw=b"[1, 2]", by=FASTAPI),
        post(target, raw=b"null", by=FASTAPI),
        post(target, raw=b"", by=FASTAPI),                                 # empty body
        post(target, raw=b'{"id": 0, "x": "\xff"}', by=FASTAPI),           # not UTF-8
        post(target, valid, content_type=None, by=FASTAPI),                # no content type
        post(target, valid, content_type="text/plain", by=FASTAPI),
        post(target, valid, content_type="application/json; charset=utf-8", by=FASTAPI),
        post(target, {**valid, key: 2**70}, by=EITHER),                    # no such id
        post(target, {**valid, key: -1}),
        post(target + f"?{key}=0", valid, by=EITHER),                      # a query it does not need
        get(target, by=FASTAPI),                                           # 405
        Ask("PUT", target, b"{}", by=FASTAPI),
        post(target + "/", valid, by=FASTAPI),                             # 307 to the route
    ]


def queried(target: str, key: str = "id") -> list[Ask]:
    """The ways ``GET target?id=`` can be asked, well-formed and not (``key``: the id's name)."""
    return [
        get(f"{target}?{key}=0"),
        get(f"{target}?{key}=1"),
        get(f"{target}?{key}=99"),
        get(f"{target}?{key}=-3"),
        get(f"{target}?{key}=007", by=EITHER),
        get(target, by=FASTAPI),                                           # no id
        get(f"{target}?{key}=", by=FASTAPI),
        get(f"{target}?{key}=abc", by=FASTAPI),
        get(f"{target}?{key}=1.0", by=EITHER),                             # lax: 1.0 is 1
        get(f"{target}?{key}=0&{key}=1", by=FASTAPI),
        get(f"{target}?{key}=0&extra=1", by=FASTAPI),
        get(f"{target}?{key.upper()}=0", by=FASTAPI),
        post(f"{target}?{key}=0", by=FASTAPI),                             # 405
        Ask("HEAD", f"{target}?{key}=0", by=FASTAPI),
    ]


def maze_wordle() -> list[Ask]:
    step = {"id": 0, "action": "move down"}
    return [
        get("/", by=EITHER),
        post("/maze/create"), post("/maze/create"), post("/maze/create", {}),
        post("/maze/reset", {"id": 0, "game": 3}),
        post("/maze/reset", {"id": 2, "game": 25}),                        # refused game
        post("/maze/step", step),
        post("/maze/step", {"id": 0, "action": "déplacer vers le haut ⬆"}),
        post("/maze/step", {"id": 1, "action": "move up"}),               # never reset
        post("/maze/step", raw=rb'{"id": 0, "action": "\ud800"}'),  # a lone surrogate
        *malformed("/maze/step", step, "action"),
        *malformed("/maze/reset", {"id": 0, "game": 3}, "game"),
        *queried("/maze/observation"),
        get("/maze/detail?id=0"), get("/maze/available_actions"), get("/maze/embedded/envs", by=EITHER),
        get("/maze/nowhere", by=FASTAPI),
        post("/wordle/create"), post("/wordle/reset", {"id": 0, "seed": 1}),
        post("/wordle/step", {"id": 0, "action": "crane"}),
        post("/wordle/step", {"id": 0, "action": "ab"}),
        *malformed("/wordle/reset", {"id": 0, "seed": 1}, "seed"),
        *queried("/wordle/filtered_vocab"),
        *queried("/wordle/observation"),
        get("/wordle/detail?id=0"),
    ]


def textcraft() -> list[Ask]:
    step = {"id": 0, "action": "get 1 oak log"}
    return [
        get("/", by=EITHER),
        post("/create", {}), post("/create", {"commands": "x", "goal": None}), post("/create", {}),
        post("/create", by=FASTAPI),                                       # no body: 422
        post("/create", raw=b"[]", by=FASTAPI),
        post("/reset", {"id": 0, "data_idx": 5}),
        post("/reset", {"id": 1}),                                         # data_idx defaults to 0
        post("/reset", {"id": 1, "data_idx": None}),                       # refused
        post("/reset", {"id": 2, "data_idx": 544}),
        post("/step", step),
        post("/step", {"id": 0, "action": "inventory"}),
        post("/step", {"id": 0, "action": "craft 1 ☃ using 2 ❄"}),
        post("/step", raw=rb'{"id": 0, "action": "\ud800"}'),  # echoed: an unhandled error, a 500
        *malformed("/step", step, "action"),
        *malformed("/reset", {"id": 0, "data_idx": 5}, "data_idx", optional=True),
        *queried("/observation"),
        *queried("/detail"),
        get("/commands?id=0"),                                             # the original's 500
        post("/close", {"id": 2}), post("/close", {"id": 2}),
        post("/close", {"id": "two"}, by=FASTAPI),
        get("/embedded/envs", by=EITHER),
    ]


def babyai() -> list[Ask]:
    step = {"id": 0, "action": "turn left"}
    return [
        get("/", by=EITHER),
        post("/create"), post("/create"), post("/create", {}),
        post("/reset", {"id": 0, "data_idx": 0}),
        post("/reset", {"id": 2, "data_idx": -1}),                         # refused
        post("/step", step),
        post("/step", {"id": 0, "action": "check available actions"}),
        post("/step", {"id": 0, "action": "tourner à gauche"}),
        post("/step", {"id": 1, "action": "turn left"}),                  # never reset
        *malformed("/step", step, "action"),
        *malformed("/reset", {"id": 0, "data_idx": 0}, "data_idx"),
        *queried("/observation"),
        post("/render", {"id": 0}),
        post("/close", {"id": 1}), post("/close", {"id": 0}), post("/close", {"id": 0}),
        post("/step", step),                                              # closed
    ]


def sqlgym() -> list[Ask]:
    """SQLGym draws its env ids at random, so the two servers' ids differ: the creates are
    compared with their numbers masked, and the other calls name ids that are not open."""
    step = {"env_idx": 0, "action": "SELECT 1"}
    return [
        get("/", by=EITHER),
        Ask("POST", "/create", masked=True), Ask("POST", "/create", masked=True),
        Ask("GET", "/list_envs", masked=True),
        post("/reset", {"env_idx": 0, "item_id": 0}),                      # not open: a 500
        post("/step", step),
        *malformed("/step", step, "action", key="env_idx"),
        *malformed("/reset", {"env_idx": 0, "item_id": 0}, "item_id", key="env_idx"),
        *queried("/observation", key="env_idx"),
    ]


def alfworld() -> list[Ask]:
    step = {"id": 0, "action": "look"}
    return [
        get("/", by=EITHER),
        post("/create"), post("/create"),
        post("/reset", {"id": 0, "game": 0, "world_type": "Text"}),
        post("/step", step), post("/step", {"id": 0, "action": "go to the moon"}),
        *malformed("/step", step, "action"),
        *malformed("/reset", {"id": 0, "game": 0, "world_type": "Text"}, "world_type"),
        *queried("/observation"), get("/available_actions?id=0"), get("/detail?id=0"),
    ]


def sciworld() -> list[Ask]:
    step = {"id": 0, "action": "look around"}
    return [
        get("/", by=EITHER),
        post("/create"),
        post("/reset", {"id": 0, "data_idx": 0}),
        post("/step", step), post("/step", {"id": 0, "action": "fly"}),
        *malformed("/step", step, "action"),
        post("/close", {"id": 0}), post("/close", {"id": 0}),
    ]


#: server -> its requests; the simulators' servers need their extras (docs/servers.md)
SCENARIOS = {"lmrlgym": maze_wordle, "textcraft": textcraft, "babyai": babyai,
             "sqlgym": sqlgym, "alfworld": alfworld, "sciworld": sciworld}
_DATE = re.compile(rb"\r\ndate: [^\r]*", re.IGNORECASE)


def exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return _DATE.sub(b"", b"".join(chunks))


def served(port: int) -> int:
    answer = exchange(port, get("/embedded/fastpath").wire())
    stats = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert stats["fast_path"], stats
    return sum(route["served"] for route in stats["routes"].values())


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def pair(request, tmp_path_factory):
    """(name, fast server, plain server): fresh processes of the embedded server ``name``."""
    name = request.param
    why = missing_requirements(name)
    if why:
        pytest.skip(f"the embedded {name} server cannot run here: {why}")
    logs = tmp_path_factory.mktemp(f"fastpath-{name}")
    servers = []
    try:
        for extra in ((), ("--no-fast-path",)):
            port = free_port()
            servers.append(ManagedServer(
                f"{name}{''.join(extra)}", command=(*embedded_command(name), *extra), port=port,
                log_path=logs / f"{name}-{port}.log", startup_timeout=60).start())
        yield name, servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


def test_answers_are_byte_identical_and_taken_by_the_right_path(pair):
    name, fast, plain = pair
    mismatched = []
    for number, ask in enumerate(SCENARIOS[name]()):
        before = served(fast.port)
        ours, theirs = exchange(fast.port, ask.wire()), exchange(plain.port, ask.wire())
        took = FAST if served(fast.port) > before else FASTAPI
        if ask.masked:
            ours, theirs = re.sub(rb"\d+", b"N", ours), re.sub(rb"\d+", b"N", theirs)
        if ours != theirs:
            mismatched.append(f"#{number} {ask.method} {ask.target} {ask.body!r}:\n  fast:  {ours[:400]!r}\n"
                              f"  plain: {theirs[:400]!r}")
        elif ask.by != EITHER and took != ask.by:
            mismatched.append(f"#{number} {ask.method} {ask.target} {ask.body!r}: answered by the {took}, "
                              f"expected the {ask.by}")
    assert not mismatched, f"{len(mismatched)} of the {name} requests:\n" + "\n".join(mismatched)


def test_keep_alive_exchanges_are_byte_identical(pair):
    """The hot requests of a rollout on one keep-alive connection, as the harness sends them."""
    name, fast, plain = pair
    if name not in ("lmrlgym", "textcraft", "babyai"):
        pytest.skip("the simulators' servers are covered request by request above")
    base = "/maze" if name == "lmrlgym" else ""
    transcripts = []
    for server in (fast, plain):
        before = served(server.port) if server is fast else 0
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
            stream = sock.makefile("rb")

            def ask(request: Ask) -> bytes:
                try:
                    sock.sendall(request.wire(keep_alive=True))
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = stream.readline()
                        if not line:
                            return b"<closed>"
                        head += line
                except ConnectionError:
                    return b"<closed>"
                length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
                return _DATE.sub(b"", head) + stream.read(length)

            answers = [ask(post(f"{base}/create", {} if name == "textcraft" else None))]
            env = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])["id"]
            reset = {"lmrlgym": {"game": 7}, "textcraft": {"data_idx": 9}, "babyai": {"data_idx": 41}}[name]
            action = {"lmrlgym": "move right", "textcraft": "inventory", "babyai": "go forward"}[name]
            asks = [post(f"{base}/reset", {"id": env, **reset}),
                    *[post(f"{base}/step", {"id": env, "action": action}) for _ in range(3)],
                    get(f"{base}/observation?id={env}"), post(f"{base}/step", {"id": env}, by=FASTAPI),
                    post(f"{base}/step", {"id": env, "action": action}),
                    # a lone surrogate: replaced by U+FFFD as the body is read (limits.Action),
                    # so TextCraft, which echoes the action, answers it and keeps the connection
                    post(f"{base}/step", raw=b'{"id": %d, "action": "\\udc00"}' % env),
                    get(f"{base}/observation?id={env}")]
            answers += [ask(request) for request in asks]
        if server is fast:
            closed = b"<closed>" in answers
            assert served(fast.port) - before == 1 + sum(a.by == FAST for a in asks) - closed
        transcripts.append(answers)
    assert transcripts[0] == transcripts[1]
    assert b"<closed>" not in transcripts[0]
