"""Rollout answers in trainers' shapes (pytest_agentgym.integrations.trainers).

Real parts: the rollout service (``pytest-agentgym rollout-server``, node local, its
embedded TextCraft and Maze servers) and the reference agent as processes on loopback,
batches posted over HTTP asking for token ids and logprobs. The reference agent's ids are
a byte-level tokenizer's (pytest_agentgym/model/reference/tokens.py), so every id the
adapters hand out is checked against the conversation's text, rendered here on its own:
the decoded replies are the assistant messages, the mask is 1 exactly on them, the
logprobs are the reference's for those tokens. The refusals are checked on hand-built
answers (a failed rollout, one without ids, one whose endpoint re-rendered history). verl's
shapes are checked in test_trainers_verl.py."""

from __future__ import annotations

import copy
import logging

import pytest
from helpers.hand_rollouts import hand_rollout
from helpers.masks import mask_spans
from helpers.trainer_batches import answered

from pytest_agentgym.integrations import trainers
from pytest_agentgym.model.reference import tokens as ref

ASK = {"temperature": 1.0, "return_token_ids": True, "logprobs": True}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """The rollouts of three batches from real processes: TextCraft (the reference policy,
    ids 0-2, n=2), Maze (the random policy: many turns, max_rounds), and TextCraft asked
    for ids without logprobs."""
    with answered(tmp_path_factory.mktemp("trainer-formats"), {
        "textcraft": {"env": "textcraft", "model": "reference", "ids": [0, 1, 2], "n": 2, "max_round": 8,
                      "sampling": ASK},
        "maze": {"env": "maze", "model": "random", "ids": [0, 3], "n": 2, "seed": 7, "max_round": 5,
                 "sampling": ASK},
        "ids_only": {"env": "textcraft", "model": "reference", "ids": [4], "max_round": 8,
                     "sampling": {"return_token_ids": True}},
    }) as found:
        yield found


@pytest.fixture(scope="module")
def rollouts(answers):
    return answers["textcraft"] + answers["maze"]


# --------------------------------------------------------------------------- an oracle from text


def _opening(rollout) -> int:
    """How many messages come before the first sampled reply."""
    return len(rollout["messages"]) - 2 * rollout["rounds"]


def _expected(rollout):
    """The trajectory rendered from the conversation's text with the reference tokenizer,
    without the token view: (prompt ids, completion ids, mask, logprobs with None on the
    environment's tokens)."""
    messages, start = rollout["messages"], _opening(rollout)
    prompt = ref.render(messages[:start])
    sampled = list(prompt)
    completion, mask, logprobs = [], [], []
    for k in range(rollout["rounds"]):
        shown = ref.render(messages[:start + 2 * k])
        assert shown[:len(sampled)] == sampled  # the reference renders history as sampled
        between = shown[len(sampled):]
        reply = ref.completion(messages[start + 2 * k]["content"])
        completion += between + reply
        mask += [0] * len(between) + [1] * len(reply)
        logprobs += [None] * len(between) + [ref.logprob(t, i) for i, t in enumerate(reply)]
        sampled += between + reply
    return prompt, completion, mask, logprobs


def _replies(rollout) -> list[str]:
    start = _opening(rollout)
    return [rollout["messages"][start + 2 * k]["content"] for k in range(rollout["rounds"])]


# --------------------------------------------------------------------------- the service's answers


def test_the_batches_answer_token_views(answers, rollouts):
    for rollout in rollouts:
        assert rollout["error"] is None and rollout["tokens"] is not None
        assert rollout["batch"] and rollout["sample"] in (0, 1)
        assert len(rollout["turn_rewards"]) == rollout["rounds"] >= 1
    assert {r["stop_reason"] for r in answers["maze"]} == {"max_rounds"}
    assert all(r["rounds"] == 5 for r in answers["maze"])
    # the random policy draws from the seed: a group's samples differ
    first = [r for r in answers["maze"] if r["id"] == 0]
    assert first[0]["actions"] != first[1]["actions"]


def test_trl_gets_ids_mask_and_logprobs_that_the_text_confirms(rollouts):
    batch = trainers.for_trl(rollouts)
    assert set(batch) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "turn_rewards",
                          "success", "episode_id", "batch", "sample", "task_id", "rerendered"}
    assert all(len(values) == len(rollouts) for values in batch.values())
    assert batch["rerendered"] == [None] * len(rollouts)
    # TRL wants num_generations completions per prompt, together, in the prompts' order
    assert batch["task_id"] == [0, 0, 1, 1, 2, 2, 0, 0, 3, 3]
    assert batch["sample"] == [0, 1] * 5
    for i, rollout in enumerate(rollouts):
        prompt, completion, mask, logprobs = _expected(rollout)
        assert batch["prompt_ids"][i] == prompt
        assert batch["completion_ids"][i] == completion
        assert batch["env_mask"][i] == mask
        assert batch["logprobs"][i] == [0.0 if v is None else v for v in logprobs]
        # the sampled spans decode to the assistant messages, one span per turn
        spans = mask_spans(batch["env_mask"][i])
        assert [ref.decode(completion[a:b]) for a, b in spans] == [f"{r}<|im_end|>" for r in _replies(rollout)]
        assert batch["env_reward"][i] == rollout["reward"] and batch["turn_rewards"][i] == rollout["turn_rewards"]
        assert batch["episode_id"][i] == rollout["episode_id"]
        # TRL counts a completion as truncated unless it ends in EOS: it ends on the last reply's
        assert completion[-1] == ref.IM_END


