"""A checkpoint's own context length, read as vLLM reads it, and the profile's
``vllm.max_model_len`` lowered to it (with a note) before vLLM is started."""

from __future__ import annotations

import json

import pytest

from pytest_agentgym.model.checkpoint import ContextLimit, context_limit, fit_max_model_len
from pytest_agentgym.model.vllm import VLLMServer
from pytest_agentgym.model.vllm_options import VLLMOptions


def checkpoint(tmp_path, config=None, tokenizer=None, name="ckpt"):
    directory = tmp_path / name
    directory.mkdir()
    if config is not None:
        (directory / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if tokenizer is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return directory


@pytest.mark.parametrize("config,tokenizer,expected", [
    ({"model_type": "qwen3", "max_position_embeddings": 512}, None,
     ContextLimit(512, "config.json max_position_embeddings=512")),
    # the smallest of the length keys, as vLLM takes it
    ({"max_position_embeddings": 32768, "seq_length": 8192}, None,
     ContextLimit(8192, "config.json seq_length=8192")),
    ({"n_positions": 1024}, None, ContextLimit(1024, "config.json n_positions=1024")),
    # a model_max_length in the config wins, larger or not (Command-R)
    ({"max_position_embeddings": 8192, "model_max_length": 131072}, None,
     ContextLimit(131072, "config.json model_max_length=131072")),
    # the tokenizer's model_max_length caps it; transformers' "unset" sentinel does not
    ({"max_position_embeddings": 40960}, {"model_max_length": 2048},
     ContextLimit(2048, "tokenizer_config.json model_max_length=2048")),
    ({"max_position_embeddings": 40960}, {"model_max_length": 1e30},
     ContextLimit(40960, "config.json max_position_embeddings=40960")),
    # RoPE scaling multiplies, except for the types whose length is already scaled
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}, None,
     ContextLimit(16384, "config.json max_position_embeddings=4096 x RoPE scaling factor 4")),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, None,
     ContextLimit(131072, "config.json max_position_embeddings=131072")),
    ({"max_position_embeddings": 40960, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
     None, ContextLimit(40960, "config.json max_position_embeddings=40960")),
    # a multimodal checkpoint: the text model's config counts
    ({"model_type": "llava", "text_config": {"max_position_embeddings": 4096}}, None,
     ContextLimit(4096, "config.json max_position_embeddings=4096")),
    ({"model_type": "mystery"}, None, None),
])
def test_context_limit_reads_what_vllm_reads(tmp_path, config, tokenizer, expected):
    assert context_limit(checkpoint(tmp_path, config, tokenizer)) == expected


def test_a_larger_max_model_len_is_lowered_with_a_note(tmp_path):
    ckpt = checkpoint(tmp_path, {"max_position_embeddings": 512})
    options, note = fit_max_model_len(ckpt, VLLMOptions(max_model_len=16384, seed=3))
    assert options == VLLMOptions(max_model_len=512, seed=3)
    assert note == ("vllm.max_model_len 16384 lowered to 512, the checkpoint's own limit "
                    "(config.json max_position_embeddings=512); vLLM refuses a larger one")


@pytest.mark.parametrize("asked", [None, 256, 512])
def test_a_max_model_len_that_fits_or_is_unset_is_left_alone(tmp_path, asked):
    ckpt = checkpoint(tmp_path, {"max_position_embeddings": 512})
    assert fit_max_model_len(ckpt, VLLMOptions(max_model_len=asked)) == (VLLMOptions(max_model_len=asked), None)


def test_asking_vllm_for_a_longer_context_on_purpose_is_respected(tmp_path):
    ckpt = checkpoint(tmp_path, {"max_position_embeddings": 512})
    options = VLLMOptions(max_model_len=2048, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert fit_max_model_len(ckpt, options) == (options, None)


@pytest.mark.parametrize("config,said", [
    (None, "has no config.json"),
    ("{not json", "cannot be read as JSON"),
    ("[1, 2]", "is not a JSON object"),
    ({"model_type": "mystery"}, "names no context length"),
])
def test_a_checkpoint_that_cannot_be_checked_keeps_the_profile_value_and_says_so(tmp_path, config, said):
    ckpt = checkpoint(tmp_path, config)
    options, note = fit_max_model_len(ckpt, VLLMOptions(max_model_len=16384))
    assert options.max_model_len == 16384
    assert note.startswith("vllm.max_model_len 16384 not checked against the checkpoint") and said in note


def test_vllm_is_launched_with_the_lowered_value(tmp_path):
    ckpt = checkpoint(tmp_path, {"max_position_embeddings": 40960}, {"model_max_length": 512})
    server = VLLMServer(ckpt, VLLMOptions(python="/opt/vllm/bin/python", max_model_len=16384),
                        log_path=tmp_path / "vllm.log")
    argv = server.process.argv
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert server.notes[:1] == ["vllm.max_model_len 16384 lowered to 512, the checkpoint's own limit "
                            "(tokenizer_config.json model_max_length=512); vLLM refuses a larger one"]
