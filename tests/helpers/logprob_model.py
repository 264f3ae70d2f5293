"""A chat endpoint that answers like vLLM does when asked for per-token data.

It plays the lightweight environments with the reference agent's policies and,
when a request says ``logprobs: true``, adds ``choices[0].logprobs`` (one entry
per word of the reply, with ``top_logprobs`` alternatives when asked); with
``return_token_ids: true`` it adds ``choices[0].token_ids`` and the response's
``prompt_token_ids``, as vLLM does. Every value is a pure function of the
texts (:func:`token_data_for`), so a test can tell that what it got back is
exactly what the endpoint sent. ``GET /requests`` lists the message lists it
was sent, in order.

    python tests/helpers/logprob_model.py PORT
"""

# no `from __future__ import annotations`: FastAPI reads the annotations at runtime

import random
import sys
import time
import uuid
import zlib
from typing import Any

MODEL = "logprob-model"


def _token_id(word: str) -> int:
    return zlib.crc32(word.encode("utf-8")) % 151_000


def token_data_for(reply: str, messages: list[dict[str, str]], *, logprobs: bool, top: int | None,
                   token_ids: bool) -> dict[str, Any]:
    """What this endpoint sends beside ``reply``: {"choice": {...}, "body": {...}}."""
    choice: dict[str, Any] = {"logprobs": None}
    body: dict[str, Any] = {}
    words = reply.split()
    if logprobs:
        content = []
        for index, word in enumerate(words):
            entry: dict[str, Any] = {"token": word, "logprob": -round(0.01 * (index + len(word)), 4),
                                     "bytes": list(word.encode("utf-8"))}
            entry["top_logprobs"] = [{"token": word + "~" * k, "logprob": -float(k), "bytes": None}
                                     for k in range(top or 0)]
            content.append(entry)
        choice["logprobs"] = {"content": content}
    if token_ids:
        choice["token_ids"] = [_token_id(w) for w in words]
        body["prompt_token_ids"] = [_token_id(w) for m in messages for w in m["content"].split()]
    return {"choice": choice, "body": body}


def create_app() -> Any:
    from fastapi import FastAPI, Request

    from pytest_agentgym.model.reference.server import load_policies

    policies = load_policies()
    app = FastAPI()
    seen: list[list[dict[str, str]]] = []

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model"}]}

    @app.get("/requests")
    async def requests() -> list[list[dict[str, str]]]:
        return seen

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await request.json()
        messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        seen.append(messages)
        policy = policies.find(messages)
        reply = policy.reply(messages, random.Random(0)) if policy else "Action: look"
        extra = token_data_for(reply, messages, logprobs=bool(body.get("logprobs")),
                               top=body.get("top_logprobs"), token_ids=bool(body.get("return_token_ids")))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": MODEL, **extra["body"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                         "finish_reason": "stop", **extra["choice"]}],
            "usage": {"prompt_tokens": 10, "completion_tokens": len(reply.split()), "total_tokens": 0},
        }

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
