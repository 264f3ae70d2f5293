"""The reference agent's OpenAI-compatible HTTP server: a scripted reference
agent, not an LLM.

    pytest-agentgym reference-agent --port 8100 [--policy random] [--seed 0] [--latency-ms 50]

Endpoints:

* ``POST /v1/chat/completions``: OpenAI request and response shapes. The
  first policy whose ``recognizes(messages)`` is true answers with
  ``reply(messages, rng)``, or ``random_reply`` when the request's model is
  ``random`` or the server runs with ``--policy random`` (which then wins
  over a request for ``reference``). A conversation no
  policy recognises gets HTTP 400 with an OpenAI-style error body, so misuse
  is loud; so does a streaming request or ``n`` other than 1.
* ``POST /tokenize`` and ``POST /v1/completions`` with a token-id prompt, in vLLM's
  shapes (tokens.py): ``/tokenize`` renders a conversation (or a text) in the byte-level
  ids; ``/v1/completions`` reads a prompt's ids back into its conversation and answers it
  as the chat route would (the same policy, the same seeds), its ``max_tokens`` cutting the
  reply's ids (``finish_reason: length``). So token-in turns (model/token_turns.py) are
  tested end to end without a model.
* ``GET /v1/models``: the models ``reference`` and ``random``.
* ``GET /health``: ``{"status": "ok"}``.
* ``GET /``: what this server is, which policies loaded and which did not.

Anything else gets an OpenAI-style 404 (unknown path) or 405 (known path, other
method).

The app is a plain ASGI callable served by uvicorn, without a web framework:
the agent is launched at the start of every run that uses it, and importing
FastAPI would cost it about half a second before it can answer.

Determinism: the random generator of each reply is seeded from the server's
``--seed``, the request's ``seed`` (if any) and a SHA-256 of the conversation
(roles and contents), never Python's salted ``hash()``. The same conversation
therefore always gets the same reply.

Token counts in ``usage`` are whitespace-separated words: the prompt count
adds up the words of every message's content, the completion count is the
words of the reply. Asked for token ids or logprobs (``return_token_ids``,
``logprobs``), it answers them from a byte-level tokenizer (``tokens.py``), in
vLLM's shapes.

Policies are the modules in :data:`POLICY_MODULES`, each exposing ``POLICY``
(see ``base.py``), imported lazily; one that is missing is logged and skipped.
More can be added with ``AGENTGYM_REFERENCE_POLICIES``: comma-separated
``module`` or ``module:ATTRIBUTE`` entries (default attribute ``POLICY``),
tried before the built-in ones. The tests use this to register a test policy.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from pytest_agentgym.model.reference.base import Message, Policy
from pytest_agentgym.model.reference.tokens import (
    completion,
    completion_logprobs,
    decode,
    encode,
    parse,
    render,
    token_fields,
)

log = logging.getLogger("pytest_agentgym.reference_agent")

#: built-in policies, asked in this order
POLICY_MODULES = (
    "pytest_agentgym.model.reference.babyai",
    "pytest_agentgym.model.reference.textcraft",
    "pytest_agentgym.model.reference.maze",
    "pytest_agentgym.model.reference.wordle",
    "pytest_agentgym.model.reference.sqlgym",
    "pytest_agentgym.model.reference.alfworld",
    "pytest_agentgym.model.reference.webshop",
    "pytest_agentgym.model.reference.route_check",  # the chat that proves a route, answered
)

#: extra policies to load: "module[:ATTR],module[:ATTR]"
EXTRA_POLICIES_ENV = "AGENTGYM_REFERENCE_POLICIES"

MODELS = ("reference", "random")
#: The context of this server's ``/tokenize`` answers; ``/v1/completions`` refuses a longer prompt.
MAX_MODEL_LEN = 1 << 20
OWNED_BY = "pytest-agentgym (scripted reference agent, not an LLM)"


@dataclass
class PolicySet:
    """The policies that loaded, in the order they are asked, and what failed to load."""

    policies: list[Policy] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def find(self, messages: Sequence[Message]) -> Policy | None:
        for policy in self.policies:
            if policy.recognizes(messages):
                return policy
        return None


def _split_spec(spec: str) -> tuple[str, str]:
    module, _, attr = spec.strip().partition(":")
    return module, attr or "POLICY"


def load_policies(extra: str | None = None) -> PolicySet:
    """Import the extra policies named in ``extra`` (default: the environment
    variable), then the built-in ones; log and skip any that cannot be imported."""
    if extra is None:
        extra = os.environ.get(EXTRA_POLICIES_ENV, "")
    specs = [s for s in extra.split(",") if s.strip()] + list(POLICY_MODULES)
    loaded = PolicySet()
    for spec in specs:
        module_name, attr = _split_spec(spec)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                log.warning("reference agent: policy module %s is not there (yet); skipping it", module_name)
                loaded.missing.append(module_name)
                continue
            raise
        policy = getattr(module, attr, None)
        if policy is None:
            log.warning("reference agent: %s has no %s; skipping it", module_name, attr)
            loaded.missing.append(f"{module_name}:{attr}")
            continue
        loaded.policies.append(policy)
    return loaded


def conversation_seed(messages: Sequence[Message], seed: int, request_seed: int | None = None) -> int:
    """A stable 64-bit seed for this conversation (same text, same seed, same number)."""
    canonical = json.dumps(
        {"seed": seed, "request_seed": request_seed,
         "messages": [[str(m.get("role", "")), str(m.get("content", ""))] for m in messages]},
        ensure_ascii=False, separators=(",", ":"),
    )
    return int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "big")


def count_words(text: str) -> int:
    """The token rule of this server: whitespace-separated words."""
    return len(text.split())


def _content_text(content: Any) -> str:
    """A message's content as text (plain string, or OpenAI's list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


