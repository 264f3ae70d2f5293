"""A model turn's per-token data, in the one shape results/tokens.py reads.

A chat turn's data is what the endpoint sent, untouched (:func:`chat_token_data`): vLLM's
``prompt_token_ids`` beside the choices, ``choices[0].token_ids``, and the chat route's
``choices[0].logprobs.content``. A turn sent as token ids to vLLM's ``/v1/completions``
(model/token_turns.py) answers the same facts in that route's shapes: both id lists in the
choice, and logprobs as parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``);
:func:`completion_token_data` writes them as a chat turn's, so the token view is built the
same way whichever route a turn took. Plain data: no HTTP here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["TOKEN_DATA_KEYS", "chat_token_data", "completion_token_data"]

#: Per-token data an endpoint may send, passed through untouched: in the choice
#: (``logprobs``; vLLM's ``token_ids``) and beside it (vLLM's ``prompt_token_ids``,
#: ``prompt_logprobs``).
TOKEN_DATA_KEYS = {"choice": ("logprobs", "token_ids"), "body": ("prompt_token_ids", "prompt_logprobs")}

#: The key a turn's token data gets when the batch asked for ids: true when the turn's
#: prompt was sent as token ids (``/v1/completions``), false when it went through the chat route.
TOKEN_IN = "token_in"


def chat_token_data(body: Mapping[str, Any], choice: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a chat answer holds of :data:`TOKEN_DATA_KEYS` (null values left out); None if nothing."""
    data = {k: choice[k] for k in TOKEN_DATA_KEYS["choice"] if choice.get(k) is not None}
    data.update((k, body[k]) for k in TOKEN_DATA_KEYS["body"] if body.get(k) is not None)
    return data or None


def completion_token_data(body: Mapping[str, Any], choice: Mapping[str, Any],
                          sent: Sequence[int]) -> dict[str, Any]:
    """A ``/v1/completions`` answer's token data as a chat turn's, marked ``token_in: true``.
    The prompt ids are the ones the endpoint echoes (in the choice, as vLLM 0.32 puts them, or
    beside it), else ``sent``: the prompt was those ids either way."""
    prompt = choice.get("prompt_token_ids")
    if prompt is None:
        prompt = body.get("prompt_token_ids")
    data: dict[str, Any] = {"prompt_token_ids": list(sent) if prompt is None else prompt, TOKEN_IN: True}
    if choice.get("token_ids") is not None:
        data["token_ids"] = choice["token_ids"]
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping) and isinstance(logprobs.get("token_logprobs"), list):
        tokens = logprobs.get("tokens") or [None] * len(logprobs["token_logprobs"])
        tops = logprobs.get("top_logprobs") or [None] * len(tokens)
        data["logprobs"] = {"content": [
            {"token": token, "logprob": value,
             "top_logprobs": [{"token": k, "logprob": v} for k, v in (top or {}).items()]}
            for token, value, top in zip(tokens, logprobs["token_logprobs"], tops)]}
    return data
