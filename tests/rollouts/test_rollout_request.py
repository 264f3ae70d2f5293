"""Checking a POST /rollouts body against a node, the endpoint's base URL, and
how the endpoint client asks for and keeps per-token data (injected transport)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from helpers.mock_model import ask, completion, mock_client

from pytest_agentgym.model.call_settings import Sampling
from pytest_agentgym.rollouts.node import NodeError, RolloutNode
from pytest_agentgym.rollouts.request import MAX_ROLLOUTS, BadRollouts, episode_seed, openai_base, parse_batch

BODY = {"env": "textcraft", "model": "model-name", "base_url": "http://172.17.0.1:8001", "ids": [0, 1, 2, 3],
        "max_round": 10}


@pytest.fixture(scope="module")
def local():
    return RolloutNode.load("local", Path.cwd())


def test_the_issue_body_is_a_batch_of_four(local):
    batch = parse_batch(BODY, local)
    assert (batch.spec.name, batch.model, batch.ids, batch.max_rounds, batch.n) == \
           ("TextCraft", "model-name", (0, 1, 2, 3), 10, 1)
    assert batch.base_url == "http://172.17.0.1:8001/v1"
    assert batch.sampling == {"temperature": 0.0, "max_tokens": 256}  # the node's defaults
    assert batch.sampling_for(0, 0) == batch.sampling and batch.stream(0, 0) is None  # no seed given, none sent


def test_defaults_come_from_the_node_and_each_rollout_has_its_own_seed(local):
    body = {k: v for k, v in BODY.items() if k != "max_round"}
    batch = parse_batch({**body, "n": 3, "seed": 40, "sampling": {"temperature": 0.9, "logprobs": True}}, local)
    assert batch.max_rounds == 20  # min(TextCraft's 20 in envs.yaml, the local node's 20)
    seeds = [batch.sampling_for(entry, k)["seed"] for entry in range(4) for k in range(3)]
    assert len(set(seeds)) == 12 and all(0 <= s < 2 ** 53 for s in seeds)
    assert seeds[0] == episode_seed(40, 0, 0) != episode_seed(41, 0, 0)
    assert batch.sampling_for(1, 2) == {"temperature": 0.9, "max_tokens": 256, "logprobs": True,
                                        "seed": episode_seed(40, 1, 2)}
    assert batch.stream(1, 2) == {"batch": 40, "entry": 1, "sample": 2, "episode": episode_seed(40, 1, 2)}
    in_sampling = parse_batch({**body, "sampling": {"seed": 5}}, local)
    assert in_sampling.seed == 5 and in_sampling.sampling_for(2, 0)["seed"] == episode_seed(5, 2, 0)


@pytest.mark.parametrize(("change", "message"), [
    ({"ids": [True]}, "'ids' must hold whole numbers (task indices); not True"),
    ({"ids": "0-3"}, "'ids' must be a non-empty list"),
    ({"max_round": 0}, "'max_round' must be a whole number >= 1, got 0"),
    ({"n": 2.5}, "'n' must be a whole number >= 1, got 2.5"),
    ({"model": ""}, "'model' must be the served model's name"),
    ({"seed": 3, "sampling": {"seed": 4}}, "give the seed once"),
    ({"seed": "7"}, "'seed' must be a whole number, got '7'"),
    ({"sampling": {"logprobs": "yes"}}, "sampling.logprobs must be true or false, got 'yes'"),
    ({"sampling": [1]}, "'sampling' must be an object"),
    ({"node_sampling": "yes"}, "'node_sampling' must be true (play with node local's model.sampling under the "
                               "batch's) or false (the default: only its temperature and max_tokens), got 'yes'"),
    ({"ids": list(range(544)), "n": 19}, f"one request may ask for at most {MAX_ROLLOUTS}: split the batch"),
])
def test_bad_values_say_what_to_send(local, change, message):
    with pytest.raises(BadRollouts) as caught:
        parse_batch({**BODY, **change}, local)
    assert message in str(caught.value)


def test_missing_keys_and_a_default_base_url(local):
    body = {k: v for k, v in BODY.items() if k not in ("base_url", "model")}
    with pytest.raises(BadRollouts, match=r"missing key\(s\) model, base_url; e.g. \{"):
        parse_batch(body, local)
    batch = parse_batch({**body, "model": "m"}, local, default_base_url="http://gpu:8000/v1")
    assert batch.base_url == "http://gpu:8000/v1"


@pytest.mark.parametrize(("given", "base"), [
    ("http://172.17.0.1:8001", "http://172.17.0.1:8001/v1"),
    ("http://host:8001/", "http://host:8001/v1"),
    ("http://host:8001/v1/", "http://host:8001/v1"),
    ("http://localhost:3030/openai/v1", "http://localhost:3030/openai/v1"),
    ("https://host/v1?api_key=k", "https://host/v1?api_key=k"),
    ("https://host?api_key=k", "https://host/v1?api_key=k"),
])
def test_the_openai_base_url(given, base):
    assert openai_base(given) == base


def test_an_unknown_node_names_the_known_ones(tmp_path):
    with pytest.raises(NodeError, match=r"--node=nowhere: unknown node; known nodes: 4090, cpu, gpu, local"):
        RolloutNode.load("nowhere", tmp_path)


def test_the_client_asks_for_logprobs_and_token_ids_and_keeps_them_untouched():
    seen = []
    logprobs = {"content": [{"token": "Action", "logprob": -0.01, "bytes": [65], "top_logprobs": []}]}

    def handler(request):
        seen.append(json.loads(request.content))
        body = completion()
        body["choices"][0].update(logprobs=logprobs, token_ids=[17, 4])
        body["prompt_token_ids"] = [1, 2, 3]
        return httpx.Response(200, json=body)

    sampling = Sampling.from_mapping({"logprobs": True, "top_logprobs": 1, "return_token_ids": True})
    reply = ask(mock_client(handler, sampling=sampling))
    assert (seen[0]["logprobs"], seen[0]["top_logprobs"], seen[0]["return_token_ids"]) == (True, 1, True)
    assert reply.token_data == {"logprobs": logprobs, "token_ids": [17, 4], "prompt_token_ids": [1, 2, 3]}


def test_no_token_data_when_the_endpoint_sends_none():
    def handler(request):
        body = completion()
        body["choices"][0]["logprobs"] = None
        return httpx.Response(200, json=body)

    assert ask(mock_client(handler)).token_data is None


def test_a_group_at_temperature_0_is_refused_with_where_the_temperature_came_from(local):
    """GRPO needs spread within a group: n > 1 at temperature 0 samples n identical
    rollouts. The local node's default is 0.0 (for evaluation), so a batch that says
    nothing of sampling would get them; it is refused, naming the source and the fix."""
    with pytest.raises(BadRollouts) as default:
        parse_batch({**BODY, "n": 4}, local)
    assert str(default.value) == (
        "n 4 with temperature 0 (from node local's default sampling) samples 4 identical rollouts per id "
        "(greedy decoding): a group with no spread has no advantage to learn from; send \"sampling\": "
        "{\"temperature\": 1.0} (or any temperature > 0) with n > 1, or n 1 for one greedy rollout per id")
    with pytest.raises(BadRollouts, match=r"^n 2 with temperature 0 \(from the batch's sampling\)"):
        parse_batch({**BODY, "n": 2, "sampling": {"temperature": 0}}, local)
    # the boundaries: one sample is greedy on purpose; any temperature above 0 spreads
    assert parse_batch({**BODY, "n": 1}, local).sampling["temperature"] == 0.0
    group = parse_batch({**BODY, "n": 4, "sampling": {"temperature": 0.01}}, local)
    assert group.sampling_for(0, 0)["temperature"] == 0.01  # the batch's sampling wins over the node's
