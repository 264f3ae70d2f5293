"""The opening and token view of a record on their way to disk and back
(results/records.py, results/store.py, results/conversation.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_agentgym.model.reference import tokens as T
from pytest_agentgym.results.conversation import (
    PROMPTS_FILE,
    TOKENS_FILE,
    conversation,
    messages_sent,
    opening_key,
    read_sidecars,
)
from pytest_agentgym.results.records import EpisodeRecord, Turn
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.results.tokens import episode_tokens

OPENING = ({"role": "user", "content": "Rules."}, {"role": "assistant", "content": "OK."})


def turn(index, observation, reply, feedback, **more):
    return Turn(index=index, observation=observation, reply=reply, action=reply, feedback=feedback, reward=0.0,
                done=False, model_latency_s=0.1, env_latency_s=0.01, **more)


def record(task=0, turns=None, **more):
    sha, opening = opening_key(OPENING)
    turns = turns or (turn(0, "obs", "a", "fb0"), turn(1, "fb0", "b", "fb1"))
    return EpisodeRecord(run_id="r", env="Maze", task_index=task, repeat=0, reward=1.0, success=True,
                         rounds=len(turns), stop_reason="done", started_at="2026-11-25T00:00:00+00:00",
                         duration_s=1.0, model="m", turns=tuple(turns), opening_sha256=sha, opening=opening, **more)


def test_the_conversation_is_rebuilt_turn_by_turn_from_the_opening():
    sent = messages_sent(record(), OPENING)
    assert sent[0] == [*OPENING, {"role": "user", "content": "obs"}]
    assert sent[1] == sent[0] + [{"role": "assistant", "content": "a"}, {"role": "user", "content": "fb0"}]
    assert conversation(record(), OPENING)[-2:] == [{"role": "assistant", "content": "b"},
                                                    {"role": "user", "content": "fb1"}]


def test_a_turn_that_was_sent_a_rewritten_conversation_is_rebuilt_from_what_it_kept():
    rewritten = ({"role": "user", "content": "short"},)
    turns = (turn(0, "obs", "a", "fb0"), turn(1, "short", "b", "fb1", sent=rewritten), turn(2, "fb1", "c", "end"))
    sent = messages_sent(record(turns=turns), OPENING)
    assert sent[1] == list(rewritten)
    assert sent[2] == [*rewritten, {"role": "assistant", "content": "b"}, {"role": "user", "content": "fb1"}]


def test_every_record_of_an_environment_shares_one_opening_and_the_hash_is_of_the_text():
    first, second = opening_key([dict(m) for m in OPENING]), opening_key([dict(m) for m in OPENING])
    assert first[0] == second[0] and first[1] is second[1]
    assert opening_key([*OPENING[:1], {"role": "assistant", "content": "OK!"}])[0] != first[0]


def test_the_run_directory_keeps_each_opening_once_and_the_records_line_names_it(tmp_path):
    run = RunDir(tmp_path)
    data = [dict(beside, **choice) for beside, choice in (
        T.token_fields({"return_token_ids": True, "logprobs": True}, [*OPENING, {"role": "user", "content": "obs"}], "a"),)]
    tokens = episode_tokens(data)
    for task in range(3):
        run.append_episode(record(task, tokens=tokens if task == 0 else None))
    lines = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert all("opening" not in line and "tokens" not in line for line in lines)
    assert len((tmp_path / PROMPTS_FILE).read_text().splitlines()) == 1
    found = read_sidecars(tmp_path)
    again = [EpisodeRecord.from_line(line) for line in lines]
    assert found.openings[again[0].opening_sha256] == OPENING
    assert found.tokens_of(again[0]) == tokens and found.tokens_of(again[1]) is None
    # a new writer (a resumed run, another process) may write the opening again: read once
    RunDir(tmp_path).append_episode(record(3))
    assert len((tmp_path / PROMPTS_FILE).read_text().splitlines()) == 2
    assert len(read_sidecars(tmp_path).openings) == 1


def test_torn_and_tampered_sidecar_lines_are_skipped_and_named(tmp_path):
    RunDir(tmp_path).append_episode(record())
    sha = opening_key(OPENING)[0]
    with (tmp_path / PROMPTS_FILE).open("a") as handle:
        handle.write(json.dumps({"sha256": sha, "messages": [{"role": "user", "content": "other"}]}) + "\n")
        handle.write('{"sha256": "x", "mess')
    (tmp_path / TOKENS_FILE).write_text('{"episode_id": "r:Maze:0:r0", "tokens": {"prompt_ids": [1]}}\n')
    found = read_sidecars(tmp_path)
    assert found.openings[sha] == OPENING
    assert [s.split(":")[1] for s in found.skipped] == ["2", "3", "1"]
    assert "do not hash" in found.skipped[0] and "not JSON" in found.skipped[1]
    assert "not a token view" in found.skipped[2]


def test_a_record_travels_between_processes_with_its_opening_and_tokens():
    data = [dict(beside, **choice) for beside, choice in (
        T.token_fields({"return_token_ids": True}, [*OPENING, {"role": "user", "content": "obs"}], "a"),)]
    original = record(tokens=episode_tokens(data), batch="r:b1", sample=3)
    again = EpisodeRecord.from_dict(json.loads(json.dumps(original.to_dict())))
    assert again == original


@pytest.mark.parametrize("field, value, message", [
    ("opening", [{"role": "user"}], "'opening' must be a list of {role, content} strings"),
    ("batch", 7, "'batch' must be a string or null"),
    ("sample", -1, "'sample' must be a whole number"),
    ("tokens", [1, 2], "'tokens' must be an object or null"),
])
def test_a_line_with_a_malformed_new_field_is_not_a_record(field, value, message):
    data = dataclasses.replace(record(), opening=None).to_dict()
    data[field] = value
    with pytest.raises(TypeError, match=message):
        EpisodeRecord.from_line(data)


def test_a_turn_whose_sent_is_not_messages_is_not_a_record():
    data = record().to_dict()
    data["turns"][1]["sent"] = "everything"
    with pytest.raises(TypeError, match=r"'turns\[1\]\.sent' must be a list of \{role, content\}"):
        EpisodeRecord.from_line(data)
