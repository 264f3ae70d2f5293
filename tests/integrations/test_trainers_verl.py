"""Rollout answers in verl 0.9.1's shapes (``trainers.verl_agent_loop_outputs``, ``for_verl``).

Real parts: the rollout service (``pytest-agentgym rollout-server``, node local, its
embedded TextCraft and Maze servers) and the reference agent as processes on loopback,
batches posted over HTTP asking for token ids. The turn counts are checked against the
conversation's messages, the ids against the answers' token views. The last test runs
verl's own code (``AgentLoopOutput``, ``AgentLoopBase._cap_text_prompt_length``,
``AgentLoopWorker._agent_loop_postprocess`` and ``_postprocess``) on our outputs, in the
interpreter named by ``AGENTGYM_VERL_PYTHON`` (one that has verl 0.9.1; docs/trainer-formats.md)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from helpers import HELPERS
from helpers.trainer_batches import answered

from pytest_agentgym.integrations import trainers
from pytest_agentgym.model.reference import tokens as ref

ASK = {"temperature": 1.0, "return_token_ids": True, "logprobs": True}
METRICS = {"generate_sequences", "tool_calls", "compute_score", "num_preempted"}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """TextCraft (the reference policy, ids 0-1, n=2), Maze (the random policy: many turns)
    and TextCraft asked for ids without logprobs, from real processes."""
    with answered(tmp_path_factory.mktemp("trainers-verl"), {
        "textcraft": {"env": "textcraft", "model": "reference", "ids": [0, 1], "n": 2, "max_round": 8,
                      "sampling": ASK},
        "maze": {"env": "maze", "model": "random", "ids": [0, 3], "n": 2, "seed": 7, "max_round": 5,
                 "sampling": ASK},
        "ids_only": {"env": "textcraft", "model": "reference", "ids": [4], "n": 2, "max_round": 8,
                     "sampling": {"temperature": 1.0, "return_token_ids": True}},
    }) as found:
        yield found


@pytest.fixture(scope="module")
def rollouts(answers):
    return answers["textcraft"] + answers["maze"]


def _after_prompt(rollout) -> tuple[int, int]:
    """The conversation after the prompt (everything before the first sampled reply): how
    many replies and how many environment answers, read from the messages' roles."""
    messages = rollout["messages"]
    tail = messages[len(messages) - 2 * rollout["rounds"]:]
    replies = sum(m["role"] == "assistant" for m in tail)
    return replies, len(tail) - replies


def _longest(rollouts):
    return max(rollouts, key=lambda r: len(r["tokens"]["completion_ids"]))


def _scored(rollout):
    """``rollout`` with rewards that cannot be mistaken for 0 or for one another (the random
    Maze policy scores 0 everywhere): reward 0.5, turn k's reward k + 1."""
    return {**rollout, "reward": 0.5, "turn_rewards": [k + 1.0 for k in range(rollout["rounds"])]}


def test_agent_loop_outputs_count_turns_as_verl_and_carry_its_metrics(rollouts):
    outputs = trainers.verl_agent_loop_outputs(rollouts)
    for rollout, out in zip(rollouts, outputs):
        view = rollout["tokens"]
        assert set(out) == {"prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score",
                            "num_turns", "metrics", "extra_fields"}
        assert out["prompt_ids"] == view["prompt_ids"] and out["response_ids"] == view["completion_ids"]
        assert out["response_mask"] == view["completion_mask"]
        assert out["response_logprobs"] == [0.0 if v is None else v for v in view["completion_logprobs"]]
        # tool_agent_loop.py: user_turns + assistant_turns + 1, the prompt one turn however many messages
        replies, answers = _after_prompt(rollout)
        assert replies == answers == rollout["rounds"] >= 1
        assert out["num_turns"] == replies + answers + 1 < len(rollout["messages"])
        assert set(out["metrics"]) == METRICS
        assert out["metrics"]["generate_sequences"] == rollout["duration_s"] > 0
        assert out["metrics"]["num_preempted"] == -1 and out["metrics"]["tool_calls"] == 0.0
        assert out["reward_score"] == rollout["reward"]
        assert out["extra_fields"]["turn_scores"] == rollout["turn_rewards"]
        assert out["extra_fields"]["uid"] == f"{rollout['batch']}:{rollout['env']}:{rollout['id']}"


