"""TRL's GRPOTrainer (trl 1.16.0, CPU) trains through the rollout service with the docs' recipe.

Real parts: a tiny random-weight Qwen3 with its own BPE tokenizer, made here
(tests/helpers/tiny_qwen3.py); tests/helpers/torch_server.py serving it over HTTP in vLLM's
shapes; ``pytest-agentgym rollout-server`` playing Maze on its embedded server with three
rounds a rollout; and GRPOTrainer calling the ``rollout_func`` of docs/trainer-formats.md
("TRL"), read from the doc's code block and run as written there, with only its addresses
set. The sampler keeps the starting weights (no weight sync without vLLM), which is what
the logprob check below relies on.

Needs the ``trl`` extra (``pip install -e '.[test,trl]'``): skipped without trl, failed
instead where ``AGENTGYM_REQUIRE_TRL=1`` (CI sets it)."""

from __future__ import annotations

import os
import sys

import httpx
import pytest
from helpers import HELPERS, REPO, pythonpath
from helpers.rollout_services import rollout_server

from pytest_agentgym.process.managed import ManagedServer

pytestmark = pytest.mark.heavy

if os.environ.get("AGENTGYM_REQUIRE_TRL") == "1":  # CI: a missing extra is a failure, not a skip
    try:
        import trl  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"AGENTGYM_REQUIRE_TRL=1 but trl cannot be imported ({exc}): "
                          "pip install -e '.[test,trl]'") from exc
else:
    pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[test,trl]'")

from helpers import grpo_run  # noqa: E402  (imports torch, transformers and trl)

NUM_GENERATIONS, BATCH, STEPS, MAX_TOKENS = 2, 4, 2, 24
TASKS = [0, 1, 2, 3, 4, 5, 6, 7]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    sys.path.insert(0, str(HELPERS))
    try:
        import tiny_qwen3
    finally:
        sys.path.remove(str(HELPERS))
    return tiny_qwen3.build(tmp_path_factory.mktemp("tiny-qwen3") / "model", max_positions=4096)


@pytest.fixture(scope="module")
def sampler(model_dir, tmp_path_factory):
    logs = tmp_path_factory.mktemp("sampler")
    server = ManagedServer("torch-server", command=[sys.executable, str(HELPERS / "torch_server.py"), str(model_dir),
                                                   "{port}", "--served-model-name", "tiny-qwen3"],
                           log_path=logs / "torch-server.log", startup_timeout=180, label="torch-server",
                           env={"PYTHONPATH": pythonpath(REPO)}).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory, sampler):
    """The service, started as the docs' recipe says: with the sampler its batches name allow-listed."""
    server = rollout_server(tmp_path_factory.mktemp("trl") / "service", "--node", "local", "--concurrency", "4",
                            "--allow-base-url", sampler.url)
    yield server
    server.stop()


def test_the_sampler_answers_in_vllms_shapes_with_the_models_own_logprobs(sampler, model_dir):
    messages = [{"role": "user", "content": "Go to the red ball."}]
    base = {"model": "tiny-qwen3", "max_tokens": 6, "seed": 5, "temperature": 1.0}
    chat = httpx.post(f"{sampler.url}/v1/chat/completions", timeout=60,
                      json={**base, "messages": messages, "return_token_ids": True, "logprobs": True}).json()
    again = httpx.post(f"{sampler.url}/v1/chat/completions", timeout=60,
                       json={**base, "messages": messages, "return_token_ids": True}).json()
    tokenized = httpx.post(f"{sampler.url}/tokenize", timeout=60,
                           json={"model": "tiny-qwen3", "messages": messages, "add_generation_prompt": True}).json()
    prompt, sampled = chat["prompt_token_ids"], chat["choices"][0]["token_ids"]
    assert tokenized["tokens"] == prompt and tokenized["count"] == len(prompt) and tokenized["max_model_len"] == 4096
    assert again["choices"][0]["token_ids"] == sampled  # same seed, same draws
    tokenizer = grpo_run.AutoTokenizer.from_pretrained(model_dir)
    assert tokenizer.decode(prompt) == tokenizer.apply_chat_template(messages, tokenize=False,
                                                                     add_generation_prompt=True)
    logprobs = [entry["logprob"] for entry in chat["choices"][0]["logprobs"]["content"]]
    assert len(logprobs) == len(sampled)
    if sampled[-1] == tokenizer.eos_token_id:  # stopped on the end-of-turn id, which the ids keep
        assert chat["choices"][0]["finish_reason"] == "stop" and tokenizer.eos_token not in chat["choices"][0][
            "message"]["content"]
    else:
        assert chat["choices"][0]["finish_reason"] == "length" and len(sampled) == 6
    completion = httpx.post(f"{sampler.url}/v1/completions", timeout=60,
                            json={**base, "prompt": prompt, "logprobs": 1, "return_token_ids": True}).json()
    choice = completion["choices"][0]
    assert choice["prompt_token_ids"] == prompt and choice["token_ids"] == sampled  # the same draws, token in
    assert choice["logprobs"]["token_logprobs"] == pytest.approx(logprobs, abs=1e-5)
    assert logprobs == pytest.approx(grpo_run.own_logprobs(model_dir, prompt, sampled), abs=1e-4)


def test_grpo_trainer_trains_on_one_multi_turn_rollout_per_entry_in_order(sampler, service, model_dir, tmp_path):
    run = grpo_run.train(service=service.url, sampler=sampler.url, model_name="tiny-qwen3", model_dir=model_dir,
                         output=tmp_path / "out", tasks=TASKS, batch=BATCH, num_generations=NUM_GENERATIONS,
                         steps=STEPS, max_tokens=MAX_TOKENS)
    grpo_run.check_trained(run, batch=BATCH, num_generations=NUM_GENERATIONS, steps=STEPS)
    # the first batch was sampled with the starting weights: its logprobs are theirs on the masked tokens
    differences = grpo_run.logprob_differences(run, model_dir)
    assert differences and max(differences) <= 1e-3
