"""Event builders: payload fields, msg ids, and the shipped JSON Schemas.

The expected values are derived by hand from the records built here (e.g. the
mean of rewards 1, 0, 0.5 and 1 is 0.625), not copied from the builders' output.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import jsonschema
import pytest

from pytest_agentgym.results.aggregate import summarize_env
from pytest_agentgym.results.events import (
    BATCH_COMPLETED, EPISODE_COMPLETED, FIELD_STATUS, SUBJECTS, Event, batch_completed,
    episode_completed, field_status,
)
from pytest_agentgym.results.gates import Gate, GateVerdict, check
from pytest_agentgym.publish import load_schema
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo


def validate(event: Event) -> None:
    jsonschema.validate(json.loads(event.data()), load_schema(event.subject),
                        cls=jsonschema.Draft202012Validator)


def record(**overrides) -> EpisodeRecord:
    fields = dict(run_id="run-7", env="TextCraft", task_index=12, repeat=2, reward=1.0, success=True,
                  rounds=4, stop_reason="done", started_at="2025-02-03T04:05:06Z", duration_s=8.25,
                  model="qwen3:8b", prompt_tokens=900, completion_tokens=120, outcome="passed",
                  nodeid="suites/lightweight/textcraft.yaml::TextCraft[12-r2]", node="rec-node")
    fields.update(overrides)
    return EpisodeRecord(**fields)


INFO = RunInfo(run_id="run-7", started_at="2025-02-03T04:00:00Z", node="4090", model="qwen3.5-9b",
               endpoint="http://alice:s3cret@127.0.0.1:3030/openai/v1", endpoint_kind="tensorzero",
               environments=("BabyAI", "TextCraft"), command="pytest suites/lightweight --agentgym-node=4090",
               seed=3, versions={"pytest-agentgym": "0.1.0"})


def test_schemas_are_valid_draft_2020_12_one_per_subject():
    for subject in SUBJECTS:
        schema = load_schema(subject)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        jsonschema.Draft202012Validator.check_schema(schema)
    with pytest.raises(KeyError, match="no schema"):
        load_schema("agentgym.unknown.v1")


def test_episode_completed_carries_the_record_and_a_stable_msg_id():
    event = episode_completed(record(), node="4090", checkpoint="ckpt/step-1200", at="2025-02-03T04:05:15Z")
    assert event.subject == "agentgym.episode.completed.v1" == EPISODE_COMPLETED
    assert event.msg_id == "run-7:TextCraft:12:r2:episode"
    p = event.payload
    assert p["schema_version"] == 1
    assert (p["episode_id"], p["run_id"], p["env"], p["task_index"], p["repeat"]) == (
        "run-7:TextCraft:12:r2", "run-7", "TextCraft", 12, 2)
    assert (p["reward"], p["success"], p["rounds"], p["duration_s"]) == (1.0, True, 4, 8.25)
    assert (p["model"], p["checkpoint"], p["node"]) == ("qwen3:8b", "ckpt/step-1200", "4090")
    assert (p["outcome"], p["stop_reason"], p["prompt_tokens"], p["completion_tokens"]) == ("passed", "done", 900, 120)
    assert p["error_type"] is None and p["timestamp"] == "2025-02-03T04:05:15Z"
    validate(event)
    # Building it again gives the same key: a retry is the same message to JetStream.
    assert episode_completed(record(), node="other", checkpoint=None).msg_id == event.msg_id


def test_episode_node_and_checkpoint_default_to_the_record():
    p = episode_completed(record(checkpoint="ckpt/a")).payload
    assert (p["node"], p["checkpoint"]) == ("rec-node", "ckpt/a")


def test_errored_episode_has_no_reward_and_names_the_error_class():
    error = ErrorInfo(type="EnvServerError", message="x" * 5000, where="env")
    event = episode_completed(record(reward=None, success=False, error=error, outcome="error",
                                     stop_reason="error"), node="4090", checkpoint=None)
    p = event.payload
    assert (p["reward"], p["error_type"], p["error_where"], p["outcome"]) == (None, "EnvServerError", "env", "error")
    assert len(p["error_message"]) == 1000
    validate(event)


def test_batch_completed_figures_ci_and_gate_verdicts_of_its_environment():
    records = [record(task_index=i, reward=r, success=r == 1.0) for i, r in enumerate([1.0, 0.0, 0.5, 1.0])]
    summary = summarize_env("TextCraft", records)
    verdicts = [
        check(Gate.parse("mean_reward >= 0.5"), summary),      # 0.625: passes
        check(Gate.parse("success_rate >= 0.8"), summary),     # 2 of 4: fails
        GateVerdict("BabyAI", "mean_reward >= 0.1", 0.9, True, "another environment"),
    ]
    event = batch_completed("run-7", summary, verdicts, node="4090", model="qwen3:8b", checkpoint=None)
    p = event.payload
    assert event.subject == BATCH_COMPLETED
    assert event.msg_id == p["batch_id"] == "run-7:TextCraft:batch:n4"
    assert (p["env"], p["n_episodes"], p["scored"], p["errors"]) == ("TextCraft", 4, 4, 0)
    assert p["mean_reward"] == pytest.approx(0.625)
    assert p["success_rate"] == pytest.approx(0.5)
    low, high = p["reward_ci95"]
    assert low < 0.625 < high
    low, high = p["success_ci95"]
    assert 0.0 < low < 0.5 < high < 1.0
    assert [g["gate"] for g in p["gates"]] == ["mean_reward >= 0.5", "success_rate >= 0.8"]
    assert [g["passed"] for g in p["gates"]] == [True, False]
    assert p["gates_passed"] is False
    validate(event)


def test_batch_with_only_errors_has_null_figures_and_validates():
    error = ErrorInfo(type="ModelTimeout", message="no reply in 300 s", where="model")
    summary = summarize_env("TextCraft", [record(reward=None, success=False, error=error)])
    event = batch_completed("run-7", summary, [], node=None, model="m", checkpoint="c")
    p = event.payload
    assert (p["mean_reward"], p["reward_ci95"], p["success_rate"], p["success_ci95"]) == (None, None, None, None)
    assert (p["errors"], p["gates"], p["gates_passed"]) == (1, [], True)
    validate(event)


@pytest.mark.parametrize("status", ["started", "finished", "finished-with-errors", "no-episode-scored",
                                    "interrupted", "crashed"])
def test_field_status_for_each_status_validates(status):
    event = field_status(INFO, status, {"passed": 5, "failed": 1, "error": 0}, at="2025-02-03T05:00:00Z")
    p = event.payload
    assert event.subject == FIELD_STATUS
    assert event.msg_id == f"run-7:status:{status}:2025-02-03T05:00:00Z"
    assert (p["status"], p["node"], p["counts"]) == (status, "4090", {"passed": 5, "failed": 1, "error": 0})
    assert p["config"]["environments"] == ["BabyAI", "TextCraft"]
    assert p["config"]["endpoint"] == "http://***@127.0.0.1:3030/openai/v1"  # no user, no password
    assert "s3cret" not in event.data().decode()
    validate(event)


def test_field_status_timestamps_and_counts_default_from_the_run_info():
    started = field_status(INFO, "started")
    assert started.payload["timestamp"] == INFO.started_at
    ended = RunInfo(**{**INFO.to_dict(), "environments": INFO.environments,
                       "ended_at": "2025-02-03T06:00:00Z", "counts": {"passed": 2}})
    finished = field_status(ended, "finished")
    assert finished.msg_id == "run-7:status:finished:2025-02-03T06:00:00Z"
    assert finished.payload["counts"] == {"passed": 2}
    with pytest.raises(ValueError, match="not one of started, finished, finished-with-errors, no-episode-scored, partial, interrupted, crashed"):
        field_status(INFO, "running")


def test_shards_of_one_run_publish_their_status_under_their_own_msg_ids():
    events = [field_status(dataclasses.replace(INFO, shard={"index": i, "count": 3, "selection": {}}), "started",
                           at="2025-02-03T05:00:00Z") for i in (1, 2)]
    assert [e.msg_id for e in events] == ["run-7/shard-1-of-3:status:started:2025-02-03T05:00:00Z",
                                          "run-7/shard-2-of-3:status:started:2025-02-03T05:00:00Z"]
    assert events[1].payload["shard"] == {"index": 2, "count": 3} and events[1].payload["run_id"] == "run-7"
    assert "shard" not in field_status(INFO, "started").payload
    for event in events:
        validate(event)
    broken = json.loads(events[0].data())
    broken["shard"] = {"index": 0, "count": 3}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, load_schema(FIELD_STATUS), cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("subject, breakage", [
    (EPISODE_COMPLETED, lambda p: p.pop("reward")),
    (EPISODE_COMPLETED, lambda p: p.update(reward="high")),
    (EPISODE_COMPLETED, lambda p: p.update(schema_version=2)),
    (BATCH_COMPLETED, lambda p: p.update(success_ci95=[0.1])),
    (BATCH_COMPLETED, lambda p: p.update(success_rate=1.5)),
    (FIELD_STATUS, lambda p: p.update(status="running")),
    (FIELD_STATUS, lambda p: p["counts"].update(passed=-1)),
])
def test_an_invalid_payload_fails_validation(subject, breakage):
    events = {
        EPISODE_COMPLETED: episode_completed(record(), node="n", checkpoint=None),
        BATCH_COMPLETED: batch_completed("run-7", summarize_env("TextCraft", [record()]), [],
                                         node="n", model="m", checkpoint=None),
        FIELD_STATUS: field_status(INFO, "started"),
    }
    payload = json.loads(events[subject].data())
    jsonschema.validate(payload, load_schema(subject), cls=jsonschema.Draft202012Validator)
    breakage(payload)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(payload, load_schema(subject), cls=jsonschema.Draft202012Validator)


def test_event_round_trips_through_its_outbox_form():
    event = episode_completed(record(), node="4090", checkpoint=None)
    line = json.dumps(event.to_dict())
    assert set(json.loads(line)) == {"subject", "msg_id", "payload"}
    again = Event.from_dict(json.loads(line))
    assert again == Event(event.subject, event.msg_id, json.loads(event.data()))
    with pytest.raises(TypeError):
        Event.from_dict({"subject": "s", "msg_id": 3, "payload": {}})


def test_importing_events_and_publish_does_not_import_nats():
    code = ("import sys, pytest_agentgym.results.events, pytest_agentgym.publish; "
            "sys.exit(1 if any(m == 'nats' or m.startswith('nats.') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
