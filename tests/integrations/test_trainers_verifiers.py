"""Rollout answers as verifiers 0.4 takes them (pytest_agentgym.integrations.trainers.for_verifiers),
checked by verifiers itself.

Real parts: the rollout service (``pytest-agentgym rollout-server``, node local, its
embedded TextCraft and Maze servers) and the reference agent as processes on loopback,
batches posted over HTTP asking for token ids and logprobs, and verifiers 0.4.0 (the
test extra installs it): its ``WireEpisode`` validates each record, its ``Trace.branches``
make the training samples, and its own graph builder (``prepare_turn`` and
``PendingTurn.commit``, verifiers/v1/graph.py) builds the same graph from the same turns.
The reference agent's ids are a byte-level tokenizer's, so every span is checked against
the conversation's text; a re-rendered rollout is built by hand with the reference's
``render(drop_reasoning=True)``.
"""

from __future__ import annotations

import json

import pytest
from helpers.hand_rollouts import hand_rollout
from helpers.trainer_batches import answered
from pydantic import TypeAdapter
from verifiers.v1 import Episode, WireEpisode, WireTrace
from verifiers.v1.graph import prepare_turn
from verifiers.v1.types import AssistantMessage, Message, Response, TurnTokens

from pytest_agentgym.integrations import trainers
from pytest_agentgym.model.reference import tokens as ref
from pytest_agentgym.results.tokens import EpisodeTokens

ASK = {"temperature": 1.0, "return_token_ids": True, "logprobs": True}
MESSAGES = TypeAdapter(list[Message])
#: what a node is, to compare: the rest (timestamps) differs by construction
NODE = {"parent", "message", "sampled", "token_ids", "mask", "logprobs"}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """TextCraft (the reference policy, ids 0-2, n=2: it finishes), Maze (the random policy,
    n=2: five turns, stopped by max_round). The refusals (a failed rollout, one
    without ids or logprobs) are checked with the other trainers' in test_trainer_formats.py."""
    with answered(tmp_path_factory.mktemp("trainers-verifiers"), {
        "textcraft": {"env": "textcraft", "model": "reference", "ids": [0, 1, 2], "n": 2, "max_round": 8,
                      "sampling": ASK},
        "maze": {"env": "maze", "model": "random", "ids": [1, 2], "n": 2, "seed": 11, "max_round": 5,
                 "sampling": ASK},
    }) as found:
        yield found


@pytest.fixture(scope="module")
def rollouts(answers):
    return answers["textcraft"] + answers["maze"]


def _rerendered():
    opening = [{"role": "user", "content": "Reach the goal."}, {"role": "assistant", "content": "OK."},
               {"role": "user", "content": "You are at (1, 1)."}]
    replies = ["<think>east first</think>Action: move east", "<think>then north</think>Action: move north",
               "Action: stop"]
    return {**hand_rollout(opening, replies, task=9, sample=0, drop=True), "model": "reference"}


def _built_by_verifiers(rollout) -> WireTrace:
    """The trace verifiers' own graph builder makes of the rollout's turns: each turn's
    prompt messages resolved against the graph, then committed with its token ids (no
    per-message spans, as from a renderer that gives none)."""
    trace = WireTrace.model_validate({"task": {"type": "AgentGymTask", "data": {}}, "agent": {"config": {}}})
    for sample in trainers.per_turn(rollout):
        turn = prepare_turn(trace, MESSAGES.validate_python(sample["prompt_messages"]))
        turn.commit(Response(id="", created=0, model="reference", finish_reason="stop",
                             message=AssistantMessage(content=sample["completion_message"]["content"]),
                             tokens=TurnTokens(prompt_ids=sample["prompt_ids"], completion_ids=sample["completion_ids"],
                                               completion_logprobs=sample["logprobs"])))
    return trace


def _nodes(trace) -> list[dict]:
    return [node.model_dump(include=NODE) for node in trace.nodes]


