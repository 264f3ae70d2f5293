"""A fake OpenAI-compatible model server for the benchmarks: loopback only, cheap.

    python benchmarks/common/fake_model.py --port 8300 [--delay-ms 200] [--policy fixed|reference]
                                           [--action "move up"] [--max-seconds 900]

It answers ``POST /v1/chat/completions`` after a fixed delay (``--delay-ms``),
``GET /v1/models`` and ``GET /health``, on 127.0.0.1 only, over HTTP/1.1 with
keep-alive. It is a plain asyncio server (no web framework) so that its own CPU
stays small next to the harness it is measuring on the same machine.

Replies, in AgentGym's ``Thought: ... Action: ...`` form:

* ``fixed`` (default): always the same action (``--action``; Maze's
  ``move up`` by default), which every environment step accepts, so each
  episode runs its full ``max_rounds``: realistic for the harness's cost per
  step and deterministic, so two harnesses get the same rewards;
* ``reference``: the plugin's scripted reference policy for the conversation
  (plays to win; episodes may end before their rounds run out).

``GET /stats`` says how many chat requests were answered (not a one-token request: the
chat a run sends to prove the route before its servers are up), when the first was
asked and the last answered (``time.monotonic()``); ``POST /stats`` answers the same and resets them.

It prints ``READY <port>`` on stdout once it listens, and exits after
``--max-seconds`` at the latest (a bounded benchmark leaves nothing behind).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time

HOST = "127.0.0.1"


class Replies:
    def __init__(self, policy: str, action: str) -> None:
        self.policy = policy
        self.fixed = f"Thought:\nI go on.\n\nAction:\n{action}"
        self._policies = None
        if policy == "reference":
            from pytest_agentgym.model.reference.server import load_policies

            self._policies = load_policies()

    def reply(self, messages: list[dict[str, str]]) -> str:
        if self._policies is not None:
            policy = self._policies.find(messages)
            if policy is not None:
                return policy.reply(messages, random.Random(len(messages)))
        return self.fixed


class Stats:
    """Chat requests answered, and when the first was asked and the last answered
    (``time.monotonic()``, one clock for every process on the machine):
    ``GET /stats`` reads them, ``POST /stats`` starts them afresh."""

    def __init__(self) -> None:
        self.count = 0
        self.first: float | None = None
        self.last: float | None = None

    def answered(self, asked: float) -> None:
        self.count += 1
        self.first = asked if self.first is None else min(self.first, asked)
        self.last = time.monotonic()


STATS = Stats()


def _answer(status: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: keep-alive\r\n\r\n")
    return head.encode() + body


def completion(text: str, model: str, prompt_words: int) -> bytes:
    return json.dumps({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_words, "completion_tokens": len(text.split()),
                  "total_tokens": prompt_words + len(text.split())},
    }).encode()


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           replies: Replies, delay: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "POST" and path.split("?")[0].endswith("/chat/completions"):
                asked = time.monotonic()
                request = json.loads(body)
                messages = request.get("messages") or []
                if delay:
                    await asyncio.sleep(delay)  # the model "thinking"
                words = sum(len(str(m.get("content", "")).split()) for m in messages)
                out = _answer("200 OK", completion(replies.reply(messages), request.get("model", "fake"), words))
                if request.get("max_tokens") != 1:  # the one-token chat that proves a route is no episode's turn
                    STATS.answered(asked)
            elif path.startswith("/stats"):
                out = _answer("200 OK", json.dumps(STATS.__dict__).encode())
                if method == "POST":
                    STATS.__init__()  # answered with the figures before the reset
            elif path.split("?")[0].endswith("/models"):
                out = _answer("200 OK", json.dumps({"object": "list", "data": [
                    {"id": "fake", "object": "model", "owned_by": "benchmarks"}]}).encode())
            elif path.startswith("/health") or path == "/":
                out = _answer("200 OK", b'{"status": "ok"}')
            else:
                out = _answer("404 Not Found", b'{"error": {"message": "no such path"}}')
            writer.write(out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main(port: int, delay: float, replies: Replies, max_seconds: float) -> None:
    server = await asyncio.start_server(lambda r, w: serve_connection(r, w, replies, delay), HOST, port,
                                        backlog=1024)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        try:
            await asyncio.wait_for(server.serve_forever(), max_seconds)
        except asyncio.TimeoutError:
            pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--policy", choices=("fixed", "reference"), default="fixed")
    parser.add_argument("--action", default="move up")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.delay_ms / 1000.0, Replies(args.policy, args.action), args.max_seconds))
    sys.exit(0)