def test_trl_logprobs_are_none_when_the_batch_asked_only_for_ids(answers):
    batch = trainers.for_trl(answers["ids_only"])
    assert batch["logprobs"] is None and len(batch["completion_ids"]) == 1
    with pytest.raises(ValueError, match=r'rollout id 4, sample 0, .* no logprobs and verifiers needs them: '
                                         r'post the batch with "logprobs": true'):
        trainers.for_verifiers(answers["ids_only"])
    with pytest.raises(ValueError, match=r"has token ids but no logprobs while others have them"):
        trainers.for_trl(answers["textcraft"][:1] + answers["ids_only"])


def test_per_turn_prompts_are_the_conversation_so_far(rollouts):
    samples = trainers.per_turn_samples(rollouts)
    assert len(samples) == sum(r["rounds"] for r in rollouts)
    at = 0
    for rollout in rollouts:
        start = _opening(rollout)
        for k in range(rollout["rounds"]):
            sample = samples[at]
            at += 1
            assert (sample["episode_id"], sample["turn"], sample["batch"], sample["sample"], sample["task_id"]) == \
                   (rollout["episode_id"], k, rollout["batch"], rollout["sample"], rollout["id"])
            assert sample["prompt_messages"] == rollout["messages"][:start + 2 * k]
            # the prompt's ids decode to the conversation so far, as the endpoint rendered it
            assert ref.decode(sample["prompt_ids"]) == ref.decode(ref.render(sample["prompt_messages"]))
            assert sample["prompt_ids"] == ref.render(sample["prompt_messages"])
            assert ref.decode(sample["completion_ids"]) == sample["completion_message"]["content"] + "<|im_end|>"
            assert sample["completion_message"]["role"] == "assistant"
            assert sample["logprobs"] == [ref.logprob(t, i) for i, t in enumerate(sample["completion_ids"])]
            assert sample["turn_reward"] == rollout["turn_rewards"][k] and sample["reward"] == rollout["reward"]
            assert sample["rerendered"] is False


# --------------------------------------------------------------------------- refusals, on hand-built answers


def _rerendered_rollout(batch="hand:b1", task=9, sample=0):
    """A rollout whose endpoint dropped earlier replies' reasoning (as Qwen3's template
    does): the token data is what the reference tokenizer renders for each turn."""
    opening = [{"role": "user", "content": "Reach the goal."}, {"role": "assistant", "content": "OK."},
               {"role": "user", "content": "You are at (1, 1)."}]
    replies = ["<think>east first</think>Action: move east", "<think>then north</think>Action: move north",
               "Action: stop"]
    return hand_rollout(opening, replies, task=task, sample=sample, batch=batch, drop=True)


def test_a_failed_rollout_is_refused_by_name_or_skipped_with_its_group(rollouts, caplog):
    failed = copy.deepcopy(rollouts[1])
    failed.update(error={"type": "EnvServerError", "message": "the server died", "where": "env"},
                  reward=None, tokens=None)
    batch = [rollouts[0], failed, *rollouts[2:4]]
    expected = (rf"rollout id 0, sample 1, batch {failed['batch']}, episode {failed['episode_id']} failed "
                r"\(EnvServerError: the server died\); it has no reward to train on: leave its group out "
                r"\(skip=True\) or post its id again")
    for adapter in (trainers.for_trl, trainers.for_verifiers, trainers.per_turn_samples,
                    lambda r: trainers.for_verl(r, pad_token_id=0)):
        with pytest.raises(ValueError, match=expected):
            adapter(batch)
    with caplog.at_level(logging.WARNING, logger="pytest_agentgym.integrations.trainers"):
        out = trainers.for_verifiers(batch, skip=True)
    # the failed rollout and its group's other sample are left out; id 1's group is whole
    assert [e["id"] for e in out] == [r["episode_id"] for r in rollouts[2:4]]
    assert sum("left out" in m for m in caplog.messages) == 2
    found = trainers.usable(batch)
    assert [r["sample"] for r in found.kept] == [0, 1] and [r["id"] for r in found.kept] == [1, 1]
    assert "its group holds a rollout left out" in found.skipped[0][1] and "failed" in found.skipped[1][1]


