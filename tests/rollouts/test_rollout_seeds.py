"""A rollout batch's seeds and sampling.

Seeds: each rollout of a seeded batch has its own stream, drawn from the batch seed,
the entry's position in ``ids`` and the sample, and each turn's model call a seed
drawn from that stream (engine/episode.py ``turn_sampling``): no two rollouts share
draws, not a repeated entry (what TRL's ``rollout_func`` sends: each prompt
``num_generations`` times), not two batches with consecutive seeds.

Sampling: what the batch asked for plus the node's ``temperature`` and ``max_tokens``
where it asked for none; never the node's ``top_p`` or ``stop`` unless the batch says
``"node_sampling": true``.

The last test plays batches through the real service and reference agent, with a
recording relay in front of the agent that keeps every body the service sent it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.rollout_services import post, reference_agent, rollout_server

from pytest_agentgym.engine.episode import turn_sampling
from pytest_agentgym.rollouts.node import RolloutNode
from pytest_agentgym.rollouts.request import NODE_DEFAULTS, BadRollouts, episode_seed, parse_batch

BODY = {"env": "textcraft", "model": "m", "base_url": "http://127.0.0.1:8001", "ids": [0, 1, 2, 3], "max_round": 10}


def turn_seeds(batch_seed: int, ids: list[int], n: int, turns: int) -> list[int]:
    """Every seed a batch's model calls send, as the service and the episode draw them."""
    return [turn_sampling({"seed": episode_seed(batch_seed, entry, sample)}, task, turn)["seed"]
            for entry, task in enumerate(ids) for sample in range(n) for turn in range(turns)]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(seed=st.integers(-2 ** 40, 2 ** 40), ids=st.lists(st.integers(0, 5), min_size=1, max_size=12),
       n=st.integers(1, 4), turns=st.integers(1, 10))
def test_no_two_calls_of_a_batch_or_of_the_next_seeds_batch_send_one_seed(seed, ids, n, turns):
    """Entries repeat (ids drawn from 0-5), so a repeated entry is among the cases."""
    this = turn_seeds(seed, ids, n, turns)
    assert len(set(this)) == len(this)
    assert all(0 <= s < 2 ** 31 for s in this)
    following = turn_seeds(seed + 1, ids, n, turns)
    assert not set(this) & set(following)


def test_a_grid_of_batch_seeds_entries_samples_and_turns_draws_no_seed_twice():
    seeds = [s for batch in range(40) for s in turn_seeds(batch, [3, 3, 7, 7, 7, 1], 4, 8)]
    assert len(seeds) == 40 * 6 * 4 * 8 and len(set(seeds)) == len(seeds)


def test_the_measured_overlaps_are_gone():
    # batch seed 8 sample 0 played batch seed 7 sample 1 (seed + k); now their streams differ
    assert episode_seed(8, 0, 0) != episode_seed(7, 0, 1)
    assert set(turn_seeds(8, [5], 1, 10)).isdisjoint(turn_seeds(7, [5], 2, 10))
    # an id posted twice with n 1 (TRL's repeated prompts) played one stream twice
    repeated = parse_batch({**BODY, "ids": [5, 5], "seed": 7}, RolloutNode.load("local", Path.cwd()))
    assert repeated.sampling_for(0, 0)["seed"] != repeated.sampling_for(1, 0)["seed"]
    assert repeated.stream(1, 0) == {"batch": 7, "entry": 1, "sample": 0, "episode": episode_seed(7, 1, 0)}


def test_an_episode_seed_is_a_53_bit_hash_of_the_three():
    assert episode_seed(7, 3, 0) == episode_seed(7, 3, 0)
    assert len({episode_seed(7, 3, 0), episode_seed(7, 0, 3), episode_seed(3, 7, 0), episode_seed(73, 0, 0)}) == 4
    assert all(0 <= episode_seed(s, e, k) < 2 ** 53 for s in (-5, 0, 2 ** 70) for e in range(3) for k in range(3))


@pytest.fixture(scope="module")
def cpu():
    """A node whose model.sampling has a top_p: {temperature 0.7, top_p 0.95, max_tokens 256}."""
    node = RolloutNode.load("cpu", Path.cwd())
    assert node.sampling["top_p"] == 0.95
    return node


def test_a_batch_is_played_with_what_it_asked_and_the_nodes_temperature_and_max_tokens(cpu):
    asked = parse_batch({**BODY, "sampling": {"temperature": 1.0}}, cpu)
    assert asked.sampling == {"temperature": 1.0, "max_tokens": 256}  # no top_p 0.95
    assert parse_batch(BODY, cpu).sampling == {"temperature": 0.7, "max_tokens": 256}
    own = {"temperature": 0.9, "max_tokens": 32, "top_p": 0.5, "stop": ["\n\n"], "logprobs": True}
    assert parse_batch({**BODY, "sampling": own}, cpu).sampling == own
    assert NODE_DEFAULTS == ("temperature", "max_tokens")


