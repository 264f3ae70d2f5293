"""The fast path's general rules, on a small FastAPI app whose routes do what no embedded
server does today: raise an HTTPException (with headers), raise an exception that an app
handler answers, return a response object, declare a status code or a dependency.

As in test_fastpath_wire.py, the app runs twice as a real uvicorn process on loopback,
with and without :class:`FastPath` in front, and both answers must be the same bytes
(``date`` aside); the layer's counts say which requests it served itself.
"""

from __future__ import annotations

import sys

import pytest
from test_fastpath_wire import FAST, FASTAPI, Ask, exchange, get, post, served

from pytest_agentgym.process.managed import ManagedServer, free_port

APP = '''
import sys

import uvicorn
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from pytest_agentgym.servers.embedded.fastpath import FastPath


class Teapot(Exception):
    pass


class Body(BaseModel):
    id: int
    note: str = "-"


app = FastAPI()


@app.exception_handler(Teapot)
def teapot(request, exc):  # a sync handler: Starlette runs it in its thread pool
    return JSONResponse({"teapot": str(exc)}, status_code=418, headers={"x-brew": "yes"})


@app.post("/refuse")
async def refuse(body: Body):
    raise HTTPException(status_code=409, detail={"id": body.id}, headers={"x-why": "busy"})


@app.post("/missing")
def missing(body: Body):
    raise HTTPException(status_code=404)


@app.post("/brew")
def brew(body: Body):
    raise Teapot(body.note)


@app.post("/crash")
async def crash(body: Body):
    raise ValueError("not handled")


@app.get("/text")
async def text(id: int):
    return PlainTextResponse(f"plain {id}", status_code=202)


@app.get("/numbers")
async def numbers(id: int, scale: float = 1.0) -> dict:  # a response model: pydantic writes the JSON
    return {"id": id, "scaled": id * scale, "small": 1e-7, "big": 1e16, "nan": float("nan"), "tuple": (1, 2)}


@app.get("/untyped")
async def untyped(id: int):  # no return annotation: jsonable_encoder and JSONResponse
    return {"id": id, "set": {3}, "float": 0.1 + 0.2}  # jsonable_encoder makes the set a list


@app.post("/created", status_code=201)
async def created(body: Body) -> dict:
    return {"id": body.id}


def token() -> str:
    return "t"


@app.get("/depends")
async def depends(id: int, value: str = Depends(token)):
    return {"id": id, "value": value}


fast = sys.argv[2] == "fast"
uvicorn.run(FastPath(app) if fast else app, host="127.0.0.1", port=int(sys.argv[1]), log_level="critical")
'''

ASKS = [
    post("/refuse", {"id": 3}),                       # HTTPException with headers: FastAPI's handler
    post("/missing", {"id": 3}),                      # HTTPException without detail
    post("/brew", {"id": 3, "note": "earl grey"}),    # the app's own (sync) handler
    post("/crash", {"id": 3}),                        # no handler: 500, then closed
    post("/crash", {"id": "x"}, by=FASTAPI),
    get("/text?id=4"),                                # a response object, returned as is
    get("/numbers?id=5"),                             # pydantic's JSON: floats, NaN, tuples
    get("/numbers?id=5&scale=0.5"),
    get("/numbers?id=5&scale=x", by=FASTAPI),
    get("/untyped?id=6"),
    post("/created", {"id": 7}, by=FASTAPI),          # status 201: not a plain route
    get("/depends?id=8", by=FASTAPI),                 # a dependency: not a plain route
]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fastpath-generic")
    (folder / "app.py").write_text(APP)
    started = []
    try:
        for mode in ("fast", "plain"):
            port = free_port()
            started.append(ManagedServer(
                f"generic-{mode}", command=(sys.executable, str(folder / "app.py"), str(port), mode), port=port,
                log_path=folder / f"{mode}.log", startup_timeout=60).start())
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.mark.parametrize("ask", ASKS, ids=[f"{a.method} {a.target} {a.body!r}" for a in ASKS])
def test_general_rules_answer_as_fastapi(servers, ask: Ask):
    fast, plain = servers
    before = served(fast.port)
    ours, theirs = exchange(fast.port, ask.wire()), exchange(plain.port, ask.wire())
    assert ours == theirs
    assert (FAST if served(fast.port) > before else FASTAPI) == ask.by
