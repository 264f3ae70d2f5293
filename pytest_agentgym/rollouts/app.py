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
a rollout that fails while it plays is an error inside its own answer. The
other refusals:

    401  the service was started with --auth-token-env and the request has no
         ``Authorization: Bearer <token>`` (rollouts/access.py; /health answers
         without it, saying only whether the service is up)
    403  the batch names a base_url off the service's allow-list (--base-url, the
         node's model endpoints, --allow-base-url): the service calls no other
         endpoint, with or without an API key, and the answer is the same whether
         or not anything listens there; or the request's Host is not one the
         service answers (transport/host_guard.py: DNS rebinding; --allow-host)
    413  a body longer than --max-request-bytes (read no further than that)
    415  a body sent as anything but Content-Type: application/json (a web page can
         post text/plain to any origin without asking first; JSON it cannot)
    429  the batch would take the rollouts queued past --max-queued; Retry-After says
         when to send it again
    503  the service is shutting down

An error message echoes what was sent only as a short prefix (request.shown).
No answer carries CORS headers: a page of another origin can neither read one nor
send a JSON body.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations at runtime

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator, Callable

from pytest_agentgym.rollouts.jobs import Jobs
from pytest_agentgym.rollouts.request import EXAMPLE, BadRollouts, RolloutBatch, parse_batch, shown
from pytest_agentgym.rollouts.service import Pending, QueueFull, RolloutService, ServiceStopping

#: The longest ``GET /rollouts/{id}?wait=S`` holds a request, in seconds.
MAX_WAIT_S = 60.0
#: The longest body ``POST /rollouts`` reads (``--max-request-bytes``): 10,000 ids and a
#: sampling object take well under 100 KB.
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("", "1", "true", "yes", "on")


def create_app(service: RolloutService, *, default_base_url: str | None = None,
               max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, auth: bool = False) -> Any:
    """The routes over ``service``. ``auth``: a :class:`~pytest_agentgym.rollouts.access.BearerAuth`
    wraps the app (:func:`serve` does), so /health answers in full only to callers it let through."""
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.rollouts.endpoint import check_endpoint, shown_url
    from pytest_agentgym.transport.proxies import async_http_client

    jobs = Jobs(keep_rollouts=service.max_queued)
    http: dict[str, httpx.AsyncClient] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        http["client"] = async_http_client()  # the plugin's proxy rule (transport.proxies.proxy_for)
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
    async def health(request: Request) -> dict[str, Any]:
        if auth and not request.scope.get("agentgym_authenticated"):
            return {"status": service.health()["status"]}  # the rest is for callers with the token
        return {**service.health(), "jobs_running": jobs.running()}

    def too_long(size: int | None) -> JSONResponse:
        said = f"has {size} bytes" if size is not None else "is longer than that"
        return bad(f"this service reads request bodies of at most {max_request_bytes} bytes "
                   f"(--max-request-bytes) and this one {said}; send fewer ids per batch (n gives each "
                   f"id several samples) or start the service with a larger --max-request-bytes", 413)

    async def read_body(request: Request) -> bytes | JSONResponse:
        """The body, read no further than ``max_request_bytes`` (413 past it)."""
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                return bad(f"Content-Length {shown(declared)} is not a number of bytes")
            if int(declared) > max_request_bytes:
                return too_long(int(declared))
        received = bytearray()
        async for chunk in request.stream():
            received += chunk
            if len(received) > max_request_bytes:  # a chunked body, or one longer than it said
                return too_long(None)
        return bytes(received)

    @app.post("/rollouts")
    async def rollouts(request: Request) -> Any:
        body = await read_body(request)
        if isinstance(body, JSONResponse):
            return body
        kind = request.headers.get("content-type")
        if not is_json(kind):
            return bad(f"this service reads a batch only as Content-Type: application/json, and this request was "
                       f"sent as {shown(kind) if kind is not None else 'no Content-Type'}; send the same JSON "
                       f"object with the header 'Content-Type: application/json'", 415)
        try:
            parsed = json.loads(body)
        except ValueError:
            return bad(f"the body is not JSON; send an object such as {EXAMPLE}")
        del body
        try:
            batch = parse_batch(parsed, service.node, default_base_url=default_base_url)
            if not service.key_allow_list.allows(batch.base_url):  # asked before anything is sent there
                return bad(f"base_url {shown_url(batch.base_url)} is not on this service's allow-list: it "
                           f"{service.key_allow_list.said(calls=True)}; if this endpoint is yours, start the "
                           f"service with --allow-base-url {shown_url(batch.base_url)}", 403)
            key_env = service.key_env_for(batch.base_url)
            api_key = read_api_key(key_env) if key_env else None
            await check_endpoint(http["client"], batch.base_url, batch.model, api_key)
        except (BadRollouts, ValueError) as exc:
            return bad(str(exc))
        try:
            pending = await asyncio.to_thread(service.submit, batch)
        except QueueFull as full:
            return JSONResponse(status_code=429, headers={"Retry-After": str(full.retry_after)}, content={
                "error": str(full), "queued": full.queued, "max_queued": full.limit, "asked": full.asked,
                "retry_after": full.retry_after})
        except BadRollouts as exc:
            return bad(str(exc))
        except ServiceStopping as exc:
            return bad(str(exc), 503)
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
            return bad(f"no job {shown(job_id)} here (jobs live as long as the service; the newest "
                       f"finished ones are kept); its rollouts are in {service.run_dir}/episodes.jsonl", 404)
        if wait > 0 and not found.done:
            await _finished(found.pending, timeout=min(wait, MAX_WAIT_S))
        return _json(found.view())

    return app


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON's: ``application/json``, with parameters or not."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


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
          auth_token: str | None = None, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
          log_level: str = "warning", on_ready: Callable[[int], None] | None = None,
          host_guard: Any = None) -> None:
    """Serve until interrupted (SIGINT/SIGTERM); the service is closed on the way out.

    ``on_ready(port)`` is called once the port accepts connections (the port bound, which
    ``port`` 0 leaves to the system). On SIGINT or SIGTERM the queued and playing rollouts
    are cancelled first (:meth:`RolloutService.stop`), so that requests waiting on them
    are answered and uvicorn's wait for open connections ends; then the app's shutdown
    closes the service. uvicorn then raises the signal again, as its default handler
    would have acted on it. ``host_guard``: the :class:`~pytest_agentgym.transport.host_guard.HostGuard`
    in front of everything (default: the one of ``host`` with no name added)."""
    import uvicorn

    from pytest_agentgym.rollouts.access import BearerAuth
    from pytest_agentgym.transport.host_guard import HostGuard, HostGuardASGI

    app = create_app(service, default_base_url=default_base_url, max_request_bytes=max_request_bytes,
                     auth=auth_token is not None)
    if auth_token is not None:
        app = BearerAuth(app, auth_token)
    app = HostGuardASGI(app, host_guard if host_guard is not None else HostGuard(host))  # before the token

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_ready is not None:
                on_ready(self.servers[0].sockets[0].getsockname()[1])

        async def shutdown(self, sockets: Any = None) -> None:
            await asyncio.to_thread(service.stop)
            await super().shutdown(sockets=sockets)

    Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1)).run()
