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

Before that, :func:`check_checkpoint` says in well under a second what vLLM would
otherwise find after a minute or three (a file for a directory, no ``config.json``,
an architecture vLLM does not serve, no weights, a shard missing, no tokenizer),
one :class:`Problem` per line with its fix:

    for problem in check_checkpoint("ckpt/step-1200", options):
        print(problem)   # ckpt/step-1200: no weights (*.safetensors, *.bin, *.pt); ...

No pytest, no vllm, no transformers: plain JSON reading (and the first bytes of
each ``*.safetensors`` file, its header).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from pytest_agentgym.model.vllm_archs import architectures
from pytest_agentgym.model.vllm_options import VLLMOptions

__all__ = ["ContextLimit", "Problem", "check_checkpoint", "context_limit", "fit_max_model_len"]

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


# --------------------------------------------------------------------------- before vLLM starts

#: where vLLM looks for weights, in its order (vLLM 0.32.0, load format auto: the first
#: pattern that matches wins), and the Trainer's files it leaves out
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")
#: index files that name every shard of a sharded checkpoint
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
#: load formats whose weights are the files above (others: dummy, gguf, tensorizer ... are not checked)
CHECKED_LOAD_FORMATS = (None, "auto", "hf", "safetensors", "fastsafetensors", "pt")
#: a safetensors header larger than this is not one (the format's own limit is 100 MB)
MAX_SAFETENSORS_HEADER = 100_000_000
SAVE_HINT = "save the model with save_pretrained(DIR), which writes config.json, the weights and their index"