def test_over_long_prompts_and_responses_are_cut_as_verl_cuts_them(rollouts):
    maze = _scored(_longest(rollouts))
    view = maze["tokens"]
    turns = view["turns"]
    assert len(turns) >= 3, "the longest Maze rollout should play three rounds or more"
    prompt_length = len(view["prompt_ids"]) - 5
    for response_length, played in ((turns[1][1], 2), (turns[2][0] + 1, 3), (turns[1][1] + 1, 2)):
        out = trainers.verl_agent_loop_outputs([maze], prompt_length=prompt_length,
                                               response_length=response_length)[0]
        # the prompt keeps its last ids (_cap_text_prompt_length); the response its first
        assert out["prompt_ids"] == view["prompt_ids"][-prompt_length:]
        assert out["response_ids"] == view["completion_ids"][:response_length]
        assert out["response_mask"] == view["completion_mask"][:response_length]
        assert len(out["response_logprobs"]) == response_length
        # verl's loop stops once the response reaches response_length: the turns it played
        assert out["num_turns"] == 2 * played

        batch = trainers.for_verl([maze], pad_token_id=0, prompt_length=prompt_length,
                                  response_length=response_length)
        assert batch["prompts"][0] == out["prompt_ids"] and batch["responses"][0] == out["response_ids"]
        assert batch["rm_scores"][0][-1] == maze["reward"] and sum(batch["rm_scores"][0]) == maze["reward"]
        assert batch["num_turns"] == [2 * played]

    with pytest.raises(ValueError, match=rf"has {len(view['completion_ids'])} response tokens, over "
                                         r"response_length 10: raise response_length or lower max_round, "
                                         r"or leave strict off"):
        trainers.for_verl([maze], pad_token_id=0, response_length=10, strict=True)
    with pytest.raises(ValueError, match=r"over prompt_length 10: raise prompt_length \(verl's "
                                         r"data.max_prompt_length\), or leave strict off"):
        trainers.verl_agent_loop_outputs([maze], prompt_length=10, strict=True)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=rf"response_length must be a whole number of tokens, 1 or more "
                                             rf"\(got {bad!r}\)"):
            trainers.for_verl([maze], pad_token_id=0, response_length=bad)


def test_verl_batch_is_padded_as_verl_pads_it(rollouts):
    out = trainers.for_verl(rollouts, pad_token_id=ref.IM_END)
    longest_prompt = max(len(r["tokens"]["prompt_ids"]) for r in rollouts)
    longest_response = max(len(r["tokens"]["completion_ids"]) for r in rollouts)
    assert set(out) == {"prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids",
                        "rm_scores", "rollout_log_probs", "uid", "num_turns"}
    for i, rollout in enumerate(rollouts):
        view = rollout["tokens"]
        prompt, completion = view["prompt_ids"], view["completion_ids"]
        left, right = longest_prompt - len(prompt), longest_response - len(completion)
        assert out["prompts"][i] == [ref.IM_END] * left + prompt  # left-padded
        assert out["responses"][i] == completion + [ref.IM_END] * right  # right-padded
        assert out["response_mask"][i] == view["completion_mask"] + [0] * right
        assert out["input_ids"][i] == out["prompts"][i] + out["responses"][i]
        assert out["attention_mask"][i] == [0] * left + [1] * (len(prompt) + len(completion)) + [0] * right
        # compute_position_id_with_mask: 0 on the left padding, the last position on the right
        real = len(prompt) + len(completion)
        assert out["position_ids"][i] == [0] * left + list(range(real)) + [real - 1] * right
        logprobs = [0.0 if v is None else v for v in view["completion_logprobs"]]
        assert out["rollout_log_probs"][i] == logprobs + [0.0] * right
        # the reward sits on the last real response token, as _postprocess puts it
        scores = out["rm_scores"][i]
        assert scores[len(completion) - 1] == rollout["reward"] and sum(scores) == rollout["reward"]
        assert out["num_turns"][i] == 2 * rollout["rounds"] + 1
    # GRPO groups by uid: the n samples of one id in one batch
    assert len(set(out["uid"])) == 4 and all(out["uid"].count(u) == 2 for u in out["uid"])


def test_turn_scores_sit_on_each_turns_last_token(rollouts):
    maze = _scored(_longest(rollouts))
    out = trainers.for_verl([maze], pad_token_id=0, turn_scores=True)
    ends = [end - 1 for _, end in maze["tokens"]["turns"]]
    assert [out["rm_scores"][0][e] for e in ends] == maze["turn_rewards"]
    assert sum(out["rm_scores"][0]) == sum(maze["turn_rewards"])
    # cut inside the last turn: its score moves to the last kept token
    cut_at = maze["tokens"]["turns"][-1][0] + 1
    cut = trainers.for_verl([maze], pad_token_id=0, turn_scores=True, response_length=cut_at)
    assert cut["rm_scores"][0][-1] == maze["turn_rewards"][-1] and sum(cut["rm_scores"][0]) == sum(
        maze["turn_rewards"])


