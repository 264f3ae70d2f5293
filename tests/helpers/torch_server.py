"""A small OpenAI-compatible server over a transformers causal LM, in vLLM 0.32's shapes.

    python tests/helpers/torch_server.py MODEL_DIR PORT [--served-model-name NAME] [--seed N]

It loads the model and its tokenizer from a local directory (tests/helpers/tiny_qwen3.py
builds one; nothing is downloaded) and samples from it on the CPU, one request at a time.
What it answers, each in the shape vLLM's OpenAI server gives it:

* ``GET /health`` (200, empty) and ``GET /v1/models`` (the served name, ``max_model_len``);
* ``POST /v1/chat/completions``: the messages rendered with the tokenizer's chat template
  (``add_generation_prompt``), then sampled. ``return_token_ids: true`` adds the rendered
  prompt's ids beside the choices (``prompt_token_ids``) and the sampled ids as
  ``choices[0].token_ids``, the end-of-turn id included when sampling stopped on it (the
  reply's text leaves it out, as vLLM's does). ``logprobs: true`` adds
  ``choices[0].logprobs.content[i].{token, logprob, bytes, top_logprobs}``;
* ``POST /tokenize``: ``{"model", "messages", "add_generation_prompt", "add_special_tokens"}``
  (the chat template's rendering) or ``{"model", "prompt"}`` ->
  ``{"count", "max_model_len", "tokens", "token_strs"}``;
* ``POST /v1/completions`` with a ``prompt`` of token ids (or text): ``logprobs: N`` adds
  ``choices[0].logprobs.{tokens, token_logprobs, top_logprobs, text_offset}``;
  ``return_token_ids: true`` adds ``choices[0].token_ids`` and ``choices[0].prompt_token_ids``.

Sampling honours ``temperature`` (0: greedy), ``top_p``, ``max_tokens`` (or
``max_completion_tokens``) and ``seed`` (without one, draws come from the server's own
generator, seeded by ``--seed``). A prompt that leaves no room for ``max_tokens`` is a 400
saying "This model's maximum context length is N tokens", as vLLM says it.

The logprobs are the model's own: the log-softmax of the raw logits at each position, at
temperature 1 and before top-p, whatever the request's sampling settings (what vLLM reports
in its default ``logprobs_mode``, ``raw_logprobs``). So a trainer that recomputes a sampled
token's logprob with the same weights gets the same number, up to float rounding.
"""

# no `from __future__ import annotations`: FastAPI reads the annotations at runtime

import argparse
import inspect
import threading
import time
import uuid
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from transformers import AutoModelForCausalLM, AutoTokenizer


class BadRequest(Exception):
    """A request this server refuses with HTTP 400 (vLLM's error shape)."""