@dataclass(frozen=True)
class Problem:
    """One reason vLLM would refuse a checkpoint: ``where`` (the checkpoint, or a file
    in it, as the user gave the path) and ``message`` (what is wrong and the fix)."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _flag(args: tuple[str, ...], name: str) -> str | bool | None:
    """The value of vLLM flag ``name`` in ``args`` (``--x V``, ``--x=V``, underscores
    or dashes), True for a flag without a value, None when absent."""
    for index, arg in enumerate(args):
        key, eq, value = arg.partition("=")
        if key.replace("_", "-") != name:
            continue
        if eq:
            return value
        following = args[index + 1] if index + 1 < len(args) else ""
        return following if following and not following.startswith("--") else True
    return None


def _config_problems(directory: Path, shown: str, python: str | None,
                     args: tuple[str, ...]) -> tuple[list[Problem], dict[str, Any] | None]:
    """config.json present, a JSON object, naming architectures vLLM serves."""
    path, where = directory / "config.json", os.path.join(shown, "config.json")
    if not path.is_file():
        return [Problem(shown, f"no config.json, so vLLM cannot tell what model this is; {SAVE_HINT}")], None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [Problem(where, f"is not valid JSON ({exc}); write it again with save_pretrained, or fix it "
                               f"by hand")], None
    if not isinstance(config, dict):
        return [Problem(where, f"is not a JSON object (it is a {type(config).__name__}); {SAVE_HINT}")], None
    if _flag(args, "--hf-overrides") is not None or _flag(args, "--model-impl") is not None:
        return [], config  # the architecture vLLM uses is not the file's
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        return [Problem(where, 'names no "architectures", so vLLM cannot pick a model class; add one, e.g. '
                               '"architectures": ["Qwen3ForCausalLM"] (save_pretrained of a *ForCausalLM '
                               'model writes it)')], config
    if any(key.startswith("AutoModel") for key in config.get("auto_map") or {}):
        return [], config  # its own code: vLLM's Transformers backend may serve it (--trust-remote-code)
    refused = architectures(python).refusal(names)
    if refused:
        return [Problem(where, f"{refused}; save the model as a class vLLM serves (e.g. Qwen3ForCausalLM, "
                               f"LlamaForCausalLM), or serve it with the vLLM that added it (vllm.python)")], config
    return [], config


def _safetensors_problem(path: Path, where: str) -> Problem | None:
    """A ``*.safetensors`` file whose header is unreadable or promises more bytes than it has."""
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            head = file.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if length < 0 or length > min(MAX_SAFETENSORS_HEADER, size - 8):
                header = None
            else:
                header = json.loads(file.read(length).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict):
        return Problem(where, "is not a safetensors file (no readable header): it was cut short or is "
                              "something else; copy or save it again")
    ends = [t["data_offsets"][1] for t in header.values() if isinstance(t, dict)
            and isinstance(t.get("data_offsets"), list) and len(t["data_offsets"]) == 2
            and isinstance(t["data_offsets"][1], int)]
    needed = 8 + length + max(ends, default=0)
    if needed > size:
        return Problem(where, f"is cut short: its header needs {needed} bytes, the file has {size}; "
                              f"copy or save it again")
    return None


def _weight_problems(directory: Path, shown: str, args: tuple[str, ...]) -> list[Problem]:
    """Weights vLLM would load, every shard an index names, safetensors headers whole."""
    load_format = _flag(args, "--load-format")
    if load_format not in CHECKED_LOAD_FORMATS:
        return []
    patterns = ("*.safetensors",) if load_format in ("safetensors", "fastsafetensors") else \
        ("*.pt",) if load_format == "pt" else WEIGHT_PATTERNS
    weights: list[Path] = []
    for pattern in patterns:
        weights = sorted(p for p in directory.glob(pattern) if p.name not in NOT_WEIGHTS)
        if weights:
            break
    if not weights:
        return [Problem(shown, f"no weights ({', '.join(patterns)}); was the checkpoint saved with "
                               f"save_pretrained? It writes model*.safetensors beside config.json")]
    problems = []
    for name in INDEX_FILES:
        index, where = directory / name, os.path.join(shown, name)
        if not index.is_file():
            continue
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
            problems.append(Problem(where, f"is not valid JSON ({exc}); {SAVE_HINT}"))
            continue
        if not isinstance(weight_map, dict):
            problems.append(Problem(where, f'has no "weight_map" of tensors to files; {SAVE_HINT}'))
            continue
        missing = sorted({str(f) for f in weight_map.values()} - {p.name for p in directory.iterdir()})
        if missing:
            listed = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            problems.append(Problem(where, f"names {len(missing)} shard(s) that are not there: {listed}; "
                                           f"an interrupted save or copy leaves this, copy them again"))
    for path in weights:
        if path.suffix == ".safetensors" and (problem := _safetensors_problem(path, os.path.join(shown, path.name))):
            problems.append(problem)
    return problems


def _tokenizer_problems(directory: Path, shown: str, args: tuple[str, ...]) -> list[Problem]:
    """Files a tokenizer loads from: tokenizer.json, or a vocabulary (vocab.json with
    merges.txt, tokenizer.model, vocab.txt, Mistral's tekken.json)."""
    if _flag(args, "--tokenizer") is not None or _flag(args, "--skip-tokenizer-init") is not None:
        return []
    have = {p.name for p in directory.iterdir()}
    problems = []
    tokenizer_config = directory / "tokenizer_config.json"
    if tokenizer_config.is_file():
        try:
            json.loads(tokenizer_config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(Problem(os.path.join(shown, "tokenizer_config.json"),
                                    f"is not valid JSON ({exc}); save the tokenizer again with "
                                    f"tokenizer.save_pretrained(DIR)"))
    if not ({"tokenizer.json", "tokenizer.model", "vocab.txt", "tekken.json"} & have
            or {"vocab.json", "merges.txt"} <= have):
        problems.append(Problem(shown, "no tokenizer (tokenizer.json, or tokenizer_config.json with vocab.json "
                                       "and merges.txt or tokenizer.model), so vLLM fails while loading it; save "
                                       "it beside the weights with tokenizer.save_pretrained(DIR), or name one "
                                       "with --tokenizer PATH in vllm.extra_args"))
    return problems


def check_checkpoint(checkpoint: str | os.PathLike[str], options: VLLMOptions | None = None) -> list[Problem]:
    """What vLLM would refuse in ``checkpoint`` (a local directory), each problem with
    its fix; empty when it looks servable. ``options``: how vLLM is started (its
    interpreter is asked which architectures it serves, :mod:`.vllm_archs`; flags in
    ``extra_args`` that change what is read, such as ``--tokenizer`` or
    ``--load-format``, are honoured). Without ``options`` the shipped list of
    architectures is used. Reads only small files and headers: well under a second."""
    shown, directory = str(checkpoint), Path(checkpoint)
    args = tuple(options.extra_args) if options is not None else ()
    if not directory.exists():
        return [Problem(shown, "does not exist; pass the directory save_pretrained wrote (config.json, "
                               "weights, tokenizer) with --agentgym-checkpoint PATH")]
    if directory.is_file():
        if directory.suffix == ".gguf":
            return []  # vLLM loads a single GGUF file
        parent = " (" + str(directory.parent) + ")" if (directory.parent / "config.json").is_file() else ""
        return [Problem(shown, f"is a file, not a directory; pass the directory that holds the checkpoint"
                               f"{parent}, with config.json, the weights and the tokenizer")]
    if not directory.is_dir():
        return [Problem(shown, "is not a directory; pass the directory save_pretrained wrote")]
    try:
        list(directory.iterdir())
    except OSError as exc:
        return [Problem(shown, f"cannot be read ({exc.strerror}); check its permissions")]
    if (directory / "params.json").is_file() and not (directory / "config.json").is_file():
        return _weight_problems(directory, shown, args)  # Mistral's own format: params.json, tekken.json
    python = options.interpreter() if options is not None else None
    problems, _ = _config_problems(directory, shown, python, args)
    return problems + _weight_problems(directory, shown, args) + _tokenizer_problems(directory, shown, args)
