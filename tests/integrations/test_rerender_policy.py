"""What the trajectory adapters do with a re-rendered rollout (selection.take's ``rerendered``).

Hand-built answers, their token data rendered by the reference tokenizer
(pytest_agentgym/model/reference/tokens.py): a rollout whose endpoint rendered history as
sampled, and one whose endpoint dropped earlier replies' reasoning (as Qwen3's template
does), so its view stops before turn 1. Each expectation is computed here from the
messages, not from the token view."""

from __future__ import annotations

import logging

import pytest
from helpers.hand_rollouts import hand_rollout

from pytest_agentgym.integrations import trainers
from pytest_agentgym.integrations.trainers.selection import RERENDERED, take
from pytest_agentgym.model.reference import tokens as ref

OPENING = [{"role": "user", "content": "Reach the goal."}]
REPLIES = ["<think>east first</think>Action: move east", "<think>then north</think>Action: move north",
           "Action: stop"]


def _rollout(task: int, sample: int, *, drop: bool, batch: str = "hand:b1", reward: float = 1.0) -> dict:
    """Three turns; ``drop``: the endpoint re-renders earlier replies without their reasoning."""
    return hand_rollout(OPENING, REPLIES, task=task, sample=sample, batch=batch, drop=drop, reward=reward)


def _failed(task: int, sample: int) -> dict:
    return {**_rollout(task, sample, drop=False), "error": {"type": "EnvServerError", "message": "gone"},
            "reward": None, "tokens": None}


def test_for_trl_cuts_a_rerendered_rollout_before_the_rerendered_turn_and_says_so(caplog):
    whole, odd = _rollout(1, 0, drop=False), _rollout(1, 1, drop=True, reward=0.5)
    with caplog.at_level(logging.INFO, logger="pytest_agentgym.integrations.trainers"):
        out = trainers.for_trl([whole, odd, whole])
    assert out["task_id"] == [1, 1, 1] and out["sample"] == [0, 1, 0]  # one entry per rollout, in order
    assert out["rerendered"] == [None, 1, None]
    # the cut entry is the first turn only: its prompt as rendered, its reply and <|im_end|>, all the policy's
    first = ref.completion(REPLIES[0])
    assert out["prompt_ids"][1] == ref.render(OPENING)
    assert out["completion_ids"][1] == first and out["env_mask"][1] == [1] * len(first)
    assert out["logprobs"][1] == [ref.logprob(t, i) for i, t in enumerate(first)]
    assert out["env_reward"][1] == 0.5 and out["turn_rewards"][1] == [0.0, 0.0, 0.5]
    # the whole one holds every turn: three replies, the environment's tokens between them masked
    assert sum(out["env_mask"][0]) == sum(len(ref.completion(r)) for r in REPLIES)
    assert 0 in out["env_mask"][0] and ref.decode(out["completion_ids"][0]).endswith("Action: stop<|im_end|>")
    cut = [m for m in caplog.messages if m.startswith("cut: ")]
    assert len(cut) == 1 and "rollout id 1, sample 1, batch hand:b1" in cut[0] and "before turn 1" in cut[0]


def test_for_trl_raises_on_request_and_refuses_to_leave_a_group_out():
    batch = [_rollout(1, 0, drop=False), _rollout(1, 1, drop=True)]
    with pytest.raises(ValueError, match=r"rollout id 1, sample 1, batch hand:b1, episode hand:1:1 cannot be one "
                                         r"trajectory: .* train on the turns before it \(rerendered=\"cut\"\)"):
        trainers.for_trl(batch, rerendered="raise")
    with pytest.raises(ValueError, match=r'for_trl cannot leave a group out \(rerendered="group"\): .* shifts its '
                                         r'groups; use rerendered="cut"'):
        trainers.for_trl(batch, rerendered="group")
    with pytest.raises(ValueError, match=r"rerendered='drop' is not a policy for re-rendered rollouts; give one of "
                                         r"'cut', 'group', 'raise'"):
        trainers.for_trl(batch, rerendered="drop")
    assert RERENDERED == ("cut", "group", "raise")


def test_take_leaves_out_the_group_of_a_rerendered_rollout_and_still_refuses_a_failed_one(caplog):
    batch = [_rollout(1, 0, drop=False), _rollout(1, 1, drop=True), _rollout(2, 0, drop=False),
             _rollout(2, 1, drop=False)]
    with caplog.at_level(logging.WARNING, logger="pytest_agentgym.integrations.trainers"):
        kept = take(batch, whole=True, skip=False, rerendered="group")
    assert [(r["id"], r["sample"]) for r, _ in kept] == [(2, 0), (2, 1)]
    assert [m.split(":")[0] for m in caplog.messages] == ["left out", "left out"]
    assert "its group holds a rollout left out" in caplog.messages[0] and "re-rendered" in caplog.messages[1]
    with pytest.raises(ValueError, match=r"rollout id 3, sample 0, .* failed \(EnvServerError: gone\)"):
        take([*batch, _failed(3, 0)], whole=True, skip=False, rerendered="group")


def test_take_cut_keeps_the_rerendered_rollout_while_skip_leaves_out_a_failed_group():
    batch = [_rollout(1, 0, drop=True), _failed(2, 0), _rollout(2, 1, drop=False), _rollout(3, 0, drop=False)]
    kept = take(batch, whole=True, skip=True, rerendered="cut")
    assert [(r["id"], r["sample"]) for r, _ in kept] == [(1, 0), (3, 0)]
    assert kept[0][1].view.rerendered.turn == 1 and len(kept[0][1].view.turns) == 1
    assert kept[1][1].view.rerendered is None and len(kept[1][1].view.turns) == 3


def test_take_without_a_policy_does_what_skip_said_before():
    batch = [_rollout(1, 0, drop=True), _rollout(2, 0, drop=False)]
    with pytest.raises(ValueError, match=r"rollout id 1, sample 0, .* cannot be one trajectory"):
        take(batch, whole=True, skip=False)
    assert [r["id"] for r, _ in take(batch, whole=True, skip=True)] == [2]
    # the per-turn form never minds a re-render
    assert [r["id"] for r, _ in take(batch, whole=False, skip=False, rerendered="raise")] == [1, 2]
    # "raise" with skip: the re-render is refused, although a failed rollout would be skipped
    with pytest.raises(ValueError, match=r"cannot be one trajectory"):
        take([_failed(3, 0), *batch], whole=True, skip=True, rerendered="raise")