class Sampler:
    """The model, its tokenizer, and one sampling loop over them (a lock: one request at a time)."""

    def __init__(self, directory: str, seed: int) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(directory)
        self.model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        self.max_model_len = int(self.model.config.max_position_embeddings)
        ends = self.model.generation_config.eos_token_id if self.model.generation_config else None
        ends = ends if ends is not None else self.tokenizer.eos_token_id
        self.stop_ids = set(ends if isinstance(ends, list) else [ends])
        self.generator = torch.Generator().manual_seed(seed)
        #: what forward() calls the key-value cache (transformers 5.2x: ``cache``; before: ``past_key_values``)
        self.cache_key = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self.lock = threading.Lock()

    def render(self, messages: Any, add_generation_prompt: bool = True, add_special_tokens: bool = False) -> list[int]:
        """The chat template's rendering of ``messages``, in ids."""
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
        plain = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages]
        text = self.tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=add_generation_prompt)
        return self.encode(text, add_special_tokens)

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])

    def sample(self, prompt: list[int], body: dict[str, Any]) -> dict[str, Any]:
        """Sample after ``prompt``: {"ids", "logprobs" (the model's own, per id), "top" (the
        ``top`` best alternatives at each position), "finish_reason"}."""
        if not prompt:
            raise BadRequest("the prompt is empty")
        if any(not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < self.model.config.vocab_size
               for t in prompt):
            raise BadRequest(f"the prompt holds a token id outside 0-{self.model.config.vocab_size - 1}")
        room = self.max_model_len - len(prompt)
        asked = body.get("max_tokens", body.get("max_completion_tokens"))
        if room <= 0 or (asked is not None and asked > room):
            raise BadRequest(f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                             f"requested {len(prompt) + (asked or 0)} tokens ({len(prompt)} in the messages, "
                             f"{asked or 0} in the completion). Please reduce the length of the messages or completion.")
        limit = room if asked is None else int(asked)
        temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        top_p = float(body.get("top_p") if body.get("top_p") is not None else 1.0)
        top = int(body.get("top_logprobs") or 0)
        generator = self.generator if body.get("seed") is None else torch.Generator().manual_seed(int(body["seed"]))
        ids: list[int] = []
        logprobs: list[float] = []
        tops: list[list[tuple[int, float]]] = []
        finish = "length"
        with self.lock, torch.no_grad():
            past = None
            step = torch.tensor([prompt])
            for _ in range(limit):
                out = self.model(input_ids=step, use_cache=True, **{self.cache_key: past})
                past = out[self.cache_key]
                logits = out.logits[0, -1].float()
                own = torch.log_softmax(logits, dim=-1)
                token = _draw(logits, temperature, top_p, generator)
                ids.append(token)
                logprobs.append(float(own[token]))
                if top:
                    values, indices = own.topk(top)
                    tops.append(list(zip(indices.tolist(), values.tolist())))
                if token in self.stop_ids:
                    finish = "stop"
                    break
                step = torch.tensor([[token]])
        return {"ids": ids, "logprobs": logprobs, "top": tops, "finish_reason": finish}

    def piece(self, token: int) -> str:
        return self.tokenizer.decode([token])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _draw(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> int:
    """One token from ``logits`` at ``temperature`` (0: the most likely) within ``top_p``."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        ordered, order = probs.sort(descending=True)
        before = ordered.cumsum(0) - ordered
        ordered[before >= top_p] = 0.0
        probs = torch.zeros_like(probs).scatter(0, order, ordered)
    return int(torch.multinomial(probs, 1, generator=generator))


def create_app(sampler: Sampler, name: str) -> FastAPI:
    app = FastAPI()

    @app.exception_handler(BadRequest)
    async def bad(_request: Request, exc: BadRequest) -> JSONResponse:
        return JSONResponse({"error": {"message": str(exc), "type": "BadRequestError", "param": None, "code": 400}},
                            status_code=400)

    def check(body: dict[str, Any]) -> None:
        if body.get("model") not in (None, name):
            raise BadRequest(f"The model `{body.get('model')}` does not exist; this server serves `{name}`")
        if body.get("n", 1) != 1:
            raise BadRequest("this server samples one choice per request ('n' must be 1)")

    @app.get("/health")
    def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "vllm", "root": name,
                                            "max_model_len": sampler.max_model_len}]}

    @app.post("/tokenize")
    async def tokenize(request: Request) -> dict[str, Any]:
        body = await request.json()
        check(body)
        if "messages" in body:
            tokens = sampler.render(body["messages"], bool(body.get("add_generation_prompt", True)),
                                    bool(body.get("add_special_tokens", False)))
        elif isinstance(body.get("prompt"), str):
            tokens = sampler.encode(body["prompt"], bool(body.get("add_special_tokens", True)))
        else:
            raise BadRequest("give 'messages' (a chat) or 'prompt' (a string) to tokenize")
        return {"count": len(tokens), "max_model_len": sampler.max_model_len, "tokens": tokens, "token_strs": None}

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> dict[str, Any]:
        check(body)
        prompt = sampler.render(body.get("messages"))
        got = sampler.sample(prompt, body)
        reply = sampler.tokenizer.decode(got["ids"], skip_special_tokens=True)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": reply},
                                  "finish_reason": got["finish_reason"], "logprobs": None}
        if body.get("logprobs"):
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            shown = (lambda t: f"token_id:{t}") if as_ids else sampler.piece
            choice["logprobs"] = {"content": [
                {"token": shown(t), "logprob": lp, "bytes": list(sampler.piece(t).encode("utf-8")),
                 "top_logprobs": [{"token": shown(a), "logprob": b, "bytes": list(sampler.piece(a).encode("utf-8"))}
                                  for a, b in (got["top"][i] if got["top"] else [])]}
                for i, (t, lp) in enumerate(zip(got["ids"], got["logprobs"]))]}
        answer: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
                                  "created": int(time.time()), "model": name, "choices": [choice],
                                  "usage": _usage(prompt, got["ids"])}
        if body.get("return_token_ids"):
            choice["token_ids"] = got["ids"]
            answer["prompt_token_ids"] = prompt
        return answer

    @app.post("/v1/completions")
    def completions(body: dict[str, Any]) -> dict[str, Any]:
        check(body)
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt = sampler.encode(prompt, True)
        if not isinstance(prompt, list):
            raise BadRequest("'prompt' must be a list of token ids or a string")
        got = sampler.sample(prompt, {"max_tokens": 16, **body, "top_logprobs": body.get("logprobs")})
        choice: dict[str, Any] = {"index": 0, "text": sampler.tokenizer.decode(got["ids"], skip_special_tokens=True),
                                  "finish_reason": got["finish_reason"], "logprobs": None}
        if body.get("logprobs") is not None:
            pieces = [sampler.piece(t) for t in got["ids"]]
            offsets = [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
            choice["logprobs"] = {"tokens": pieces, "token_logprobs": got["logprobs"], "text_offset": offsets,
                                  "top_logprobs": [{sampler.piece(a): b for a, b in alternatives}
                                                   for alternatives in got["top"]] or None}
        if body.get("return_token_ids"):
            choice["token_ids"] = got["ids"]
            choice["prompt_token_ids"] = prompt
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": name, "choices": [choice], "usage": _usage(prompt, got["ids"])}

    return app


def _usage(prompt: list[int], sampled: list[int]) -> dict[str, int]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(sampled),
            "total_tokens": len(prompt) + len(sampled)}


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("port", type=int)
    parser.add_argument("--served-model-name", default=None, help="the model's name (default: MODEL_DIR)")
    parser.add_argument("--seed", type=int, default=0, help="seeds draws for requests that send no seed")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sampler = Sampler(args.model_dir, args.seed)
    uvicorn.run(create_app(sampler, args.served_model_name or args.model_dir), host="127.0.0.1", port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
