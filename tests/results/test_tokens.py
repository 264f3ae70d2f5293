"""The token view (results/tokens.py) on conversations rendered by the reference agent's
byte-level tokenizer: what is assembled, what is masked, what aligns, and where a
re-rendered history is caught. Expected ids come from rendering the conversation
independently (tokens.render / tokens.completion), not from the code under test."""

from __future__ import annotations

import math

import pytest

from pytest_agentgym.model.reference import tokens as T
from pytest_agentgym.results.tokens import EpisodeTokens, TokenView, episode_tokens, trajectory, turn_tokens

OPENING = [{"role": "user", "content": "Play."}, {"role": "assistant", "content": "OK."},
           {"role": "user", "content": "You see a door."}]
REPLIES = ["<think>go</think>Action: open door", "Action: go north", "Action: stop"]
FEEDBACK = ["The door opens.", "A hall.", "Done."]


def played(*, drop_reasoning=False, as_ids=False, replies=REPLIES):
    """The per-turn token data an endpoint rendering with ``tokens.render`` sends, and the
    conversation each turn was sent."""
    messages, data, sent = list(OPENING), [], []
    for reply, feedback in zip(replies, FEEDBACK):
        sent.append(list(messages))
        beside, choice = T.token_fields({"return_token_ids": not as_ids, "logprobs": True,
                                         "return_tokens_as_token_ids": as_ids}, messages, reply)
        beside["prompt_token_ids"] = T.render(messages, drop_reasoning=drop_reasoning)
        data.append({**beside, **choice})
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": feedback}]
    return data, sent


def test_the_view_is_the_first_prompt_then_every_later_token_with_the_policys_masked_in():
    data, sent = played()
    view = trajectory(data)
    assert view is not None and view.complete
    assert list(view.prompt_ids) == T.render(OPENING)
    # the whole conversation after the first prompt, as the last prompt and reply render it
    whole = T.render(sent[-1]) + T.completion(REPLIES[-1])
    assert list(view.prompt_ids + view.completion_ids) == whole
    assert len(view.turns) == 3
    for (start, end), reply in zip(view.turns, REPLIES):
        assert T.decode(view.completion_ids[start:end]) == reply + "<|im_end|>"
        assert all(view.completion_mask[start:end])
    policy = sum(end - start for start, end in view.turns)
    assert sum(view.completion_mask) == policy  # 1 exactly on the sampled tokens
    between = [t for t, m in zip(view.completion_ids, view.completion_mask) if not m]
    assert T.decode(between).count("<|im_start|>user\n") == 2


def test_logprobs_align_with_the_sampled_tokens_and_are_null_between_turns():
    view = trajectory(played()[0])
    for (start, end) in view.turns:
        for offset, position in enumerate(range(start, end)):
            assert view.completion_logprobs[position] == T.logprob(view.completion_ids[position], offset)
    assert all(lp is None for lp, m in zip(view.completion_logprobs, view.completion_mask) if not m)


def test_ids_are_read_from_logprob_tokens_when_the_endpoint_writes_them_as_token_ids():
    plain, as_ids = trajectory(played()[0]), trajectory(played(as_ids=True)[0])
    assert as_ids == plain


def test_a_template_that_drops_earlier_reasoning_is_caught_at_the_turn_it_happens():
    data, _ = played(drop_reasoning=True)
    tokens = episode_tokens(data)
    mark = tokens.view.rerendered
    assert mark is not None and mark.turn == 1
    assert "re-renders earlier replies" in mark.reason and "turn 0's reply" in mark.reason
    assert len(tokens.view.turns) == 1  # the view stops before the re-rendered turn
    # ... and every turn can still be had on its own, as the endpoint rendered it
    for index in range(3):
        own = tokens.turn(index)
        assert list(own.prompt_ids) == data[index]["prompt_token_ids"]
        assert list(own.completion_ids) == data[index]["token_ids"]


def test_without_reasoning_in_the_replies_the_same_template_keeps_the_view_whole():
    data, _ = played(drop_reasoning=True, replies=["Action: a", "Action: b", "Action: c"])
    assert trajectory(data).complete


def test_a_rewritten_environment_message_is_named_as_such():
    data, _ = played()
    data[2]["prompt_token_ids"] = T.render(OPENING + [
        {"role": "assistant", "content": REPLIES[0]}, {"role": "user", "content": "(shortened)"},
        {"role": "assistant", "content": REPLIES[1]}, {"role": "user", "content": FEEDBACK[1]}])
    mark = trajectory(data).rerendered
    assert mark.turn == 2 and "environment's text between turns" in mark.reason


def test_each_turn_of_a_whole_view_is_its_own_sample_too():
    data, sent = played()
    tokens = episode_tokens(data)
    for index in range(3):
        own = tokens.turn(index)
        assert list(own.prompt_ids) == T.render(sent[index])
        assert T.decode(own.completion_ids) == REPLIES[index] + "<|im_end|>"
        assert own.logprobs == tuple(T.logprob(t, i) for i, t in enumerate(own.completion_ids))


def test_no_ids_no_view_and_misaligned_logprobs_are_an_error():
    data, _ = played()
    assert trajectory([None, *data[1:]]) is None
    assert turn_tokens({"logprobs": data[0]["logprobs"]}) is None  # logprobs alone: no ids
    broken = dict(data[0], logprobs={"content": data[0]["logprobs"]["content"][:-1]})
    with pytest.raises(ValueError, match="do not align"):
        turn_tokens(broken)
    with pytest.raises(ValueError, match="list of token ids"):
        turn_tokens(dict(data[0], token_ids=["a"]))


def test_a_non_finite_logprob_is_kept_as_vllms_floor_so_the_view_stays_strict_json():
    data, _ = played()
    data[0]["logprobs"]["content"][0]["logprob"] = float("nan")
    data[0]["logprobs"]["content"][1]["logprob"] = float("-inf")
    assert turn_tokens(data[0]).logprobs[:2] == (-9999.0, -9999.0)
    assert all(math.isfinite(v) for v in trajectory(data).completion_logprobs if v is not None)


def test_the_stored_form_round_trips_and_refuses_what_is_not_a_view():
    tokens = episode_tokens(played(drop_reasoning=True)[0])
    again = EpisodeTokens.from_dict(tokens.to_dict())
    assert again == tokens
    data = tokens.to_dict()
    data["completion_mask"] = data["completion_mask"][:-1]
    with pytest.raises(ValueError, match="differ in length"):
        TokenView.from_dict(data)
    with pytest.raises(ValueError, match="not a token view"):
        EpisodeTokens.from_dict({"prompt_ids": [1]})
