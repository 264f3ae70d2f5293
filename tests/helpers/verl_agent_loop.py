"""verl 0.9.1's own agent-loop code on our outputs; run under an interpreter that has verl.

    $AGENTGYM_VERL_PYTHON tests/helpers/verl_agent_loop.py < questions.json > answers.json

Questions and answers are JSON lists (one process: importing verl takes many seconds).
A question: ``{"whole": [...], "cut": [...], "prompt_length": P, "response_length": R,
"vocab_size": V, "pad_token_id": N}``, where ``whole`` are ``verl_agent_loop_outputs``
dicts without lengths and ``cut`` the same with ``prompt_length=P, response_length=R``.
Its answer:

* ``constructed``: ``AgentLoopOutput(**d).model_dump()`` for each ``cut`` dict (it must
  construct as is);
* ``verl_cut``: each ``whole`` dict cut by verl: the prompt by
  ``AgentLoopBase._cap_text_prompt_length`` itself, the response fields by
  tool_agent_loop.py's ``[: self.response_length]`` (inline there, so restated here);
* ``batch``: ``AgentLoopWorker._agent_loop_postprocess`` then ``_postprocess`` on the
  ``cut`` outputs, with a real Hugging Face tokenizer (``tokenizer.pad``) whose pad token
  is N: its tensors as lists, ``__num_turns__``, ``uid`` and ``metrics``.

Nothing here imports pytest_agentgym: the interpreter need not have it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from types import SimpleNamespace

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, AgentLoopWorker


def _tokenizer(vocab_size: int, pad_token_id: int) -> PreTrainedTokenizerFast:
    vocab = {f"t{i}": i for i in range(vocab_size)}
    model = Tokenizer(WordLevel(vocab, unk_token="t0"))
    return PreTrainedTokenizerFast(tokenizer_object=model, pad_token=f"t{pad_token_id}")


def _worker(config: SimpleNamespace, tokenizer: PreTrainedTokenizerFast) -> AgentLoopWorker:
    """An ``AgentLoopWorker`` with just what the two postprocess methods read: no LLM
    server, no reward workers (rewards are the outputs' own), no distillation, text only."""
    worker = AgentLoopWorker.__new__(AgentLoopWorker)
    worker.rollout_config = config
    worker.tokenizer = tokenizer
    worker.processor = None
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.mm_processor_kwargs = {}
    return worker


def _verl_cut(whole: dict, config: SimpleNamespace) -> dict:
    output = AgentLoopOutput(**whole)
    holder = SimpleNamespace(rollout_config=config)
    limit = config.response_length
    return AgentLoopOutput(
        prompt_ids=AgentLoopBase._cap_text_prompt_length(holder, output.prompt_ids),
        response_ids=output.response_ids[:limit],
        response_mask=output.response_mask[:limit],
        response_logprobs=output.response_logprobs[:limit] if output.response_logprobs else None,
        reward_score=output.reward_score, num_turns=output.num_turns, metrics=output.metrics,
        extra_fields=output.extra_fields).model_dump()


async def _batch(outputs: list[AgentLoopOutput], worker: AgentLoopWorker) -> dict:
    padded = [await worker._agent_loop_postprocess(o, False, raw_prompt=[]) for o in outputs]
    proto = worker._postprocess(padded, input_non_tensor_batch=None, validate=False)
    found = {key: proto.batch[key].tolist() for key in proto.batch.keys()}
    found["__num_turns__"] = proto.non_tensor_batch["__num_turns__"].tolist()
    found["uid"] = list(proto.non_tensor_batch["uid"])
    found["metrics"] = proto.meta_info["metrics"]
    return found


def _answer(question: dict) -> dict:
    config = SimpleNamespace(prompt_length=question["prompt_length"], response_length=question["response_length"])
    tokenizer = _tokenizer(question["vocab_size"], question["pad_token_id"])
    cut = [AgentLoopOutput(**d) for d in question["cut"]]
    return {
        "constructed": [o.model_dump() for o in cut],
        "verl_cut": [_verl_cut(d, config) for d in question["whole"]],
        "batch": asyncio.run(_batch(cut, _worker(config, tokenizer))),
    }


def main() -> None:
    json.dump([_answer(question) for question in json.load(sys.stdin)], sys.stdout)


if __name__ == "__main__":
    main()
