"""The launched-vLLM path without vLLM: a stand-in interpreter (tests/helpers/fake_vllm.py)
that either crashes like vLLM refusing a checkpoint or serves as the reference
agent. What a run shows and records: a failed launch once (header and log), each
item's error in a few lines; a lowered max_model_len and the start-up time in the
header and run.json. The real vLLM is the slow tier (tests/model/test_vllm_slow.py)."""

from __future__ import annotations

import json
import re

import psutil
import pytest

from helpers import fake_vllm
from helpers.checkpoints import write_checkpoint
from helpers.projects import episodes, make_project, run, suite
from pytest_agentgym.model.endpoint_settings import ModelSettings
from pytest_agentgym.model.endpoints import NoEndpointAvailable, choose_endpoint
from pytest_agentgym.model.launcher import error_line

pytestmark = pytest.mark.heavy

LOWERED = ("vllm.max_model_len 4096 lowered to 512, the checkpoint's own limit "
           "(config.json max_position_embeddings=512); vLLM refuses a larger one")


def small_checkpoint(root, positions=512):
    """A checkpoint the launcher's checks pass (helpers/checkpoints.py), of ``positions`` positions."""
    return write_checkpoint(root / "ckpt", positions=positions)


def run_on_cpu_node(pytester, monkeypatch, mode: str, tasks: str, *args: str):
    """The shipped ``cpu`` profile on a 512-position checkpoint, vLLM played by ``mode``."""
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", str(fake_vllm.install(pytester.path / "venv", mode)))
    make_project(pytester)
    suite(pytester, "wordle", f"environment: Wordle\ntasks: {tasks}\n")
    checkpoint = small_checkpoint(pytester.path)
    result = run(pytester, "suites", "--agentgym-node=cpu", f"--agentgym-checkpoint={checkpoint}", *args)
    return result, checkpoint


def launch_failure(tmp_path, mode: str, startup_timeout: float) -> NoEndpointAvailable:
    """What choose_endpoint raises for a vLLM (played by ``mode``) that does not come up."""
    python = fake_vllm.install(tmp_path / "venv", mode)
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "policy"}]},
        vllm={"python": str(python), "startup_timeout": startup_timeout}).with_checkpoint(small_checkpoint(tmp_path))
    with pytest.raises(NoEndpointAvailable) as caught:
        choose_endpoint(settings, log_dir=tmp_path / "logs")
    return caught.value


