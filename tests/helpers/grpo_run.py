"""TRL's GRPOTrainer through the rollout service with the docs' ``rollout_func``, and the
checks of what it trained on; shared by the default tier (a tiny Qwen3 behind
tests/helpers/torch_server.py, tests/integrations/test_trl_grpo.py) and the slow tier
(SmolLM2 behind vLLM on CPU, tests/integrations/test_trl_grpo_slow.py).

Import it only where trl is importable (it imports torch, transformers, trl and datasets)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from helpers import REPO
from helpers.masks import mask_spans

DOC = REPO / "docs" / "trainer-formats.md"


def recipe() -> dict:
    """The doc's ``rollout_func`` block (the python block of the TRL section that defines
    it), run as written; its namespace."""
    section = DOC.read_text(encoding="utf-8").split("### TRL:", 1)[1].split("\n### ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, re.DOTALL) if "def rollout_func(" in b]
    assert len(blocks) == 1, "docs/trainer-formats.md's TRL section must hold one rollout_func block"
    namespace: dict = {"__name__": "trl_recipe"}
    exec(compile(blocks[0], f"{DOC}:rollout_func", "exec"), namespace)
    return namespace


def own_logprobs(model_dir: Path, prompt: list[int], completion: list[int], model: Any = None) -> list[float]:
    """The model's log-softmax at each completion token, in one forward pass over the whole."""
    model = model or AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    own = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    return [float(own[i, token]) for i, token in enumerate(completion)]


def spread(completion_ids, **kwargs):
    """A reward that differs within a group (a weak model never wins Maze), so that the
    advantages and the policy loss are not all zero."""
    return [float(sum(ids) % 7) for ids in completion_ids]


def spans(mask: list[int]) -> int:
    """How many runs of 1s ``mask`` holds."""
    return len(mask_spans(mask))


@dataclass
class Training:
    """What one GRPOTrainer run through the service gave: the trainer, every
    ``(prompts, rollout_func output, step)`` call, and the parameters before training."""

    trainer: Any
    model: Any
    calls: list = field(default_factory=list)
    before: dict = field(default_factory=dict)


def train(*, service: str, sampler: str, model_name: str, model_dir: Path, output: Path, tasks: list[int],
          batch: int, num_generations: int, steps: int, max_tokens: int, learning_rate: float = 5e-3) -> Training:
    """GRPOTrainer (CPU, float32) on ``model_dir`` for ``steps`` optimizer steps, its
    ``rollout_func`` the doc's block with the addresses set."""
    namespace = recipe()
    namespace.update(SERVICE=service, SAMPLER=sampler, MODEL=model_name, MAX_TOKENS=max_tokens)
    assert (namespace["ENV"], namespace["MAX_ROUND"]) == ("maze", 3)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    run = Training(trainer=None, model=model,
                   before={name: p.detach().clone() for name, p in model.named_parameters()})

    def watched(prompts, trainer):
        out = namespace["rollout_func"](prompts, trainer)
        run.calls.append((list(prompts), out, trainer.state.global_step))
        return out

    config = GRPOConfig(output_dir=str(output), per_device_train_batch_size=batch,
                        num_generations=num_generations, max_steps=steps, learning_rate=learning_rate,
                        logging_steps=1, report_to="none", use_cpu=True, save_strategy="no", seed=0, bf16=False,
                        dataloader_num_workers=0)
    run.trainer = GRPOTrainer(model=model, processing_class=AutoTokenizer.from_pretrained(model_dir), args=config,
                              reward_funcs=[namespace["env_reward"], spread], rollout_func=watched,
                              train_dataset=Dataset.from_dict({"prompt": [f"maze/{i}" for i in tasks]}))
    run.trainer.train()
    return run


def check_trained(run: Training, *, batch: int, num_generations: int, steps: int) -> None:
    """The steps were taken and changed the weights; TRL passed each prompt ``num_generations``
    times in a row and got one three-turn rollout per entry, in order, the environment's
    tokens masked; its logged lengths count the masked tokens only."""
    assert run.trainer.state.global_step == steps and len(run.calls) == steps
    changed = [name for name, p in run.model.named_parameters() if not torch.equal(run.before[name], p.detach())]
    assert changed, f"no parameter changed in {steps} optimizer steps"
    for prompts, out, _ in run.calls:
        assert len(prompts) == batch
        assert prompts[::num_generations] == prompts[1::num_generations]
        assert out["task_id"] == [int(p.split("/")[1]) for p in prompts]
        assert out["sample"] == [0] * batch and len(set(out["batch"])) == 1
        assert len(set(out["episode_id"])) == batch
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "rerendered"):
            assert len(out[key]) == batch, key
        for mask, turns, cut in zip(out["env_mask"], out["turn_rewards"], out["rerendered"]):
            assert len(turns) == 3  # three rounds played: multi-turn
            assert spans(mask) == (3 if cut is None else cut)  # one sampled span per turn the sample holds
    whole = [mask for _, out, _ in run.calls for mask, cut in zip(out["env_mask"], out["rerendered"]) if cut is None]
    assert whole and all(0 in mask for mask in whole)
    logged = [entry for entry in run.trainer.state.log_history if "loss" in entry]
    assert len(logged) == steps
    for entry, (_, out, _) in zip(logged, run.calls):
        # env_mask reached TRL as its tool mask: the length it logs counts only the policy's tokens
        assert abs(entry["completions/mean_length"] - sum(map(sum, out["env_mask"])) / batch) < 1e-6


def logprob_differences(run: Training, model_dir: Path) -> list[float]:
    """|sampler's logprob - the starting float32 policy's| on every sampled token of the first
    batch (sampled with the starting weights); asserts the environment's tokens carry 0.0."""
    fresh = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    first = run.calls[0][1]
    differences = []
    for prompt, completion, mask, logprobs in zip(first["prompt_ids"], first["completion_ids"], first["env_mask"],
                                                  first["logprobs"]):
        own = own_logprobs(model_dir, prompt, completion, fresh)
        differences += [abs(lp - o) for lp, o, m in zip(logprobs, own, mask) if m]
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if not m)
    return differences
