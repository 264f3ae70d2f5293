"""vLLM serves a checkpoint in its own dtype unless the profile names one, with the logprobs
mode the profile sets; both are passed on vLLM's command line and said in the run header
and run.json. vLLM is played by tests/helpers/fake_vllm.py, which prints the arguments it
was started with and serves as the reference agent."""

from __future__ import annotations

import json

import pytest

from helpers import fake_vllm
from helpers.checkpoints import safetensors_bytes, write_checkpoint
from helpers.projects import make_project, run, suite
from pytest_agentgym.model.endpoint_settings import EndpointConfigError, ModelSettings
from pytest_agentgym.model.vllm import VLLMServer
from pytest_agentgym.model.vllm_options import VLLMOptions

MODE = "logprobs raw_logprobs (vllm.logprobs_mode)"


def checkpoint(root, config_dtype: dict | None = None, *, weights: str | None = "F32", name="ckpt"):
    """A checkpoint whose config.json has ``config_dtype``'s keys and whose safetensors
    tensor is of dtype ``weights`` (None: the weights are a pytorch_model.bin instead)."""
    directory = write_checkpoint(root / name, weights=weights is not None)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, **(config_dtype or {})}))
    if weights is not None:
        tensor = {"dtype": weights, "shape": [4], "data_offsets": [0, 16]}
        (directory / "model.safetensors").write_bytes(safetensors_bytes({"w": tensor}))
    else:
        (directory / "pytorch_model.bin").write_bytes(b"\0" * 64)
    return directory


def served(tmp_path, directory, **options) -> tuple[list[str], list[str]]:
    """Start the stand-in vLLM on ``directory``: the arguments it printed, and the server's notes."""
    python = fake_vllm.install(tmp_path / "venv", "serve")
    log = tmp_path / f"{directory.name}.log"
    server = VLLMServer(directory, VLLMOptions(python=str(python), served_model_name="reference",
                                               startup_timeout=60, **options), log_path=log)
    with server:
        notes = list(server.notes)
    [line] = [line for line in log.read_text().splitlines() if line.startswith("fake vLLM args: ")]
    return line.split()[3:], notes


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.parametrize("config,weights,dtype,source", [
    ({"torch_dtype": "float32"}, "BF16", "float32", "config.json torch_dtype=float32"),
    ({"dtype": "bfloat16"}, "F32", "bfloat16", "config.json dtype=bfloat16"),
    ({"text_config": {"torch_dtype": "float16"}}, "F32", "float16", "config.json text_config.torch_dtype=float16"),
    (None, "F32", "float32", "the *.safetensors tensors are F32"),
    (None, "BF16", "bfloat16", "the *.safetensors tensors are BF16"),
])
def test_vllm_is_given_the_checkpoints_own_dtype(tmp_path, config, weights, dtype, source):
    args, notes = served(tmp_path, checkpoint(tmp_path, config, weights=weights))
    assert flag(args, "--dtype") == dtype
    assert notes[0] == f"vLLM dtype {dtype}, the checkpoint's own ({source}; vllm.dtype auto); {MODE}"


def test_a_checkpoint_that_says_no_dtype_leaves_it_to_vllm_and_says_so(tmp_path):
    args, notes = served(tmp_path, checkpoint(tmp_path, None, weights=None))
    assert flag(args, "--dtype") == "auto"
    assert notes[0].startswith("vLLM dtype auto, vLLM chooses (a float32 checkpoint becomes bfloat16 on a CPU): "
                               "config.json names no dtype and no *.safetensors header says one; set vllm.dtype")


@pytest.mark.parametrize("asked,passed,warning", [
    ("bfloat16", "bfloat16", ": its logprobs are not the checkpoint's own"),
    ("float", "float32", ""),
])
def test_a_profiles_dtype_wins_over_the_checkpoints(tmp_path, asked, passed, warning):
    args, notes = served(tmp_path, checkpoint(tmp_path, {"torch_dtype": "float32"}), dtype=asked)
    assert flag(args, "--dtype") == passed
    assert notes[0] == (f"vLLM dtype {passed}, as vllm.dtype says; the checkpoint's is float32 (config.json "
                        f"torch_dtype=float32){warning}; {MODE}")


def test_the_logprobs_mode_is_passed_as_the_profile_sets_it(tmp_path):
    args, _ = served(tmp_path, checkpoint(tmp_path, {"torch_dtype": "float32"}, name="a"))
    assert flag(args, "--logprobs-mode") == "raw_logprobs"  # vLLM 0.32's default, passed to be recorded
    args, notes = served(tmp_path, checkpoint(tmp_path, {"torch_dtype": "float32"}, name="b"),
                         logprobs_mode="processed_logprobs")
    assert flag(args, "--logprobs-mode") == "processed_logprobs"
    assert notes[0].endswith("; logprobs processed_logprobs (vllm.logprobs_mode)")


@pytest.mark.parametrize("vllm,said", [
    ({"dtype": "fp8"}, "vllm.dtype 'fp8' is not one vLLM takes; write one of auto, half, float16, bfloat16, "
                       "float, float32"),
    ({"logprobs_mode": "processed"}, "vllm.logprobs_mode 'processed' is not one vLLM takes; write one of "
                                     "raw_logprobs, processed_logprobs, raw_logits, processed_logits"),
    ({"extra_args": "--dtype=float16"}, "vllm.extra_args has --dtype: set vllm.dtype instead"),
    ({"extra_args": ["--logprobs_mode", "raw_logits"]}, "vllm.extra_args has --logprobs-mode: set "
                                                         "vllm.logprobs_mode instead"),
])
def test_a_dtype_or_logprobs_mode_vllm_does_not_take_is_refused_with_the_fix(vllm, said):
    with pytest.raises(EndpointConfigError) as caught:
        ModelSettings.from_mapping({"endpoints": [{"kind": "vllm"}]}, vllm=vllm)
    assert said in str(caught.value)


@pytest.mark.heavy
def test_the_run_header_and_run_json_say_the_dtype_and_logprobs_mode(pytester, monkeypatch):
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", str(fake_vllm.install(pytester.path / "venv", "serve")))
    make_project(pytester)
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0\n")
    profile = (pytester.path / "node.yaml")
    profile.write_text("name: fp32\nmodel:\n  endpoints:\n    - {kind: vllm, model: reference}\n"
                       "vllm: {logprobs_mode: processed_logprobs, startup_timeout: 60}\n"
                       "limits: {max_rounds: 3, episode_timeout: 60, concurrency: 1}\nenvs: {servers: spawn}\n")
    directory = checkpoint(pytester.path, {"torch_dtype": "float32"}, weights="BF16")
    result = run(pytester, "suites", f"--agentgym-node={profile}", f"--agentgym-checkpoint={directory}",
                 "--agentgym-run-id=fp32")
    assert result.ret == 0, result.stdout.str()
    said = ("vLLM dtype float32, the checkpoint's own (config.json torch_dtype=float32; vllm.dtype auto); "
            "logprobs processed_logprobs (vllm.logprobs_mode)")
    result.stdout.fnmatch_lines([f"agentgym: endpoint: {said}"])
    info = json.loads((pytester.path / "reports" / "fp32" / "run.json").read_text())
    assert said in info["notes"]
    args = (pytester.path / "reports" / "fp32" / "logs" / "vllm.log").read_text()
    assert "--dtype float32 --logprobs-mode processed_logprobs" in args
