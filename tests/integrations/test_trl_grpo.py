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
import re
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

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

DOC = REPO / "docs" / "trainer-formats.md"
NUM_GENERATIONS, BATCH, STEPS, MAX_TOKENS = 2, 4, 2, 24
TASKS = [0, 1, 2, 3, 4, 5, 6, 7]


def recipe() -> dict:
    """The doc's ``rollout_func`` block (the python block of the TRL section that defines
    it), run as written; its namespace."""
    section = DOC.read_text(encoding="utf-8").split("### TRL:", 1)[1].split("\n### ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, re.DOTALL) if "def rollout_func(" in b]
    assert len(blocks) == 1, "docs/trainer-formats.md's TRL section must hold one rollout_func block"
    namespace: dict = {"__name__": "trl_recipe"}
    exec(compile(blocks[0], f"{DOC}:rollout_func", "exec"), namespace)
    return namespace


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
def service(tmp_path_factory):
    server = rollout_server(tmp_path_factory.mktemp("trl") / "service", "--node", "local", "--concurrency", "4")
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
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
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
    assert logprobs == pytest.approx(_own_logprobs(model_dir, prompt, sampled), abs=1e-4)


def _own_logprobs(model_dir, prompt: list[int], completion: list[int], model=None) -> list[float]:
    """The model's log-softmax at each completion token, in one forward pass over the whole."""
    model = model or AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    own = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    return [float(own[i, token]) for i, token in enumerate(completion)]


def _spread(completion_ids, **kwargs):
    """A reward that differs within a group (the random model never wins Maze), so that the
    advantages and the policy loss are not all zero."""
    return [float(sum(ids) % 7) for ids in completion_ids]


def test_grpo_trainer_trains_on_one_multi_turn_rollout_per_entry_in_order(sampler, service, model_dir, tmp_path):
    namespace = recipe()
    namespace.update(SERVICE=service.url, SAMPLER=sampler.url, MODEL="tiny-qwen3", MAX_TOKENS=MAX_TOKENS)
    assert (namespace["ENV"], namespace["MAX_ROUND"]) == ("maze", 3)
    calls = []

    def watched(prompts, trainer):
        out = namespace["rollout_func"](prompts, trainer)
        calls.append((list(prompts), out, trainer.state.global_step))
        return out

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=BATCH,
                        num_generations=NUM_GENERATIONS, max_steps=STEPS, learning_rate=5e-3, logging_steps=1,
                        report_to="none", use_cpu=True, save_strategy="no", seed=0, bf16=False,
                        dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                          reward_funcs=[namespace["env_reward"], _spread], rollout_func=watched,
                          train_dataset=Dataset.from_dict({"prompt": [f"maze/{i}" for i in TASKS]}))
    trainer.train()

    assert trainer.state.global_step == STEPS and len(calls) == STEPS
    changed = [name for name, p in model.named_parameters() if not torch.equal(before[name], p.detach())]
    assert changed, "no parameter changed in two optimizer steps"
    for prompts, out, _ in calls:
        # TRL passed each prompt num_generations times in a row; one rollout came back per entry, in order
        assert len(prompts) == BATCH
        assert prompts[::NUM_GENERATIONS] == prompts[1::NUM_GENERATIONS]
        assert out["task_id"] == [int(p.split("/")[1]) for p in prompts]
        assert out["sample"] == [0] * BATCH and len(set(out["batch"])) == 1
        assert len(set(out["episode_id"])) == BATCH
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "rerendered"):
            assert len(out[key]) == BATCH, key
        for mask, turns, cut in zip(out["env_mask"], out["turn_rewards"], out["rerendered"]):
            assert len(turns) == 3  # three rounds played: multi-turn
            assert _spans(mask) == (3 if cut is None else cut)  # one sampled span per turn the sample holds
    # whole three-turn samples reached TRL, the environment's tokens between the turns masked out
    whole = [mask for _, out, _ in calls for mask, cut in zip(out["env_mask"], out["rerendered"]) if cut is None]
    assert whole and all(0 in mask for mask in whole)
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == STEPS
    for entry, (_, out, _) in zip(logged, calls):
        # env_mask reached TRL as its tool mask: the length it logs counts only the policy's tokens
        assert entry["completions/mean_length"] == pytest.approx(sum(map(sum, out["env_mask"])) / BATCH)
    # the first batch was sampled with the starting weights: its logprobs are theirs on the masked tokens
    first = calls[0][1]
    fresh = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for prompt, completion, mask, logprobs in zip(first["prompt_ids"], first["completion_ids"], first["env_mask"],
                                                  first["logprobs"]):
        own = _own_logprobs(model_dir, prompt, completion, fresh)
        assert [lp for lp, m in zip(logprobs, mask) if m] == pytest.approx([o for o, m in zip(own, mask) if m],
                                                                           abs=1e-3)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if not m)


def _spans(mask: list[int]) -> int:
    """How many runs of 1s ``mask`` holds."""
    return sum(1 for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1]))
