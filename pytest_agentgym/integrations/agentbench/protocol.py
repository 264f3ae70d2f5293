"""AgentBench's task-server protocol, as its ``src/server`` code speaks it (v0.2).

AgentBench splits a task in two processes: a **controller** (default
``http://host:5000/api``) that knows the tasks and their workers, and one or more
**task workers** (``http://host:5001/api`` ...) that each run samples of one
task (``alfworld-std``, ``webshop-std``, ...) and send the controller a heartbeat.
An agent runs a sample like this::

    POST /start_sample {"name": "alfworld-std", "index": 3}     (controller)
    POST /start_sample {"index": 3, "session_id": 17}           (a worker: the caller
                                                                 picks the session id)
      -> {"session_id": 17, "output": {"index", "status": "running", "result", "history"}}
    POST /interact {"session_id": 17,
                    "agent_response": {"status": "normal", "content": "<reply>"}}
      -> {"session_id": 17, "output": {...}}   ... until status is not "running"
    POST /cancel {"session_id": 17}             (give a session up)

``history`` is the whole conversation the agent answers next, as
``[{"role": "user"|"agent", "content"}]``, cut by the worker to its length limit.
A finished sample's ``status`` says how it ended (:data:`FINISHED`) and ``result``
holds the task's own verdict (ALFWorld: ``{"result": true|false, ...}``; WebShop:
``{"reward": 0.75, "history": [...]}``).

Errors are HTTP statuses with FastAPI's ``{"detail": ...}``: 406 when the task is
unknown to the controller or no worker has room, 400 for an index out of bounds,
an unknown session or a session asked twice at once, 501 from a worker whose task
raised. :class:`AgentBenchClient` maps them onto the project's typed
:class:`~pytest_agentgym.envs.protocol.EnvServerError`\\ s, with the task and the
session named, so an episode's record says which side failed.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any, Literal

import httpx

from pytest_agentgym.envs.protocol import DEFAULT_REQUEST_TIMEOUT, EnvClient, EnvHTTPError

#: The last "SomeError: message" of a traceback in an error body (JSON-escaped or not).
_LAST_EXCEPTION = re.compile(r"([A-Z][\w.]*(?:Error|Exception): [^\\\"\n]{0,200})")

Target = Literal["controller", "worker"]
TARGETS = ("controller", "worker")

RUNNING = "running"
#: How a sample can end (``src/typings/status.py``), and what each means here:
#: a policy outcome (the episode is played and scored) or the task server's failure.
FINISHED = {
    "completed": "policy",
    "agent context limit": "policy",
    "agent validation failed": "policy",
    "agent invalid action": "policy",
    "task limit reached": "policy",
    "task error": "server",
    "unknown": "server",
}

#: Hints added to an HTTP error of the task server, by status.
_HINTS = {
    406: "the controller knows no such task, or none of its workers has room; "
         "GET <controller>/list_workers shows the tasks and their workers' capacity",
    400: "the task server refused the request (an index outside the task's, or a session "
         "it no longer has)",
    501: "the task worker's task raised while playing the sample; its log has the traceback",
}


class AgentBenchClient(EnvClient):
    """One AgentBench controller or task worker, for one task.

    ``base_url`` includes the ``/api`` prefix. Against a ``controller`` the task
    is named in ``/start_sample``; against a ``worker`` the client picks session
    ids itself (from a random start, so that runs sharing a worker do not clash).
    The episode loop's ``step`` is ``/interact`` and ``close`` is ``/cancel``,
    sent only for sessions still running.
    """

    def __init__(self, base_url: str, *, env: str, task: str, target: Target = "controller",
                 timeout: float = DEFAULT_REQUEST_TIMEOUT,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if target not in TARGETS:
            raise ValueError(f"environment {env}: options.target is {target!r}; use 'controller' "
                             "(AgentBench's task controller, port 5000) or 'worker' (one task worker)")
        if not isinstance(task, str) or not task:
            raise ValueError(f"environment {env}: options.task must name the AgentBench task, "
                             "e.g. alfworld-std or webshop-std")
        super().__init__(base_url, env=env, dialect="id", timeout=timeout, transport=transport)
        self.task = task
        self.target: Target = target
        self._session_ids = itertools.count(random.randrange(1 << 30))
        #: sessions started by this client and not yet finished or cancelled
        self.running: set[int] = set()
        self._last_error_text = ""

    # -- the protocol -----------------------------------------------------------------

    async def indices(self) -> list[Any]:
        """The task's sample indices (``GET /get_indices``)."""
        params = {"name": self.task} if self.target == "controller" else None
        body = await self._call("GET", "/get_indices", params=params)
        if not isinstance(body, list):
            raise self.bad_answer("/get_indices", f"expected a JSON list of indices, got {body!r:.200}")
        return body

    async def start_sample(self, index: int) -> tuple[int, dict[str, Any]]:
        """Start sample ``index``; the session id and the first output."""
        if self.target == "controller":
            body = {"name": self.task, "index": index}
        else:
            body = {"index": index, "session_id": next(self._session_ids)}
        answer = await self._call("POST", "/start_sample", json=body)
        session_id, output = self._read_answer(answer, "/start_sample")
        if output.get("status") == RUNNING:
            self.running.add(session_id)
        return session_id, output

    async def interact(self, session_id: int, content: str | None,
                       status: str = "normal") -> dict[str, Any]:
        """Send the agent's reply; the sample's next output."""
        answer = await self._call("POST", "/interact", env_id=session_id, json={
            "session_id": session_id, "agent_response": {"status": status, "content": content}})
        _, output = self._read_answer(answer, "/interact", session_id)
        if output.get("status") != RUNNING:
            self.running.discard(session_id)
        return output

    async def cancel(self, session_id: int) -> Any:
        self.running.discard(session_id)
        return await self._call("POST", "/cancel", env_id=session_id, json={"session_id": session_id})

    # -- what the episode loop calls ------------------------------------------------------

    async def step(self, env_id: int, action: str) -> Any:
        """One turn: the reply goes to ``/interact`` whole (the task parses it)."""
        return await self.interact(env_id, action)

    async def close(self, env_id: int) -> Any:
        """Cancel the session if it is still running (a finished one is gone already)."""
        if env_id in self.running:
            return await self.cancel(env_id)
        return None

    async def create(self, body: dict[str, Any] | None = None) -> int:
        raise NotImplementedError("AgentBench samples are started with start_sample(index)")

    # -- plumbing ----------------------------------------------------------------------------

    async def _call(self, method: str, endpoint: str, *, json: Any = None,
                    params: dict[str, Any] | None = None, env_id: int | None = None) -> Any:
        try:
            return await self.request(method, endpoint, json=json, params=params, env_id=env_id)
        except EnvHTTPError as exc:
            hint = _HINTS.get(exc.status_code)
            raised = _LAST_EXCEPTION.findall(self._last_error_text) if exc.status_code == 501 else []
            raise EnvHTTPError(
                f"task {self.task} ({self.target}): {exc.detail.split('; ')[0]}"
                + (f"; the task raised {raised[-1].strip()}" if raised else "")
                + (f"; {hint}" if hint else ""),
                status_code=exc.status_code, url=exc.url, endpoint=exc.endpoint, env=exc.env,
                env_id=exc.env_id) from exc

    async def _send(self, method: str, endpoint: str, json: Any, params: dict[str, Any] | None,
                    ctx: dict[str, Any]) -> httpx.Response:
        response = await super()._send(method, endpoint, json, params, ctx)
        if response.status_code >= 400:  # read when the error is raised, before any other await
            self._last_error_text = response.text
        return response

    def _read_answer(self, answer: Any, endpoint: str,
                     session_id: int | None = None) -> tuple[int, dict[str, Any]]:
        """``{"session_id": int, "output": {"status": str, "history": list, ...}}``."""
        output = answer.get("output") if isinstance(answer, dict) else None
        sid = answer.get("session_id") if isinstance(answer, dict) else None
        if not (isinstance(sid, int) and not isinstance(sid, bool) and isinstance(output, dict)
                and isinstance(output.get("status"), str)):
            raise self.bad_answer(endpoint, 'expected {"session_id": <int>, "output": {"status", '
                                      f'"history", ...}}}}, got {answer!r:.200}', session_id)
        status = output["status"]
        if status != RUNNING and status not in FINISHED:
            raise self.bad_answer(endpoint, f"unknown sample status {status!r}; AgentBench's are "
                                      f"{', '.join([RUNNING, *FINISHED])}", sid)
        return sid, output

