"""EpisodeRecord.to_dict, written out field by field for speed, gives what
dataclasses.asdict gave (equal dicts, tuples kept as tuples, containers copied, the
opening and the token view as before), for records with every field set."""

from __future__ import annotations

import dataclasses
import random

from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, Turn


def reference_dict(record: EpisodeRecord) -> dict:
    """The former to_dict: dataclasses.asdict, the opening and the token view apart."""
    data = dataclasses.asdict(dataclasses.replace(record, opening=None, tokens=None))
    data["opening"] = None if record.opening is None else [dict(m) for m in record.opening]
    data["tokens"] = None if record.tokens is None else record.tokens.to_dict()
    data["episode_id"] = record.episode_id
    return data


def a_turn(rng: random.Random, index: int) -> Turn:
    return Turn(index=index, observation=f"obs {index}", reply=f"Action: move {index}",
                action=rng.choice([None, "move up"]), feedback="ok", reward=rng.random(), done=False,
                model_latency_s=0.2, env_latency_s=0.001,
                prompt_tokens=rng.choice([None, 12]), completion_tokens=rng.choice([None, 3]),
                score=rng.choice([None, 0.5]),
                token_data=rng.choice([None, {"token_ids": [1, 2, 3], "logprobs": {"content": [{"t": -0.1}]},
                                              "prompt_token_ids": (4, 5)}]),
                sent=rng.choice([None, ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"})]))


def a_record(seed: int) -> EpisodeRecord:
    rng = random.Random(seed)
    error = ErrorInfo("EnvUnreachable", "dropped", "env")
    return EpisodeRecord(
        run_id="r", env="Maze", task_index=seed, repeat=0, reward=rng.choice([None, 1.0]), success=True,
        rounds=3, stop_reason="done", started_at="2026-11-26T00:00:00+00:00", duration_s=1.5, model="m",
        turns=tuple(a_turn(rng, i) for i in range(rng.randint(0, 4))),
        error=rng.choice([None, error]), retried=rng.choice([(), (error, ErrorInfo("EndpointDown", "x", "model"))]),
        prompt_tokens=5, completion_tokens=6, min_reward=0.5, outcome="passed", nodeid="suites/m.yaml::Maze[0]",
        checkpoint="ckpt", node="local", score=0.25, worker="w1", max_rounds=15,
        sampling=rng.choice([None, {"temperature": 0.7, "stop": ["a", "b"], "extra": {"top_k": 5}}]),
        generation=2, opening_sha256="ab", batch="r:b1", sample=3,
        opening=rng.choice([None, ({"role": "user", "content": "rules"},)]))


def test_to_dict_equals_what_asdict_gave_for_every_kind_of_record():
    for seed in range(200):
        record = a_record(seed)
        assert record.to_dict() == reference_dict(record), seed
        # the same container types as asdict: tuples stay tuples, lists stay lists
        got, want = record.to_dict(), reference_dict(record)
        assert type(got["turns"]) is type(want["turns"]) and type(got["retried"]) is type(want["retried"])
        for a, b in zip(got["turns"], want["turns"]):
            if b["sent"] is not None:
                assert type(a["sent"]) is type(b["sent"])
            if b["token_data"] is not None:
                assert type(a["token_data"]["prompt_token_ids"]) is type(b["token_data"]["prompt_token_ids"])


def test_to_dict_copies_what_it_holds():
    record = next(r for r in map(a_record, range(200))
                  if r.sampling is not None and any(t.token_data is not None for t in r.turns))
    data = record.to_dict()
    data["sampling"]["extra"]["top_k"] = 99
    next(t for t in data["turns"] if t["token_data"] is not None)["token_data"]["token_ids"].append(7)
    assert record.sampling["extra"]["top_k"] == 5
    assert all(t.token_data is None or t.token_data["token_ids"] == [1, 2, 3] for t in record.turns)


def test_every_field_is_in_the_dict():
    record = a_record(1)
    names = {f.name for f in dataclasses.fields(EpisodeRecord)} | {"episode_id"}
    assert set(record.to_dict()) == names
