"""The slow tier's vLLM interpreter, shared by its files (test_vllm_slow.py,
test_token_views_slow.py): ``$AGENTGYM_VLLM_PYTHON``, checked to import vLLM, else the
tests that need it skip and say why (docs/vllm-cpu.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from pytest_agentgym.model.vllm_options import VLLM_PYTHON_ENV


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