def test_a_rollout_without_token_ids_says_how_to_ask_for_them(rollouts):
    plain = copy.deepcopy(rollouts[0])
    plain["tokens"] = None
    for adapter in (trainers.for_trl, trainers.for_verifiers, trainers.per_turn_samples, trainers.per_turn,
                    trainers.verifiers_trace):
        with pytest.raises(ValueError, match=r"rollout id 0, sample 0, .* has no token ids \('tokens' is null\): "
                                             r'post the batch with "sampling": \{"return_token_ids": true, '
                                             r'"logprobs": true\}'):
            adapter([plain] if adapter not in (trainers.per_turn, trainers.verifiers_trace) else plain)
    assert trainers.per_turn_samples([plain, *rollouts[2:4]], skip=True)[0]["task_id"] == 1


def test_a_view_that_does_not_match_the_conversation_is_refused(rollouts):
    broken = copy.deepcopy(rollouts[-1])
    broken["tokens"]["turns"] = broken["tokens"]["turns"][:-1]
    with pytest.raises(ValueError, match=r"has token ids for 4 turns but played 5 rounds"):
        trainers.for_trl([broken])
    broken = copy.deepcopy(rollouts[0])
    broken["tokens"]["completion_mask"] = broken["tokens"]["completion_mask"][:-1]
    with pytest.raises(ValueError, match=r"has a malformed 'tokens' field: not a token view"):
        trainers.for_verifiers([broken])


def test_a_rerendered_rollout_is_cut_or_refused_as_one_trajectory_and_works_per_turn(rollouts):
    odd = _rerendered_rollout()
    assert odd["tokens"]["rerendered"]["turn"] == 1  # turn 1's prompt dropped turn 0's reasoning
    expected = (r"rollout id 9, sample 0, batch hand:b1, episode hand:9:0 cannot be one trajectory: the endpoint "
                r"re-rendered the history at turn 1 \(turn 1's prompt renders turn 0's reply differently .*\); "
                r"use the per-turn form \(per_turn_samples\) for it, leave its group out \(skip=True\)")
    for adapter in (lambda r: trainers.for_trl(r, rerendered="raise"),
                    lambda r: trainers.verl_agent_loop_outputs(r, rerendered="raise"),
                    lambda r: trainers.for_verl(r, pad_token_id=0, rerendered="raise")):
        with pytest.raises(ValueError, match=expected):
            adapter([*rollouts[:2], odd])
    kept = trainers.for_verl([*rollouts[:2], odd], pad_token_id=0, rerendered="group")
    assert len(kept["uid"]) == 2
    # by default no adapter fails the batch: verl's rows keep the turn before the re-render
    outputs = trainers.verl_agent_loop_outputs([*rollouts[:2], odd])
    assert len(outputs) == 3 and outputs[2]["num_turns"] == 2 + 1
    assert outputs[2]["response_ids"] == odd["tokens"]["completion_ids"]
    assert sum(outputs[2]["response_mask"]) == odd["tokens"]["turns"][0][1] - odd["tokens"]["turns"][0][0]

    samples = trainers.per_turn(odd)
    assert [s["rerendered"] for s in samples] == [False, True, True]
    for k, sample in enumerate(samples):
        # each turn's prompt is what the endpoint rendered for it (reasoning dropped), exactly
        assert sample["prompt_ids"] == ref.render(sample["prompt_messages"], drop_reasoning=True)
        assert sample["completion_ids"] == ref.completion(sample["completion_message"]["content"])
        assert sample["turn_reward"] == odd["turn_rewards"][k]
    assert "<think>" in samples[0]["completion_message"]["content"]
    assert "<think>" not in ref.decode(samples[2]["prompt_ids"])
    # verifiers 0.4 takes it whole: each rendering is a branch of its trace (test_trainers_verifiers.py)
    assert [n["sampled"] for n in trainers.verifiers_trace(odd)["nodes"]].count(True) == 3


def test_per_turn_takes_each_turns_conversation_from_turn_prompts_when_the_server_rewrote_it():
    """A server that keeps the conversation (AgentBench's ALFWorld) may shorten earlier turns:
    the answer's turn_prompts then says what each turn was sent, and per_turn uses it."""
    odd = _rerendered_rollout()
    opening = odd["messages"][:3]
    replies = [m["content"] for m in odd["messages"] if m["role"] == "assistant"][1:]
    shortened = opening + [{"role": "assistant", "content": replies[0]}, {"role": "user", "content": "(short)"}]
    odd["turn_prompts"] = [opening + [{"role": "assistant", "content": replies[0]}],
                           shortened + [{"role": "assistant", "content": replies[1]}],
                           shortened + [{"role": "assistant", "content": replies[1]}, {"role": "user", "content": "x"},
                                        {"role": "assistant", "content": replies[2]}]]
    samples = trainers.per_turn(odd)
    assert [s["prompt_messages"] for s in samples] == [p[:-1] for p in odd["turn_prompts"]]
    assert [s["completion_message"]["content"] for s in samples] == replies
    odd["turn_prompts"] = odd["turn_prompts"][:2]
    with pytest.raises(ValueError, match="2 turn_prompts for 3 turns"):
        trainers.per_turn(odd)
