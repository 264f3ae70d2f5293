"""What a checkpoint directory says about its own context length, and a
``vllm.max_model_len`` that fits it.

vLLM refuses to start when ``--max-model-len`` is larger than the length it
derives from the checkpoint ("User-specified max_model_len (16384) is greater
than the derived max_model_len ..."), after tens of seconds of imports. So the
launcher reads the same files first and lowers the profile's value, saying so:

    limit = context_limit("ckpt/step-1200")   # ContextLimit(512, "config.json max_position_embeddings=512")
    options, note = fit_max_model_len("ckpt/step-1200", VLLMOptions(max_model_len=16384))

The derivation follows vLLM 0.32 (``derive_max_model_len_and_key`` and
``_get_and_verify_max_len``): the smallest of the length keys of the text
config, replaced by the config's ``model_max_length`` when it has one, capped by
``tokenizer_config.json``'s ``model_max_length``, times the RoPE scaling factor
for the RoPE types whose length is not already scaled. Sliding-window and
encoder limits are not modelled: vLLM still checks those itself.

No pytest, no vllm, no transformers: plain JSON reading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from pytest_agentgym.model.vllm_options import VLLMOptions

__all__ = ["ContextLimit", "context_limit", "fit_max_model_len"]

#: the config keys vLLM reads for a model's length, in its order
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
#: RoPE types whose configured length is already the scaled one (vLLM does not multiply)
PRESCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
#: vLLM's switch for serving past the checkpoint's length on purpose
ALLOW_LONG_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


class CheckpointUnreadable(ValueError):
    """The checkpoint's ``config.json`` is missing or is not a JSON object."""


@dataclass(frozen=True)
class ContextLimit:
    """The most tokens (prompt and reply) a checkpoint takes, and where that was read."""

    tokens: int
    source: str


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointUnreadable(f"{path.parent} has no {path.name}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointUnreadable(f"{path} cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointUnreadable(f"{path} is not a JSON object")
    return data


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def _rope_factor(config: Mapping[str, Any]) -> float:
    """The factor vLLM multiplies the derived length by (1.0 for most models)."""
    if str(config.get("model_type", "")).startswith("gemma3"):
        return 1.0
    rope = config.get("rope_parameters") or config.get("rope_scaling")
    if not isinstance(rope, Mapping):
        return 1.0
    # one set of parameters, or one per attention kind ({"full_attention": {...}, ...})
    sets = [rope] if ("rope_type" in rope or "type" in rope or "factor" in rope) else \
        [v for v in rope.values() if isinstance(v, Mapping)]
    factor = 1.0
    for params in sets:
        if (params.get("rope_type") or params.get("type")) not in PRESCALED_ROPE:
            factor = _number(params.get("factor")) or factor
    return factor


def context_limit(checkpoint: str | os.PathLike[str]) -> ContextLimit | None:
    """The checkpoint's own context length as vLLM derives it; None when its
    config names none (vLLM then takes the profile's value as it is).
    Raises :class:`CheckpointUnreadable` when there is no readable ``config.json``."""
    directory = Path(checkpoint)
    config = _read_json(directory / "config.json")
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    found = {key: n for key in LENGTH_KEYS if (n := _number(text.get(key))) is not None}
    if not found:
        return None
    key = min(found, key=lambda k: found[k])
    if "model_max_length" in found:  # Command-R and Cohere: this one wins, larger or not
        key = "model_max_length"
    tokens, source = found[key], f"config.json {key}={found[key]:g}"
    try:
        tokenizer = _read_json(directory / "tokenizer_config.json")
    except CheckpointUnreadable:
        tokenizer = {}
    capped = _number(tokenizer.get("model_max_length"))
    if capped is not None and capped < tokens:
        tokens, source = capped, f"tokenizer_config.json model_max_length={capped:g}"
    factor = _rope_factor(text)
    if factor != 1.0:
        tokens, source = tokens * factor, f"{source} x RoPE scaling factor {factor:g}"
    return ContextLimit(int(tokens), source)


def fit_max_model_len(checkpoint: str | os.PathLike[str],
                      options: VLLMOptions) -> tuple[VLLMOptions, str | None]:
    """``options`` with ``max_model_len`` lowered to the checkpoint's limit when the
    profile asks for more, and a note for the report header saying what was done
    (or that the value could not be checked); ``(options, None)`` when nothing
    needs saying: no ``max_model_len`` (vLLM derives it), one that fits, a
    checkpoint that does not exist (the launcher reports that), or
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` set in ``vllm.env`` (asked for on purpose)."""
    asked = options.max_model_len
    if asked is None or not os.path.isdir(checkpoint) or options.env.get(ALLOW_LONG_ENV, "0") not in ("", "0"):
        return options, None
    try:
        limit = context_limit(checkpoint)
    except CheckpointUnreadable as exc:
        return options, f"vllm.max_model_len {asked} not checked against the checkpoint: {exc}"
    if limit is None:
        return options, (f"vllm.max_model_len {asked} not checked against the checkpoint: its config.json "
                         f"names no context length")
    if asked <= limit.tokens:
        return options, None
    return (replace(options, max_model_len=limit.tokens),
            f"vllm.max_model_len {asked} lowered to {limit.tokens}, the checkpoint's own limit "
            f"({limit.source}); vLLM refuses a larger one")