def error_sections(output: str) -> dict[str, list[str]]:
    """pytest's ERRORS section, item by item: name -> the lines under its banner."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        banner = re.match(r"_+ ERROR at setup of (\S+) _+$", line)
        if banner:
            current = sections.setdefault(banner.group(1), [])
        elif line.startswith(("=", "_")) or not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return sections


@pytest.mark.faults
def test_a_vllm_that_dies_at_start_is_reported_once_not_in_every_item(pytester, monkeypatch):
    result, _ = run_on_cpu_node(pytester, monkeypatch, "crash", "0-3", "--agentgym-run-id=dead")
    output = result.stdout.str()
    assert result.ret == 3, output  # infrastructure: nothing was played
    log = pytester.path / "reports" / "dead" / "logs" / "vllm.log"

    # the traceback: whole in the log, its last lines once above the items, nowhere else
    last_frame = fake_vllm.frame_line(fake_vllm.FRAMES - 1).strip()
    assert log.read_text().count(last_frame) == 1
    assert output.count(last_frame) == 1, output
    assert output.count("Traceback (most recent call last)") <= 1
    header = output[:output.index("collected")]
    assert "agentgym: NO MODEL ENDPOINT" in header and f"log: {log}" in header and last_frame not in header
    not_played = output[output.index("agentgym: NOT PLAYED: Wordle: no model endpoint"):output.index("environment  episodes")]
    assert fake_vllm.CRASH_ERROR[:60] in not_played and "exited with code 1 before it answered" in not_played
    assert last_frame in not_played and "agentgym: model endpoint primary vllm policy: vLLM on" in not_played
    assert "note: " + LOWERED in not_played  # what the launcher had changed, beside the log

    # every item: not played, counted in one line, no error section of its own
    assert error_sections(output) == {}, output
    result.stdout.fnmatch_lines(["*5 skipped*"])  # 4 episodes and the error-budget gate, NOT JUDGED

    records = episodes(pytester, "dead")
    assert len(records) == 4
    for record in records:
        assert record["error"]["where"] == "model" and record["error"]["type"] == "NoEndpointAvailable"
        assert "\n" not in record["error"]["message"]
    info = json.loads((pytester.path / "reports" / "dead" / "run.json").read_text())
    assert info["status"] == "no-episode-scored"
    assert len(info["notes"]) == 1 and "\n" not in info["notes"][0] and str(log) in info["notes"][0]


def test_the_cpu_profile_lowers_max_model_len_and_records_the_start_time(pytester, monkeypatch):
    result, checkpoint = run_on_cpu_node(pytester, monkeypatch, "serve", "0-2",
                                         "--agentgym-model=reference", "--agentgym-run-id=cpu")
    output = result.stdout.str()
    assert result.ret == 0, output
    result.stdout.fnmatch_lines(["agentgym: node cpu (*configs/nodes/cpu.yaml)*",
                                 "agentgym: model reference via vllm at http://127.0.0.1:*/v1",
                                 f"agentgym: endpoint: {LOWERED}",
                                 "agentgym: endpoint: vLLM started in * s (spawn to healthy)",
                                 "*3 passed*"])
    info = json.loads((pytester.path / "reports" / "cpu" / "run.json").read_text())
    assert info["notes"][0] == LOWERED
    assert info["notes"][1].startswith("vLLM dtype float32, the checkpoint's own")  # its weights are F32
    started = re.fullmatch(r"vLLM started in (\d+\.\d) s \(spawn to healthy\)", info["notes"][2])
    assert started and info["versions"]["vllm-startup-s"] == started.group(1)
    assert info["versions"]["vllm"] == "unknown"  # the stand-in has no GET /version
    assert info["endpoint_kind"] == "vllm" and info["checkpoint"] == str(checkpoint)
    args = (pytester.path / "reports" / "cpu" / "logs" / "vllm.log").read_text()
    assert "--max-model-len 512 " in args and "--enforce-eager" in args
    assert [r["prompt_tokens"] > 0 for r in episodes(pytester, "cpu")] == [True] * 3


def test_a_max_tokens_the_lowered_context_cannot_hold_is_noted_and_the_server_stops(tmp_path):
    python = fake_vllm.install(tmp_path / "venv", "serve")
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "reference"}], "sampling": {"max_tokens": 1024}},
        vllm={"python": str(python), "max_model_len": 16384, "startup_timeout": 60},
    ).with_checkpoint(small_checkpoint(tmp_path))
    chosen = choose_endpoint(settings, log_dir=tmp_path / "logs")
    try:
        pid = chosen.process.process.pid
        assert chosen.kind == "vllm" and chosen.startup_s > 0
        assert chosen.notes[0].startswith("vllm.max_model_len 16384 lowered to 512")
        assert chosen.notes[1].startswith("vLLM dtype ")  # tests/model/test_vllm_dtype.py
        assert chosen.notes[2] == f"vLLM started in {chosen.startup_s:.1f} s (spawn to healthy)"
        assert chosen.notes[3].startswith("sampling max_tokens 1024 is not below max_model_len 512: "
                                          "vLLM refuses every request")
    finally:
        chosen.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.faults
def test_a_failed_launch_keeps_the_log_tail_out_of_the_message(tmp_path):
    error = launch_failure(tmp_path, "crash", startup_timeout=60)
    assert "\n" not in str(error) and "fake_frame" not in str(error)
    assert error.notes == (f"primary vllm policy failed to start (vLLM on {tmp_path / 'ckpt'} exited with "
                           f"code 1 before it answered: {fake_vllm.CRASH_ERROR}; log: "
                           f"{tmp_path / 'logs' / 'vllm.log'})",)
    [detail] = error.details
    assert detail.startswith("primary vllm policy: vLLM on ") and "command: `" in detail
    assert fake_vllm.frame_line(fake_vllm.FRAMES - 1) in detail.splitlines()


@pytest.mark.faults
def test_a_vllm_that_never_answers_is_stopped_at_its_timeout_and_said_in_one_line(tmp_path):
    error = launch_failure(tmp_path, "hang", startup_timeout=2)
    [note] = error.notes
    assert note == (f"primary vllm policy failed to start (vLLM on {tmp_path / 'ckpt'} did not answer GET /health "
                    f"with HTTP 200 within 2 s and was stopped (raise vllm.startup_timeout if loading the "
                    f"checkpoint takes longer); log: {tmp_path / 'logs' / 'vllm.log'})")
    [detail] = error.details
    assert "fake vLLM: loading" in detail  # the log's tail, for the run's summary
    pid = int(re.search(r"pid (\d+)", (tmp_path / "logs" / "vllm.log").read_text()).group(1))
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("tail,line", [
    ("x\nTraceback (most recent call last):\n  File 'a'\nValueError: bad max_model_len\nshutdown\n",
     "ValueError: bad max_model_len"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n[rank0] exiting",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("RuntimeError: Engine core initialization failed. See root cause above.\n",
     "RuntimeError: Engine core initialization failed. See root cause above."),
    # vLLM 0.32 refusing a max_model_len: pydantic gives the reason on the lines below
    ("  File 'x.py', line 121, in __init__\n"
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
     "  Value error, User-specified max_model_len (4096) is greater than the derived max_model_len\n"
     "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n",
     "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig; Value error, "
     "User-specified max_model_len (4096) is greater than the derived max_model_len"),
    ("INFO 11-23 starting\nWARNING nothing wrong\n", None),
])
def test_error_line_finds_the_exception_a_log_ends_with(tail, line):
    assert error_line(tail) == line
