"""The HTTP face of the rollout service (FastAPI on uvicorn).

    POST /rollouts                 play a batch; answer when every rollout has finished
    POST /rollouts?stream=1        the same, as JSON lines, one per rollout as it finishes,
                                   then {"done": true, ...}
    POST /rollouts?async=1         202 with a job id at once
    GET  /rollouts/{job_id}        the job: status, counts, the rollouts finished so far
                   [?wait=S]       (wait up to S seconds, at most 60, for it to finish first)
    GET  /health                   the service: run directory, servers, rollouts in flight

A bad batch (unknown key or environment, an id out of range, an endpoint that
does not answer) is HTTP 400 with ``{"error": "<what is wrong and what to send>"}``;
a rollout that fails while it plays is an error inside its own answer.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator

from pytest_agentgym.rollouts.jobs import Jobs
from pytest_agentgym.rollouts.request import EXAMPLE, BadRollouts, RolloutBatch, parse_batch
from pytest_agentgym.rollouts.service import Pending, RolloutService

#: The longest ``GET /rollouts/{id}?wait=S`` holds a request, in seconds.
MAX_WAIT_S = 60.0


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("", "1", "true", "yes", "on")


def create_app(service: RolloutService, *, default_base_url: str | None = None) -> Any:
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.rollouts.endpoint import check_endpoint

    jobs = Jobs()
    http: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        http["client"] = httpx.AsyncClient()
        try:
            yield
        finally:
            await http["client"].aclose()
            await asyncio.to_thread(service.close)

    app = FastAPI(title="pytest-agentgym rollout service", lifespan=lifespan,
                  description="AgentGym episodes as scored conversations, for GRPO trainers.")

    def bad(message: str, status: int = 400) -> JSONResponse:
        return JSONResponse(status_code=status, content={"error": message})

    def facts(batch: RolloutBatch) -> dict[str, Any]:
        return {"run_id": service.run_id, "env": batch.spec.name, "model": batch.model}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {**service.health(), "jobs_running": jobs.running()}

    @app.post("/rollouts")
    async def rollouts(request: Request) -> Any:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return bad(f"the body is not JSON; send an object such as {EXAMPLE}")
        try:
            batch = parse_batch(body, service.node, default_base_url=default_base_url)
            api_key = read_api_key(service.api_key_env) if service.api_key_env else None
            await check_endpoint(http["client"], batch.base_url, batch.model, api_key)
        except (BadRollouts, ValueError) as exc:
            return bad(str(exc))
        pending = await asyncio.to_thread(service.submit, batch)
        if _flag(request.query_params.get("async")):
            job = jobs.add(pending, facts(batch))
            return JSONResponse(status_code=202, content={
                "job_id": job.id, "status": "running", "total": len(pending), "url": f"/rollouts/{job.id}",
                **facts(batch)})
        if _flag(request.query_params.get("stream")):
            return StreamingResponse(_lines(pending, facts(batch)), media_type="application/x-ndjson")
        await _finished(pending)
        return _json({**facts(batch), "rollouts": [item.answer() for item in pending]})

    @app.get("/rollouts/{job_id}")
    async def job(job_id: str, wait: float = 0.0) -> Any:
        found = jobs.get(job_id)
        if found is None:
            return bad(f"no job {job_id!r} here (jobs live as long as the service; the newest "
                       f"finished ones are kept); its rollouts are in {service.run_dir}/episodes.jsonl", 404)
        if wait > 0 and not found.done:
            await _finished(found.pending, timeout=min(wait, MAX_WAIT_S))
        return _json(found.view())

    return app


def _json(content: Any) -> Any:
    """A JSON answer encoded at once (FastAPI's own encoder walks every value first:
    a large batch's conversations cost it many milliseconds per rollout)."""
    from fastapi.responses import Response

    return Response(json.dumps(content, ensure_ascii=False), media_type="application/json")


async def _finished(pending: list[Pending], timeout: float | None = None) -> None:
    waits = [asyncio.wrap_future(item.future) for item in pending if not item.future.done()]
    if waits:
        await asyncio.wait(waits, timeout=timeout)


async def _lines(pending: list[Pending], facts: dict[str, Any]) -> AsyncIterator[bytes]:
    """One JSON line per rollout, in the order they finish, then a closing line."""
    async def one(item: Pending) -> Pending:
        with contextlib.suppress(BaseException):
            await asyncio.wrap_future(item.future)
        return item

    for next_done in asyncio.as_completed([one(item) for item in pending]):
        item = await next_done
        yield (json.dumps(item.answer()) + "\n").encode("utf-8")
    yield (json.dumps({"done": True, "rollouts": len(pending), **facts}) + "\n").encode("utf-8")


def serve(service: RolloutService, *, host: str, port: int, default_base_url: str | None = None,
          log_level: str = "warning") -> None:
    """Serve until interrupted (SIGINT/SIGTERM); the service is closed on the way out."""
    import uvicorn

    uvicorn.run(create_app(service, default_base_url=default_base_url), host=host, port=port,
                log_level=log_level, workers=1)