def test_node_sampling_true_plays_the_nodes_whole_sampling_under_the_batchs(cpu):
    batch = parse_batch({**BODY, "node_sampling": True, "sampling": {"temperature": 1.0}}, cpu)
    assert batch.sampling == {"temperature": 1.0, "top_p": 0.95, "max_tokens": 256}
    assert parse_batch({**BODY, "node_sampling": False}, cpu).sampling == {"temperature": 0.7, "max_tokens": 256}
    with pytest.raises(BadRollouts, match=r"^'node_sampling' must be true .* got 1$"):
        parse_batch({**BODY, "node_sampling": 1}, cpu)


# -- through the service ------------------------------------------------------------------------

NODE = """\
name: sampled
model: {endpoints: [{kind: reference}], sampling: {temperature: 0.2, top_p: 0.95, max_tokens: 300, stop: ["@@"]}}
limits: {max_rounds: 20, episode_timeout: 60, concurrency: 4}
envs: {skip: [WebArena, SciWorld, AgentBench-ALFWorld, AgentBench-WebShop], servers: spawn}
"""


class Relay:
    """An OpenAI endpoint on loopback that passes every request on to ``upstream`` and
    keeps the JSON body of each chat completion it was sent."""

    def __init__(self, upstream: str) -> None:
        self.bodies: list[dict] = []
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _pass(self, content: bytes | None) -> None:
                answer = httpx.request(self.command, upstream + self.path, content=content, timeout=60,
                                       headers={"Content-Type": "application/json"})
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._pass(None)

            def do_POST(self) -> None:  # noqa: N802
                content = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path.endswith("/chat/completions"):
                    relay.bodies.append(json.loads(content))
                self._pass(content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    base = tmp_path_factory.mktemp("seeds")
    (base / "sampled.yaml").write_text(NODE)
    agent = reference_agent(base)
    relay = Relay(agent.url)
    service = rollout_server(base / "service", "--node", str(base / "sampled.yaml"), "--concurrency", "4",
                             "--allow-base-url", relay.url)
    yield service, relay
    service.stop()
    relay.stop()
    agent.stop()


@pytest.mark.heavy
def test_a_repeated_entry_samples_apart_and_the_same_batch_plays_the_same(played):
    service, relay = played
    body = {"env": "TextCraft", "model": "random", "base_url": relay.url, "ids": [2, 2, 2, 2], "seed": 7,
            "max_round": 4, "sampling": {"temperature": 1.0}}
    first = post(service, body)
    assert first.status_code == 200, first.text
    rollouts = first.json()["rollouts"]
    sent, relay.bodies[:] = list(relay.bodies), []
    assert all(r["error"] is None and r["rounds"] >= 1 for r in rollouts), [r["error"] for r in rollouts]

    # the same entry four times, each its own stream: four different conversations
    assert len({json.dumps(r["messages"]) for r in rollouts}) == 4
    for entry, rollout in enumerate(rollouts):
        stream = rollout["seed"]
        assert {k: stream[k] for k in ("batch", "entry", "sample")} == {"batch": 7, "entry": entry, "sample": 0}
        # exactly what the batch asked plus the node's max_tokens: not its top_p 0.95, stop or temperature 0.2
        assert rollout["sampling"] == {"temperature": 1.0, "max_tokens": 300, "seed": stream["episode"]}
        assert stream["turns"] == [turn_sampling(rollout["sampling"], 2, t)["seed"] for t in range(rollout["rounds"])]

    # on the wire: every call sent that sampling and one of the seeds the answers list, each once
    assert {k for b in sent for k in b} == {"model", "messages", "temperature", "max_tokens", "seed"}
    assert {(b["temperature"], b["max_tokens"]) for b in sent} == {(1.0, 300)}
    listed = [s for r in rollouts for s in r["seed"]["turns"]]
    assert Counter(b["seed"] for b in sent) == Counter(listed) and len(set(listed)) == len(listed)

    again = post(service, body)
    assert again.status_code == 200, again.text
    same = ("messages", "actions", "reward", "turn_rewards", "rounds", "stop_reason", "sampling", "seed")
    assert [{k: r[k] for k in same} for r in again.json()["rollouts"]] == [{k: r[k] for k in same} for r in rollouts]
    assert Counter(b["seed"] for b in relay.bodies) == Counter(listed)


@pytest.mark.heavy
def test_without_a_seed_none_is_sent_or_listed(played):
    service, relay = played
    relay.bodies[:] = []
    answer = post(service, {"env": "TextCraft", "model": "reference", "base_url": relay.url, "ids": [0],
                            "max_round": 3})
    assert answer.status_code == 200, answer.text
    rollout = answer.json()["rollouts"][0]
    assert rollout["seed"] is None and rollout["sampling"] == {"temperature": 0.2, "max_tokens": 300}
    assert relay.bodies and all("seed" not in b and "top_p" not in b for b in relay.bodies)