class _Answer:
    """A JSON answer: its HTTP status and body."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body


def _error(status: int, message: str, *, kind: str = "invalid_request_error",
           param: str | None = None, code: str | None = None) -> _Answer:
    return _Answer(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})


class ReferenceAgentApp:
    """The ASGI app. ``policy`` is the default mode ("reference" or "random")."""

    def __init__(self, policy: str = "reference", latency_ms: float = 0.0, seed: int = 0,
                 policies: PolicySet | None = None) -> None:
        if policy not in MODELS:
            raise ValueError(f"policy must be one of {', '.join(MODELS)}, got {policy!r}")
        self.policy, self.latency_ms, self.seed = policy, latency_ms, seed
        self.loaded = policies if policies is not None else load_policies()
        self.created = int(time.time())
        self.routes = {("GET", "/"): self.about, ("GET", "/health"): self.health,
                       ("GET", "/v1/models"): self.models, ("POST", "/v1/chat/completions"): self.chat,
                       ("POST", "/v1/completions"): self.completions, ("POST", "/tokenize"): self.tokenize}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        answer = await self.answer(scope["method"], scope["path"], body)
        payload = json.dumps(answer.body, ensure_ascii=False, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    async def answer(self, method: str, path: str, body: bytes) -> _Answer:
        route = path.rstrip("/") or "/"
        handler = self.routes.get((method, route))
        if handler is not None:
            return await handler(body)
        if any(known == route for _, known in self.routes):
            return _error(405, f"{method} is not allowed on {path}")
        return _error(404, f"no route {path} here; the reference agent serves "
                           f"{', '.join(f'{m} {p}' for m, p in self.routes)}", code="not_found")

    async def about(self, body: bytes) -> _Answer:
        return _Answer(200, {
            "name": "pytest-agentgym reference agent",
            "what": "scripted reference agent, not an LLM",
            "mode": self.policy,
            "seed": self.seed,
            "latency_ms": self.latency_ms,
            "policies": [p.name for p in self.loaded.policies],
            "missing": self.loaded.missing,
        })

    async def health(self, body: bytes) -> _Answer:
        return _Answer(200, {"status": "ok"})

    async def models(self, body: bytes) -> _Answer:
        return _Answer(200, {"object": "list", "data": [
            {"id": name, "object": "model", "created": self.created, "owned_by": OWNED_BY}
            for name in MODELS]})

    async def chat(self, raw: bytes) -> _Answer:
        body = _json_object(raw)
        if isinstance(body, _Answer):
            return body
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list of {role, content}", param="messages")
        messages = [{"role": str(m.get("role", "")), "content": _content_text(m.get("content"))}
                    for m in body["messages"] if isinstance(m, dict)]
        played = await self._play(body, messages)
        if isinstance(played, _Answer):
            return played
        text, model, chosen = played
        prompt_tokens = sum(count_words(m["content"]) for m in messages)
        completion_tokens = count_words(text)
        beside, in_choice = token_fields(body, messages, text)
        return _Answer(200, {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": f"reference-{chosen.name}",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": "stop", **in_choice}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
            **beside,
        })

    async def completions(self, raw: bytes) -> _Answer:
        """vLLM's ``/v1/completions`` with a token-id prompt: the ids read back into the
        conversation they render (tokens.py), answered by the policy as on the chat route;
        ``max_tokens`` cuts the reply's ids (the chat route does not cut)."""
        body = _json_object(raw)
        if isinstance(body, _Answer):
            return body
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not prompt or not all(type(t) is int for t in prompt):
            return _error(400, "'prompt' must be a non-empty list of token ids: the reference agent "
                               "takes token-id prompts only on /v1/completions", param="prompt")
        messages = parse(prompt)
        if messages is None:
            return _error(400, "the prompt's ids are not a conversation in the reference agent's "
                               "ChatML form, ending with the assistant's opening (POST /tokenize renders one)",
                          param="prompt")
        limit = body.get("max_tokens")
        if len(prompt) + (limit if type(limit) is int else 1) > MAX_MODEL_LEN:
            return _error(400, f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, "
                               f"you requested {len(prompt)} tokens in the prompt.", param="prompt")
        played = await self._play(body, messages)
        if isinstance(played, _Answer):
            return played
        text, model, chosen = played
        ids, finish = completion(text), "stop"
        if type(limit) is int and 0 < limit < len(ids):
            ids, finish = ids[:limit], "length"
            text = decode(ids)
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                                  "stop_reason": None}
        if type(body.get("logprobs")) is int:
            choice["logprobs"] = completion_logprobs(ids, body["logprobs"],
                                                     body.get("return_tokens_as_token_ids") is True)
        if body.get("return_token_ids") is True:
            choice.update(token_ids=ids, prompt_token_ids=prompt)
        prompt_tokens = sum(count_words(m["content"]) for m in messages)
        return _Answer(200, {
            "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": model, "system_fingerprint": f"reference-{chosen.name}", "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": count_words(text),
                      "total_tokens": prompt_tokens + count_words(text)}})

    async def tokenize(self, raw: bytes) -> _Answer:
        """vLLM's ``/tokenize``: a conversation rendered (``add_generation_prompt``, default
        true), or a plain ``prompt`` text, in this server's byte-level ids."""
        body = _json_object(raw)
        if isinstance(body, _Answer):
            return body
        if isinstance(body.get("messages"), list):
            messages = [{"role": str(m.get("role", "")), "content": _content_text(m.get("content"))}
                        for m in body["messages"] if isinstance(m, dict)]
            tokens = render(messages, add_generation_prompt=body.get("add_generation_prompt", True) is not False)
        elif isinstance(body.get("prompt"), str):
            tokens = encode(body["prompt"])
        else:
            return _error(400, "send 'messages' (a list of {role, content}) or 'prompt' (text) to tokenize",
                          param="messages")
        return _Answer(200, {"count": len(tokens), "max_model_len": MAX_MODEL_LEN, "tokens": tokens})

    async def _play(self, body: dict[str, Any],
                    messages: list[dict[str, str]]) -> tuple[str, str, Policy] | _Answer:
        """The policy's reply to ``messages`` (text, the model asked for, the policy), or the error
        answer; the same on every route, drawn from the conversation and the seeds."""
        model = body.get("model") or self.policy
        if model not in MODELS:
            return _error(404, f"the model {model!r} does not exist here; this scripted reference "
                               f"agent serves {', '.join(MODELS)}", param="model", code="model_not_found")
        if body.get("stream"):
            return _error(400, "streaming is not supported by the reference agent; send stream: false",
                          param="stream")
        if body.get("n", 1) != 1:
            return _error(400, "the reference agent gives exactly one choice; send n: 1", param="n")
        chosen = self.loaded.find(messages)
        if chosen is None:
            names = ", ".join(p.name for p in self.loaded.policies) or "none loaded"
            return _error(400, f"no reference policy recognises this conversation (policies: {names}); "
                               f"the reference agent plays only the environments it has a policy for, "
                               f"from their own observation text", param="messages", code="no_policy")
        request_seed = body.get("seed") if isinstance(body.get("seed"), int) else None
        rng = random.Random(conversation_seed(messages, self.seed, request_seed))
        randomly = model == "random" or self.policy == "random"
        try:
            text = chosen.random_reply(messages, rng) if randomly else chosen.reply(messages, rng)
        except Exception as exc:  # a bug in a policy: say which, keep serving
            log.exception("reference agent: policy %s failed", chosen.name)
            return _error(500, f"the {chosen.name} reference policy failed on this conversation: "
                               f"{type(exc).__name__}: {exc}", kind="server_error", code="policy_failed")
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000.0)
        return text, model, chosen


def _json_object(raw: bytes) -> dict[str, Any] | _Answer:
    """The request's JSON object, or the error answer saying what it is instead."""
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "the request body is not JSON")
    return body if isinstance(body, dict) else _error(400, "the request body must be a JSON object")


def run(host: str = "127.0.0.1", port: int = 8100, policy: str = "reference",
        latency_ms: float = 0.0, seed: int = 0, log_level: str = "warning") -> None:
    """Serve the reference agent in this process until interrupted (blocking)."""
    import uvicorn

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    app = ReferenceAgentApp(policy=policy, latency_ms=latency_ms, seed=seed)
    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
