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


def render(messages: Sequence[Mapping[str, Any]], *, drop_reasoning: bool = False) -> list[int]:
    """The prompt ids of ``messages``, ending with the assistant's opening."""
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
    ids.append(IM_START)
    ids.extend(encode("assistant\n"))
    return ids


def completion(text: str) -> list[int]:
    """The ids sampled for a reply: its bytes and the end-of-turn token."""
    return encode(text) + [IM_END]


def logprob(token: int, position: int) -> float:
    """The log probability given to ``token`` at ``position`` of a reply."""
    return -((token * 31 + position * 7) % 97 + 1) / 100.0


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
