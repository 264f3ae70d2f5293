"""Build a tiny random-weight Qwen3 checkpoint with its own tokenizer, offline.

    python tests/helpers/tiny_qwen3.py OUTPUT_DIR [MAX_POSITIONS]

Run it with an interpreter that has ``torch``, ``transformers`` and
``tokenizers`` (the vLLM venv: ``$AGENTGYM_VLLM_PYTHON tests/helpers/tiny_qwen3.py DIR``).
The result is a real Hugging Face checkpoint directory (config.json,
model.safetensors, tokenizer.json, tokenizer_config.json with a ChatML chat
template, generation_config.json) that vLLM can serve; its replies are
random tokens, which is all a launcher test needs. Nothing is downloaded.

MAX_POSITIONS (default 512) is the context length written into config.json
and tokenizer_config.json. Its tokenizer spends about 0.66 tokens per character
of the plugin's prompts (Wordle's first prompt is about 1,240 tokens), so an
episode needs a few thousand positions; 512 is for the launcher tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: sentences the byte-level BPE tokenizer is trained on
CORPUS = [
    "You are an agent in a grid world. Your goal: go to the red ball.",
    "Thought: I should move forward.\n\nAction: move forward",
    "Crafting commands: craft 4 oak planks using 1 oak log. Goal: craft stick.",
    "The goal is at position 8, 6. Your current position is at position 1, 2.",
    "Let's start Wordle! Guess a five letter word: f r o w n",
    "Available actions: turn left, turn right, move forward, pickup, toggle, drop.",
]
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: ChatML, the format Qwen models use; written here, not copied from a model repo
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build(output: Path, seed: int = 0, max_positions: int = 512) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    output.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        bos_token=None, unk_token=None, model_max_length=max_positions,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(output)

    vocab = len(tokenizer)
    padded_vocab = ((vocab + 63) // 64) * 64
    config = Qwen3Config(
        vocab_size=padded_vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,  # vLLM's CPU attention kernels want head_dim >= 32
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(output)
    GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id).save_pretrained(output)
    return output


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python tests/helpers/tiny_qwen3.py OUTPUT_DIR [MAX_POSITIONS]")
    print(build(Path(sys.argv[1]), max_positions=int(sys.argv[2]) if len(sys.argv) == 3 else 512))
