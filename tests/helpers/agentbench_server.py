"""A small AgentBench task controller and task workers, shaped like AgentBench's
``src/server/task_controller.py`` and ``task_worker.py`` (v0.2), run as real
processes on loopback::

    python tests/helpers/agentbench_server.py --role stack --tasks alfworld-std,webshop-std --port 5000
    python tests/helpers/agentbench_server.py --role controller --port 5000
    python tests/helpers/agentbench_server.py --role worker --tasks alfworld-std \\
        --controller http://127.0.0.1:5000/api --port 5001

``stack`` serves a controller on ``--port`` and one worker per task on free ports,
all in one process (several uvicorn servers on one event loop): the workers
register with the controller by heartbeat over HTTP, as AgentBench's do.

Reproduced (all under ``/api``): the controller's ``GET /list_workers``,
``/list_sessions``, ``/get_indices?name=``, ``POST /start_sample {name, index}``,
``/interact {session_id, agent_response}``, ``/cancel {session_id}``,
``/receive_heartbeat {name, address, concurrency, indices}``,
``/calculate_overall``; the worker's ``POST /start_sample {index, session_id}``,
``/interact``, ``/cancel``, ``GET /get_indices``, ``/get_sessions``,
``/worker_status``. Answers are ``{"session_id", "output": {index, status,
result, history}}``; errors are HTTP statuses with ``{"detail"}``: 406 (unknown
task, no worker with room, a worker at its concurrency), 400 (index out of
bounds, unknown session, a second request while one runs), 501 (the task raised).
The tasks are in tests/helpers/agentbench_tasks.py.

Fault switch: ``--raise-at INDEX`` makes the task of sample INDEX raise on the
agent's first reply (the worker answers 501, the controller passes it on).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import APIRouter, FastAPI, HTTPException
from pydantic import BaseModel

if __package__ in (None, ""):  # run as a script: tests/, the folder above, holds the helpers package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers.agentbench_tasks import Cancelled, Finish, TaskDef, task  # noqa: E402

RUNNING = "running"


class AgentResponse(BaseModel):
    status: str = "normal"
    content: str | None = None


class Interact(BaseModel):
    session_id: int
    agent_response: AgentResponse


class SessionRef(BaseModel):
    session_id: int


class WorkerStart(BaseModel):
    index: int | str
    session_id: int


class ControllerStart(BaseModel):
    name: str
    index: int | str


class Heartbeat(BaseModel):
    name: str
    address: str
    concurrency: int
    indices: list


# -- a task worker ------------------------------------------------------------------------


class Session:
    """One running sample: the task coroutine and the agent take turns through two queues."""

    def __init__(self, index: Any, raises: bool = False) -> None:
        self.index = index
        self.raises = raises
        self.history: list[dict[str, str]] = []
        self.to_agent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.from_agent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.busy = False
        self.runner: asyncio.Task | None = None

    def inject(self, role: str, content: str) -> None:
        self.history.append({"role": role, "content": content})

    def output(self, status: str = RUNNING, result: Any = None) -> dict[str, Any]:
        return {"index": self.index, "status": status, "result": result,
                "history": [dict(item) for item in self.history]}

    async def action(self) -> dict[str, Any]:
        await self.to_agent.put(self.output())
        response = await self.from_agent.get()
        if response.get("status") == "cancelled":
            raise Cancelled()
        if self.raises:
            raise RuntimeError(f"sample {self.index} raised (--raise-at)")
        self.inject("agent", response.get("content") or "")
        return response


def worker_router(task_def: TaskDef, concurrency: int, raise_at: Any) -> APIRouter:
    router = APIRouter()
    sessions: dict[int, Session] = {}

    async def run(session_id: int, session: Session) -> None:
        try:
            finish: Finish = await task_def.play(int(session.index), session)
            final = session.output(finish.status, finish.result)
        except Cancelled:
            final = session.output("completed", {"cancelled": True})
        except Exception:  # noqa: BLE001 - reported as the sample's task error
            final = session.output("task error", traceback.format_exc())
        sessions.pop(session_id, None)
        await session.to_agent.put(final)

    async def answer(session_id: int, session: Session) -> dict[str, Any]:
        output = await session.to_agent.get()
        if output["status"] == "task error":
            raise HTTPException(501, {"session_id": session_id, "output": output})
        return {"session_id": session_id, "output": output}

    @router.post("/start_sample")
    async def start_sample(body: WorkerStart) -> dict[str, Any]:
        if body.session_id in sessions:
            raise HTTPException(400, "Session ID already exists")
        if len(sessions) >= concurrency:
            raise HTTPException(406, f"Sample concurrency limit reached: {concurrency}")
        if body.index not in task_def.indices:
            raise HTTPException(400, "Error: Index out of bounds")
        session = sessions[body.session_id] = Session(body.index, raises=body.index == raise_at)
        session.runner = asyncio.get_running_loop().create_task(run(body.session_id, session))
        return await answer(body.session_id, session)

    @router.post("/interact")
    async def interact(body: Interact) -> dict[str, Any]:
        session = sessions.get(body.session_id)
        if session is None:
            raise HTTPException(400, "No such session")
        if session.busy:
            raise HTTPException(400, "Task Executing, please do not send new request.")
        session.busy = True
        try:
            await session.from_agent.put(body.agent_response.model_dump())
            return await answer(body.session_id, session)
        finally:
            session.busy = False

    @router.post("/cancel")
    async def cancel(body: SessionRef) -> dict[str, Any]:
        session = sessions.get(body.session_id)
        if session is None:
            raise HTTPException(400, "No such session")
        await session.from_agent.put({"status": "cancelled", "content": None})
        if session.runner is not None:
            await asyncio.wait_for(asyncio.shield(session.runner), 30)
        return {"session_id": body.session_id}

    @router.get("/get_indices")
    async def get_indices() -> list:
        return task_def.indices

    @router.get("/get_sessions")
    async def get_sessions() -> dict[int, Any]:
        return {sid: s.index for sid, s in sessions.items()}

    @router.get("/worker_status")
    async def worker_status() -> dict[str, int]:
        return {"concurrency": concurrency, "current": len(sessions)}

    @router.post("/calculate_overall")
    async def calculate_overall(body: dict) -> dict[str, Any]:
        results = [r for r in body.get("results", []) if r]
        return {"total": len(results)}

    return router


async def heartbeat(controller: str, name: str, address: str, concurrency: int,
                    indices: list, every: float = 2.0) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        while True:
            try:
                await client.post(controller + "/receive_heartbeat", json={
                    "name": name, "address": address, "concurrency": concurrency, "indices": indices})
            except httpx.HTTPError as exc:
                print("heartbeat failed:", exc, flush=True)
            await asyncio.sleep(every)


# -- the controller -------------------------------------------------------------------------


def controller_router(preregistered: list[Heartbeat] = ()) -> APIRouter:
    """``preregistered``: workers known from the start (``stack``: so that the first
    sample never races the first heartbeat); their heartbeats then keep them alive."""
    router = APIRouter()
    tasks: dict[str, dict[str, Any]] = {}
    for beat in preregistered:
        workers = tasks.setdefault(beat.name, {"indices": beat.indices, "workers": {}})["workers"]
        workers[len(workers)] = {"id": len(workers), "address": beat.address, "capacity": beat.concurrency,
                                 "current": 0, "last_visit": time.time(), "status": 0}
    sessions: dict[int, dict[str, Any]] = {}
    next_id = iter(range(1 << 62))
    http = httpx.AsyncClient(timeout=240)

    async def call(worker: dict[str, Any], api: str, body: dict[str, Any]) -> Any:
        try:
            response = await http.post(worker["address"] + api, json=body)
        except httpx.HTTPError as exc:
            worker["status"] = 2  # DEAD
            raise HTTPException(400, "Error: Worker not responding\n" + str(exc)) from None
        if response.status_code != 200:
            raise HTTPException(response.status_code, "Error: Worker returned error\n" + response.text)
        return response.json()

    def finish(sid: int) -> None:
        session = sessions.pop(sid, None)
        if session is not None:
            session["worker"]["current"] -= 1

    @router.post("/receive_heartbeat")
    async def receive_heartbeat(body: Heartbeat) -> None:
        entry = tasks.setdefault(body.name, {"indices": body.indices, "workers": {}})
        if entry["indices"] != body.indices:
            raise HTTPException(400, "Error: Task already exists with different indices")
        for worker in entry["workers"].values():
            if worker["address"] == body.address:
                worker["last_visit"] = time.time()
                return
        wid = len(entry["workers"])
        entry["workers"][wid] = {"id": wid, "address": body.address, "capacity": body.concurrency,
                                 "current": 0, "last_visit": time.time(), "status": 0}

    @router.get("/list_workers")
    async def list_workers() -> dict[str, Any]:
        return tasks

    @router.get("/list_sessions")
    async def list_sessions() -> dict[int, Any]:
        return {sid: {"name": s["name"], "index": s["index"], "worker_id": s["worker"]["id"]}
                for sid, s in sessions.items()}

    @router.get("/get_indices")
    async def get_indices(name: str) -> list:
        if name not in tasks:
            raise HTTPException(400, "Error: Task does not exist")
        return tasks[name]["indices"]

    @router.post("/start_sample")
    async def start_sample(body: ControllerStart) -> Any:
        if body.name not in tasks:
            raise HTTPException(406, "Error: Task does not exist")
        if body.index not in tasks[body.name]["indices"]:
            raise HTTPException(400, "Error: Index out of bounds")
        alive = [w for w in tasks[body.name]["workers"].values() if w["status"] == 0]
        worker = max(alive, key=lambda w: w["capacity"] - w["current"], default=None)
        if worker is None or worker["capacity"] <= worker["current"]:
            raise HTTPException(406, "Error: No workers available")
        worker["current"] += 1
        sid = next(next_id)
        sessions[sid] = {"name": body.name, "index": body.index, "worker": worker}
        try:
            result = await call(worker, "/start_sample", {"index": body.index, "session_id": sid})
        except HTTPException:
            finish(sid)
            raise
        if result["output"]["status"] != RUNNING:
            finish(sid)
        return result

    @router.post("/interact")
    async def interact(body: Interact) -> Any:
        if body.session_id not in sessions:
            raise HTTPException(400, "Error: Session does not exist")
        session = sessions[body.session_id]
        try:
            result = await call(session["worker"], "/interact", body.model_dump())
        except HTTPException:
            finish(body.session_id)
            raise
        if result["output"]["status"] != RUNNING:
            finish(body.session_id)
        return result

    @router.post("/cancel")
    async def cancel(body: SessionRef) -> Any:
        if body.session_id not in sessions:
            raise HTTPException(400, "Error: Session does not exist")
        result = await call(sessions[body.session_id]["worker"], "/cancel", body.model_dump())
        finish(body.session_id)
        return result

    @router.post("/calculate_overall")
    async def calculate_overall(body: dict) -> Any:
        workers = tasks.get(body.get("name"), {}).get("workers", {})
        if not workers:
            raise HTTPException(400, "Error: Task does not exist")
        return await call(next(iter(workers.values())), "/calculate_overall", body)

    return router


# -- processes -------------------------------------------------------------------------------


def app_with(router: APIRouter) -> FastAPI:
    app = FastAPI()
    app.include_router(router, prefix="/api")
    return app


def serve(app: FastAPI, host: str, port: int) -> "asyncio.Future":
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    return asyncio.ensure_future(uvicorn.Server(config).serve())


async def main_async(args: argparse.Namespace) -> None:
    from pytest_agentgym.process.health import free_port

    running, beats = [], []
    controller = args.controller if args.role == "worker" else f"http://{args.host}:{args.port}/api"
    if args.role in ("worker", "stack"):
        for number, name in enumerate(args.tasks.split(",")):
            port = args.port if args.role == "worker" and number == 0 else free_port(args.host)
            task_def = task(name, args.max_step)
            running.append(serve(app_with(worker_router(task_def, args.concurrency, args.raise_at)),
                                 args.host, port))
            beats.append(Heartbeat(name=name, address=f"http://{args.host}:{port}/api",
                                   concurrency=args.concurrency, indices=task_def.indices))
    if args.role in ("controller", "stack"):
        running.append(serve(app_with(controller_router(beats)), args.host, args.port))
    running += [asyncio.ensure_future(heartbeat(controller, b.name, b.address, b.concurrency, b.indices))
                for b in beats]
    await asyncio.gather(*running)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("controller", "worker", "stack"), default="stack")
    parser.add_argument("--tasks", default="alfworld-std,webshop-std")
    parser.add_argument("--controller", default="http://127.0.0.1:5000/api")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-step", type=int, default=35)
    parser.add_argument("--raise-at", type=int, default=None)
    asyncio.run(main_async(parser.parse_args()))


def command(*extra: str) -> list[str]:
    """The argv (``{python}``, ``{host}``, ``{port}`` placeholders) for ManagedServer."""
    from pathlib import Path

    return ["{python}", str(Path(__file__).resolve()), "--host", "{host}", "--port", "{port}", *extra]


if __name__ == "__main__":
    main()
