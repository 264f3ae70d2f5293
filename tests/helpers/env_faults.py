"""An AgentGym-shaped environment server that misbehaves when told to, run as a real process.

    python tests/helpers/env_faults.py --dialect id --host 127.0.0.1 --port 8123

It speaks either wire dialect (protocol sheet §0): ``id`` (``/create`` answers
``{"id": n}``, ``/reset`` a dict with observation, reward, score, done, like
BabyAI and SciWorld) or ``env_idx`` (``/create`` answers a bare int, ``/reset``
``[observation, null]``, ``/step`` ``{"state", "reward", "done", "info"}``, like
WebShop and SQLGym). Normal answers carry reward and score ``--step-reward``.

A test sets the fault before an episode with ``POST /_fault`` (JSON):

``{"on": "/step", "after": 1, "hang": true}``
    answer the first ``after`` requests to ``on`` normally, then accept the
    request and never answer (the connection stays open);
``{"on": "/step", "field": "reward", "raw": "NaN"}``
    answer ``on`` with ``field`` written as the raw JSON text ``raw`` (``NaN``,
    ``Infinity``, ``"1"``, ``true``: Python's json reads the first two too);
``{"step_reward": 0.25}``
    what normal answers carry as reward and score;
``{}``
    behave.

Every request is printed to stdout (the log of a ``ManagedServer``) as
``<METHOD> <path>``, so a test counts what reached the server. Hand-written over
``asyncio.start_server`` (HTTP/1.1, Content-Length bodies, one request per
connection) so that every byte and every stall is under the test's control.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

PLACEHOLDER = "__raw_json_value__"


class FaultyEnvServer:
    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.fault: dict[str, Any] = {}
        self.seen: dict[str, int] = {}
        self.next_id = 0

    # -- what a well-behaved server answers ---------------------------------------

    def normal(self, path: str) -> Any:
        reward = self.fault.get("step_reward", 0)
        if path == "/create":
            self.next_id += 1
            return {"id": self.next_id} if self.dialect == "id" else self.next_id
        if path == "/reset":
            if self.dialect == "env_idx":
                return ["WebShop [SEP] Instruction: [SEP] buy a mug [SEP] Search", None]
            return {"observation": "You are in a room. Your goal: reach the end.",
                    "task_description": "Reach the end.", "reward": 0, "score": 0,
                    "deleted": False, "done": False}
        if path == "/step":
            if self.dialect == "env_idx":
                return {"state": "Nothing happens.", "reward": reward, "done": False, "info": None}
            return {"observation": "Nothing happens.", "reward": reward, "score": reward,
                    "done": False}
        if path == "/observation":
            return "WebShop [SEP] Instruction: [SEP] buy a mug [SEP] Search"
        if path == "/close":
            return {"closed": True}
        return None

    # -- one request --------------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in
                       (line.split(":", 1) for line in lines[1:] if ":" in line)}
            raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            path = target.split("?")[0]
            print(f"{method} {path}", flush=True)
            if method == "POST" and path == "/_fault":
                self.fault, self.seen = json.loads(raw or b"{}"), {}
                return self.write(writer, 200, json.dumps({"fault": self.fault}))
            if method == "GET" and path == "/":
                return self.write(writer, 200, '"ok"')
            body = self.normal(path)
            if body is None:
                return self.write(writer, 404, '{"detail": "Not Found"}')
            count = self.seen[path] = self.seen.get(path, 0) + 1
            faulty = self.fault.get("on") == path and count > int(self.fault.get("after", 0))
            if faulty and self.fault.get("hang"):
                await asyncio.Event().wait()  # never answers; the process is killed at the end
            text = json.dumps(body)
            if faulty and self.fault.get("field"):
                body[self.fault["field"]] = PLACEHOLDER
                text = json.dumps(body).replace(json.dumps(PLACEHOLDER), self.fault["raw"])
            self.write(writer, 200, text)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def write(writer: asyncio.StreamWriter, code: int, text: str) -> None:
        data = text.encode()
        head = (f"HTTP/1.1 {code} {'OK' if code == 200 else 'Not Found'}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n")
        writer.write(head.encode("latin-1") + data)


async def serve(dialect: str, host: str, port: int) -> None:
    server = await asyncio.start_server(FaultyEnvServer(dialect).handle, host, port)
    async with server:
        await server.serve_forever()


def command(dialect: str = "id") -> list[str]:
    """The argv (with ``{python}``, ``{host}``, ``{port}`` placeholders) that runs this
    server, for :class:`pytest_agentgym.process.managed.ManagedServer`."""
    return ["{python}", str(Path(__file__).resolve()), "--dialect", dialect,
            "--host", "{host}", "--port", "{port}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialect", choices=("id", "env_idx"), default="id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    asyncio.run(serve(args.dialect, args.host, args.port))


if __name__ == "__main__":
    main()
