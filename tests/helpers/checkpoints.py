"""Checkpoint directories for the default tier, which has no torch: the files vLLM
reads before it loads anything, with weights that are a valid safetensors file of one
tiny tensor. Good enough for the checks before a launch (model/checkpoint.py) and for
the stand-in vLLM (helpers/fake_vllm.py); the slow tier builds a real model
(helpers/tiny_qwen3.py).

    directory = write_checkpoint(tmp_path / "ckpt")                 # servable as far as files go
    broken = write_checkpoint(tmp_path / "b", tokenizer=False)      # no tokenizer

:func:`counting` wraps a stand-in interpreter so a test can tell whether vLLM's
server was ever started through it (:func:`servers_started`), and
:func:`vllm_package` writes a vLLM package that must never be imported, for the
architecture list read from the vLLM in use (model/vllm_archs.py).
"""

from __future__ import annotations

import json
import shlex
import stat
import struct
import sys
from pathlib import Path

#: the one tensor of the weights: 4 float32 zeros
TENSOR = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}


def safetensors_bytes(tensors: dict | None = None, data: bytes = b"\0" * 16) -> bytes:
    """A safetensors file: 8-byte little-endian header length, the JSON header, the data."""
    header = json.dumps({"__metadata__": {"format": "pt"}, **(tensors if tensors is not None else {"w": TENSOR})})
    encoded = header.encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def write_checkpoint(directory: Path, *, positions: int = 512, architectures: list | None = None,
                     weights: bool = True, tokenizer: bool = True, config: bool = True) -> Path:
    """A checkpoint directory with config.json (``architectures``, default Qwen3ForCausalLM),
    model.safetensors and a tokenizer (tokenizer.json, tokenizer_config.json); each part can be left out."""
    directory.mkdir(parents=True, exist_ok=True)
    if config:
        (directory / "config.json").write_text(json.dumps({
            "architectures": ["Qwen3ForCausalLM"] if architectures is None else architectures,
            "model_type": "qwen3", "max_position_embeddings": positions}))
    if weights:
        (directory / "model.safetensors").write_bytes(safetensors_bytes())
    if tokenizer:
        (directory / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
        (directory / "tokenizer_config.json").write_text(json.dumps({"model_max_length": positions}))
    return directory


def counting(python: Path) -> Path:
    """An interpreter beside ``python`` (the stand-in vLLM's) that runs it and first appends its
    arguments to ``calls`` in the same folder."""
    wrapper = python.parent / "counted-python"
    calls = shlex.quote(str(python.parent / "calls"))
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shlex.quote(str(python))} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


def servers_started(wrapper: Path) -> int:
    """How often :func:`counting`'s ``wrapper`` ran vLLM's server (not a probe of the interpreter)."""
    calls = wrapper.parent / "calls"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return sum(line.startswith("-m vllm.entrypoints.openai.api_server") for line in lines)


def vllm_package(root: Path, architectures: list[str], version: str = "9.9.9") -> Path:
    """An interpreter (this one, with ``root`` on its path) whose ``vllm`` registers
    ``architectures`` (and LlamaForCausalLM); importing that vllm writes ``root/imported``."""
    models = root / "site" / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    marker = root / "imported"
    (root / "site" / "vllm" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (root / "site" / "vllm" / "_version.py").write_text(f"__version__ = version = {version!r}\n")
    entries = "".join(f"    {name!r}: ('m', {name!r}),\n" for name in [*architectures, "LlamaForCausalLM"])
    (models / "registry.py").write_text(f"import torch\n_TEXT_GENERATION_MODELS = {{\n{entries}}}\n"
                                        f"_PREVIOUSLY_SUPPORTED_MODELS = {{'OldForCausalLM': '0.1.0'}}\n")
    python = root / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(root / 'site'))} "
                      f"exec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return python