def test_a_batch_without_logprobs_has_none_and_no_rollout_log_probs(answers):
    outputs = trainers.verl_agent_loop_outputs(answers["ids_only"])
    assert [o["response_logprobs"] for o in outputs] == [None, None]
    assert "rollout_log_probs" not in trainers.for_verl(answers["ids_only"], pad_token_id=0)


# --------------------------------------------------------------------------- verl's own code


VERL_PYTHON = os.environ.get("AGENTGYM_VERL_PYTHON")


def _question(rollouts, *, prompt_length: int, response_length: int) -> dict:
    return {
        "whole": trainers.verl_agent_loop_outputs(rollouts),
        "cut": trainers.verl_agent_loop_outputs(rollouts, prompt_length=prompt_length,
                                                response_length=response_length),
        "prompt_length": prompt_length, "response_length": response_length,
        "vocab_size": ref.VOCAB_SIZE, "pad_token_id": ref.IM_END,
    }


@pytest.fixture(scope="module")
def verl_said(answers):
    """What verl's own code made of two batches, asked in one process (tests/helpers/
    verl_agent_loop.py): the logprob batch with lengths that cut some prompts and
    responses and pad the others; the ids-only batch with every response cut."""
    if VERL_PYTHON is None:
        pytest.skip("set AGENTGYM_VERL_PYTHON to a Python with verl 0.9.1 "
                    "(docs/trainer-formats.md, 'verl / AgentGym-RL')")
    logprob_batch = answers["textcraft"] + answers["maze"]
    lengths = sorted(len(r["tokens"]["completion_ids"]) for r in logprob_batch)
    batches = {
        "with_logprobs": (logprob_batch, max(len(r["tokens"]["prompt_ids"]) for r in logprob_batch) - 3,
                          lengths[len(lengths) // 2] - 1),
        "ids_only": (answers["ids_only"], max(len(r["tokens"]["prompt_ids"]) for r in answers["ids_only"]) + 5,
                     min(len(r["tokens"]["completion_ids"]) for r in answers["ids_only"]) - 7),
    }
    questions = [_question(chosen, prompt_length=p, response_length=r) for chosen, p, r in batches.values()]
    done = subprocess.run([VERL_PYTHON, str(HELPERS / "verl_agent_loop.py")], input=json.dumps(questions),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return {name: (*batch, question, said)
            for (name, batch), question, said in zip(batches.items(), questions, json.loads(done.stdout))}


@pytest.mark.parametrize("batch", ["with_logprobs", "ids_only"])
def test_verl_itself_takes_our_outputs_and_pads_them_as_for_verl(verl_said, batch):
    chosen, prompt_length, response_length, question, said = verl_said[batch]
    ours = question["cut"]
    # AgentLoopOutput(**d) takes every field as given
    for given, built in zip(ours, said["constructed"]):
        assert {key: built[key] for key in given} == given
    # verl's cuts of the whole outputs are ours
    for given, verl_cut in zip(ours, said["verl_cut"]):
        for key in ("prompt_ids", "response_ids", "response_mask", "response_logprobs"):
            assert verl_cut[key] == given[key], key
    sizes = [(len(o["prompt_ids"]), len(o["response_ids"])) for o in ours]
    assert any(r == response_length for _, r in sizes), (sizes, prompt_length, response_length)
    if batch == "with_logprobs":  # some rows cut, some padded
        assert any(r < response_length for _, r in sizes), (sizes, response_length)
        assert any(p == prompt_length for p, _ in sizes), (sizes, prompt_length)

    padded = said["batch"]
    expected = trainers.for_verl(chosen, pad_token_id=ref.IM_END, prompt_length=prompt_length,
                                 response_length=response_length)
    numbers = [k for k in expected if k not in ("uid", "num_turns")]
    assert sorted(k for k in padded if k not in ("__num_turns__", "uid", "metrics")) == sorted(numbers)
    for key in numbers:  # verl's floats are float32: logprobs and scores within its precision
        floats = key in ("rollout_log_probs", "rm_scores")
        assert padded[key] == ([pytest.approx(row, rel=1e-6) for row in expected[key]] if floats
                               else expected[key]), key
    assert padded["__num_turns__"] == expected["num_turns"] and padded["uid"] == expected["uid"]
    assert padded["metrics"] == [o["metrics"] for o in ours]
