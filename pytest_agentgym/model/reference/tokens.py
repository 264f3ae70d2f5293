"""Token ids for the reference agent: a byte-level tokenizer and a ChatML-style template.

Asked with ``return_token_ids: true`` (vLLM's request field) the reference agent
answers as vLLM does: the rendered prompt's ids in ``prompt_token_ids`` beside
the choices, the reply's ids in ``choices[0].token_ids``; asked with
``logprobs: true`` it adds ``choices[0].logprobs.content``, one entry per
reply token (``token_id:<id>`` as the token with ``return_tokens_as_token_ids``).
So a training pipeline's token handling can be tested end to end without a
model. The ids are not a language model's:

* ids 0-255 are the bytes of UTF-8 text, 256 is ``<|im_start|>``, 257 ``<|im_end|>``;
* a conversation renders as ChatML does: per message ``<|im_start|>`` role ``\\n``
  content ``<|im_end|>`` ``\\n``, then ``<|im_start|>assistant\\n`` to prompt a reply;
* a reply is its bytes and ``<|im_end|>`` (the end-of-turn token is sampled, as
  with a real model), so a template that renders history as it was sampled extends
  the previous prompt and reply exactly;
* a logprob is a fixed function of the token and its position (never 0), so an
  alignment error shows.

The server's ``/tokenize`` answers :func:`render` (with or without the generation
prompt); its ``/v1/completions`` reads a token-id prompt back into messages with
:func:`parse` and answers logprobs in that route's lists (:func:`completion_logprobs`).

:func:`render` can also drop the reasoning (``<think>...</think>``) of earlier
replies, as Qwen3's chat template does: the re-rendered history the token view
must detect.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

IM_START, IM_END = 256, 257
SPECIAL = {IM_START: "<|im_start|>", IM_END: "<|im_end|>"}
VOCAB_SIZE = 258

_REASONING = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: Sequence[int]) -> str:
    """The text of ``ids``, special tokens written out (``<|im_end|>``)."""
    out: list[str] = []
    run: list[int] = []
    for token in ids:
        if token in SPECIAL:
            out.append(bytes(run).decode("utf-8", "replace"))
            out.append(SPECIAL[token])
            run = []
        else:
            run.append(token)
    out.append(bytes(run).decode("utf-8", "replace"))
    return "".join(out)


def render(messages: Sequence[Mapping[str, Any]], *, drop_reasoning: bool = False,
           add_generation_prompt: bool = True) -> list[int]:
    """The prompt ids of ``messages``, ending with the assistant's opening (unless
    ``add_generation_prompt`` is false)."""
    ids: list[int] = []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    for index, message in enumerate(messages):
        content = str(message.get("content") or "")
        if drop_reasoning and message.get("role") == "assistant" and index < last_user:
            content = _REASONING.sub("", content)
        ids.append(IM_START)
        ids.extend(encode(f"{message.get('role', '')}\n{content}"))
        ids.append(IM_END)
        ids.extend(encode("\n"))
    if add_generation_prompt:
        ids.append(IM_START)
        ids.extend(encode("assistant\n"))
    return ids


def parse(ids: Sequence[int]) -> list[dict[str, str]] | None:
    """The messages of a prompt in :func:`render`'s form (ending with the assistant's
    opening), read back from its ids; None when ``ids`` are not such a prompt."""
    if not ids or ids[0] != IM_START:
        return None
    parts: list[list[int]] = []
    for token in ids:
        if token == IM_START:
            parts.append([])
        else:
            parts[-1].append(token)
    *whole, opening = parts
    if opening != encode("assistant\n"):
        return None
    messages = []
    for part in whole:
        if part[-2:] != [IM_END, *encode("\n")] or IM_END in part[:-2]:
            return None
        role, newline, content = bytes(part[:-2]).decode("utf-8", "replace").partition("\n")
        if not newline:
            return None
        messages.append({"role": role, "content": content})
    return messages


def completion(text: str) -> list[int]:
    """The ids sampled for a reply: its bytes and the end-of-turn token."""
    return encode(text) + [IM_END]


def logprob(token: int, position: int) -> float:
    """The log probability given to ``token`` at ``position`` of a reply."""
    return -((token * 31 + position * 7) % 97 + 1) / 100.0


def completion_logprobs(ids: Sequence[int], top: int, as_ids: bool) -> dict[str, Any]:
    """``/v1/completions``'s logprobs of a reply's ``ids``, in vLLM's parallel lists."""
    tokens = [f"token_id:{token}" if as_ids else decode([token]) for token in ids]
    values = [logprob(token, position) for position, token in enumerate(ids)]
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    return {"tokens": tokens, "token_logprobs": values, "text_offset": offsets,
            "top_logprobs": [{t: v} if top > 0 else None for t, v in zip(tokens, values)]}


def token_fields(body: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                 text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a request asking for token data adds: (fields beside the choices, fields of the choice)."""
    top, choice = {}, {}
    ids = completion(text)
    if body.get("return_token_ids") is True:
        top["prompt_token_ids"] = render(messages)
        choice["token_ids"] = ids
    if body.get("logprobs") is True:
        as_ids = body.get("return_tokens_as_token_ids") is True
        choice["logprobs"] = {"content": [
            {"token": f"token_id:{token}" if as_ids else decode([token]),
             "logprob": logprob(token, position),
             "bytes": list(SPECIAL[token].encode()) if token in SPECIAL else [token],
             "top_logprobs": []}
            for position, token in enumerate(ids)]}
    return top, choice
