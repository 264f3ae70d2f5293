"""What every model call is sent with and how it is retried: :class:`Sampling`,
:class:`RetryPolicy`, and the API key read from the variable a profile names
(:func:`read_api_key`); plus :func:`reject_unknown_keys`, the check every
section of the ``model:``/``vllm:`` profile goes through.

No HTTP here: a profile can be read and checked without ``httpx`` or ``openai``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping

__all__ = ["PLACEHOLDER_API_KEY", "RetryPolicy", "Sampling", "read_api_key", "reject_unknown_keys"]

#: What the SDK is given when the endpoint needs no key (vLLM, Ollama, reference).
PLACEHOLDER_API_KEY = "EMPTY"


def reject_unknown_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str, *,
                        error: type[Exception] = ValueError, scope: str = "", hint: str = "") -> None:
    """Raise ``error`` when a profile section ``where`` has keys outside ``allowed``.

    The message lists them and the allowed ones, e.g. ``model.sampling: unknown
    key(s) temprature; allowed: max_tokens, ...``; ``scope`` qualifies the
    allowed list (`` for kind ollama``) and ``hint`` ends the message.
    """
    allowed = set(allowed)
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise error(f"{where}: unknown key(s) {', '.join(unknown)}{scope}; "
                    f"allowed: {', '.join(sorted(allowed))}{hint}")


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every request; ``None`` means "not sent",
    so the endpoint's own default applies."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    #: Ask for per-token log probabilities (OpenAI ``logprobs``, ``top_logprobs``).
    logprobs: bool | None = None
    top_logprobs: int | None = None
    #: Ask vLLM for the prompt's and the reply's token ids (sent in the body as is).
    return_token_ids: bool | None = None
    #: With ``return_token_ids``: false keeps every turn on the chat route instead of sending
    #: turns after the first as token ids where the endpoint can take them (model/token_turns.py).
    #: Not sent.
    token_in: bool | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "model.sampling") -> "Sampling":
        """Build from a profile's ``sampling:`` mapping; unknown keys are an error."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping such as {{temperature: 0.7, max_tokens: 1024}}, "
                             f"not {type(data).__name__}")
        reject_unknown_keys(data, (f.name for f in fields(cls)), where)
        values = dict(data)
        stop = values.get("stop")
        if isinstance(stop, str):
            values["stop"] = (stop,)
        elif stop is not None:
            values["stop"] = tuple(str(s) for s in stop)
        for key in ("logprobs", "return_token_ids", "token_in"):
            if values.get(key) is not None and not isinstance(values[key], bool):
                raise ValueError(f"{where}.{key} must be true or false, got {values[key]!r}")
        for key, kind in (("temperature", float), ("top_p", float), ("max_tokens", int), ("seed", int),
                          ("top_logprobs", int)):
            if values.get(key) is not None:
                try:
                    values[key] = kind(values[key])
                except (TypeError, ValueError):
                    raise ValueError(f"{where}.{key} must be a {kind.__name__}, got {values[key]!r}") from None
        return cls(**values)

    def request_params(self) -> dict[str, Any]:
        params = {f.name: getattr(self, f.name) for f in fields(self)}
        if params["stop"] is not None:
            params["stop"] = list(params["stop"])
        # return_token_ids is vLLM's, not OpenAI's: the body is posted as it is, so it goes in plain
        return {k: v for k, v in params.items() if v is not None and k != "token_in"}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. Backoff before retry n (1-based) is
    ``min(backoff_max, backoff_base * 2**(n-1))`` plus up to 10 % jitter."""

    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0

    def backoff(self, retry_number: int, rng: random.Random) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2 ** (retry_number - 1))
        return delay * (1.0 + 0.1 * rng.random())


def read_api_key(api_key_env: str | None) -> str:
    """The key in the variable named ``api_key_env``, or the placeholder when no
    variable is named. A named but unset variable is an error (never echoes a value)."""
    if not api_key_env:
        return PLACEHOLDER_API_KEY
    value = os.environ.get(api_key_env)
    if not value:
        raise ValueError(f"model.api_key_env names the environment variable {api_key_env}, "
                         f"but it is not set or empty; export {api_key_env}=<key> or set api_key_env: null")
    return value