def test_every_rollout_validates_as_a_verifiers_episode_and_trains_as_one_branch(answers, rollouts):
    records = trainers.for_verifiers(rollouts)
    episodes = [WireEpisode.model_validate(record) for record in records]
    assert len(episodes) == len(rollouts)
    for rollout, episode in zip(rollouts, episodes):
        (trace,) = episode.traces
        view = EpisodeTokens.from_dict(rollout["tokens"]).view
        (branch,) = trace.branches  # the history was rendered as sampled: one sample
        assert branch.trainable and trace.agent.trainable
        # the sample verifiers trains on: the token view, the policy's mask, logprobs with 0.0 elsewhere
        assert branch.token_ids == list(view.prompt_ids) + list(view.completion_ids)
        assert branch.sampled_mask == [False] * len(view.prompt_ids) + [bool(bit) for bit in view.completion_mask]
        assert branch.logprobs == [0.0] * len(view.prompt_ids) + [v or 0.0 for v in view.completion_logprobs]
        assert branch.advantages is None  # the trainer assigns them
        # each sampled node is one reply: its sampled tokens decode to it, with the reference's logprobs
        sampled = [node for node in trace.nodes if node.sampled]
        opening = len(rollout["messages"]) - 2 * rollout["rounds"]
        replies = [rollout["messages"][opening + 2 * k]["content"] for k in range(rollout["rounds"])]
        assert len(sampled) == trace.num_turns == rollout["rounds"]
        for node, reply in zip(sampled, replies):
            ids = [t for t, bit in zip(node.token_ids, node.mask) if bit]
            assert ref.decode(ids) == reply + "<|im_end|>" and node.message.content == reply
            assert node.logprobs == [ref.logprob(t, i) for i, t in enumerate(ids)]
        # the first reply's node starts with the opening as the reference renders it
        assert sampled[0].token_ids[:len(view.prompt_ids)] == ref.render(rollout["messages"][:opening])
        # the conversation the model saw (the environment's last answer reached no prompt)
        assert [m.model_dump(include={"role", "content"}) for m in trace.messages] == rollout["messages"][:-1]
        assert trace.info["last_observation"] == rollout["messages"][-1]
        assert trace.reward == rollout["reward"] and trace.metrics["success"] == float(rollout["success"])
        assert trace.num_output_tokens == sum(view.completion_mask)
        assert episode.id == trace.id == rollout["episode_id"]
        assert trace.info["turn_rewards"] == rollout["turn_rewards"]
    # verifiers counts a rollout cut off by its round cap as truncated, one that finished as not
    assert [e.traces[0].is_truncated for e in episodes] == [r["stop_reason"] == "max_rounds" for r in rollouts]
    assert {r["stop_reason"] for r in answers["maze"]} == {"max_rounds"}
    assert {r["stop_reason"] for r in answers["textcraft"]} == {"done"}
    # GRPO groups: the two samples of one task id in one batch share a group
    groups = [e.group.id for e in episodes]
    assert len(set(groups)) == 5 and all(groups.count(g) == 2 for g in groups)
    # the records are JSON, and verifiers' own record of the episode reads back the same
    again = WireEpisode.model_validate_json(json.dumps(records[-1]))
    assert again.traces[0].branches[0].token_ids == episodes[-1].traces[0].branches[0].token_ids
    assert Episode.model_validate(episodes[0].to_record()).traces[0].reward == rollouts[0]["reward"]


def test_the_graph_is_the_one_verifiers_builds_from_the_same_turns(rollouts):
    for rollout in [*rollouts, _rerendered()]:
        (record,) = trainers.for_verifiers([rollout])
        ours = WireEpisode.model_validate(record).traces[0]
        theirs = _built_by_verifiers(rollout)
        assert _nodes(ours) == _nodes(theirs)
        assert [b.token_ids for b in ours.branches] == [b.token_ids for b in theirs.branches]


def test_a_rerendered_rollout_trains_as_one_branch_per_rendering():
    rollout = _rerendered()
    episode = EpisodeTokens.from_dict(rollout["tokens"])
    assert rollout["tokens"]["rerendered"]["turn"] == 1
    trace = WireEpisode.model_validate(trainers.for_verifiers([rollout])[0]).traces[0]
    # each turn's prompt drops the earlier reasoning, so none extends the last: three branches,
    # each that turn's prompt as the endpoint rendered it and its reply
    assert len(trace.branches) == 3
    for k, branch in enumerate(trace.branches):
        turn = episode.turn(k)
        assert branch.token_ids == list(turn.prompt_ids) + list(turn.completion_ids)
        assert branch.sampled_mask[-len(turn.completion_ids):] == [True] * len(turn.completion_ids)
        assert branch.logprobs[-len(turn.completion_ids):] == list(turn.logprobs)
    assert "<think>" not in ref.decode(trace.branches[2].token_ids[:len(episode.turn(2).prompt_ids)])
    # the opening's nodes are shared: the branches fork at the first reply the prompts render differently
    assert [b.nodes[0] is trace.nodes[0] for b in trace.branches] == [True] * 3
