"""The work queue's pieces that need no server: the queue URL, the wire format,
the heartbeat's schema, and what a user sees for bad input."""

from __future__ import annotations

import subprocess
import sys

import jsonschema
import pytest

from pytest_agentgym.publish import load_schema
from pytest_agentgym.queue.address import QueueAddress, QueueAddressError
from pytest_agentgym.queue.wire import (
    ENCODING_HEADER,
    Heartbeat,
    Result,
    WireError,
    WorkItem,
    decode,
    encode,
)
from pytest_agentgym.results.records import EpisodeRecord, Turn
from helpers.queue_fleet import env_with_repo, suites
from helpers.usage_errors import settings_refusal


def test_a_plain_url_gets_the_default_queue_and_its_jetstream_names():
    address = QueueAddress.parse("nats://10.0.0.5:4222")
    assert (address.server, address.name, address.ack_wait_s, address.max_deliver) == (
        "nats://10.0.0.5:4222", "agentgym", 60.0, 5)
    assert (address.work_stream, address.results_stream) == ("AGENTGYMQ_AGENTGYM_WORK", "AGENTGYMQ_AGENTGYM_RESULTS")
    assert address.work_subject("20250101-1.5", "Maze", 3, 1) == "agentgymq.agentgym.work.20250101-1_5.Maze.3.1"
    assert address.results_of_run("r.1") == "agentgymq.agentgym.results.r_1.>"


def test_the_query_names_the_queue_and_tunes_ack_wait_and_max_deliver():
    address = QueueAddress.parse("nats://h:1?name=ckpt-7&ack_wait=120&max_deliver=3")
    assert (address.name, address.ack_wait_s, address.max_deliver) == ("ckpt-7", 120.0, 3)
    assert address.work_stream == "AGENTGYMQ_CKPT_7_WORK"
    assert address.max_deliveries_advisory() == (
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.AGENTGYMQ_CKPT_7_WORK.workers")


@pytest.mark.parametrize("url, said", [
    ("http://h:4222", "expected nats://HOST:PORT"),
    ("nats://h:4222?name=a.b", "name='a.b' must be 1-64 letters"),
    ("nats://h:4222?acks=3", "unknown key(s) acks; known: name, ack_wait, max_deliver"),
    ("nats://h:4222?ack_wait=0.5", "ack_wait=0.5 is too short"),
    ("nats://h:4222?max_deliver=two", "max_deliver a whole number"),
    ("nats://h:4222?max_deliver=0", "max_deliver=0 must be at least 1"),
])
def test_a_bad_queue_url_says_what_is_wrong(url, said):
    with pytest.raises(QueueAddressError) as caught:
        QueueAddress.parse(url, where="--nats")
    assert said in str(caught.value) and str(caught.value).startswith(f"--nats={url}")


def _record(turns: int = 1, text: str = "ok") -> EpisodeRecord:
    turn = Turn(index=0, observation=text, reply="Action: go", action="go", feedback=text, reward=1.0, done=True,
                model_latency_s=0.1, env_latency_s=0.01)
    return EpisodeRecord(run_id="r1", env="Maze", task_index=3, repeat=1, reward=1.0, success=True, rounds=turns,
                         stop_reason="done", started_at="2025-01-01T00:00:00+00:00", duration_s=1.5,
                         model="reference", turns=(turn,) * turns, node="fleetnode", worker="w2")


def test_a_work_item_and_a_result_come_back_as_they_went():
    item = WorkItem(run_id="r1", env="Maze", task_index=3, repeat=1, generation=2, max_rounds=15, timeout_s=60.0,
                    retries=1, min_reward=0.5, nodeid="suites/maze.yaml::Maze[3]", sampling={"temperature": 0.0})
    data, headers = encode(item.to_payload())
    assert WorkItem.from_payload(decode(data, headers)) == item
    assert item.msg_id == "r1:Maze:3:r1:g2"
    result = Result(_record(), worker="w2", delivery=3, generation=2)
    data, headers = encode(result.to_payload())
    back = Result.from_payload(decode(data, headers))
    assert back == result and back.record.worker == "w2"
    assert result.msg_id() == "r1:Maze:3:r1:g2:a3"


def test_a_large_result_is_compressed_and_says_so():
    result = Result(_record(turns=200, text="x" * 2000), worker="w1", delivery=1, generation=1)
    data, headers = encode(result.to_payload())
    assert headers == {ENCODING_HEADER: "zlib"} and len(data) < 256 * 1024
    assert Result.from_payload(decode(data, headers)).record == result.record


@pytest.mark.parametrize("data, said", [
    (b"not json", "not a queue message"),
    (b"[1, 2]", "a JSON object was expected"),
])
def test_garbage_on_a_queue_subject_is_a_wire_error(data, said):
    with pytest.raises(WireError, match=said):
        decode(data, None)


def test_a_work_item_missing_a_field_is_named_malformed():
    with pytest.raises(WireError, match="malformed work item .*KeyError.*max_rounds"):
        WorkItem.from_payload({"kind": "work", "run_id": "r", "env": "Maze", "task_index": 1, "repeat": 1,
                               "generation": 1, "timeout_s": 5, "retries": 1})
    with pytest.raises(WireError, match="not a result"):
        Result.from_payload({"kind": "work"})


def test_a_heartbeat_is_a_valid_field_status_and_a_run_status_is_not_taken_for_one():
    beat = Heartbeat(worker="w1", queue="agentgym", profile="4090", model="qwen", capacity=4, load=1,
                     envs=("Maze", "Wordle"), host="node-a")
    payload = beat.to_payload()
    schema = load_schema("agentgym.field.status.v1")
    jsonschema.validate(payload, schema)
    assert Heartbeat.from_payload(payload).describe() == "w1 (4090, qwen, load 1/4)"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**payload, "load": -1}, schema)
    with pytest.raises(jsonschema.ValidationError):  # a run's status still needs its run fields
        jsonschema.validate({k: v for k, v in payload.items() if k != "queue"} | {"status": "started"}, schema)
    assert Heartbeat.from_payload({"status": "started", "node": "x"}) is None


def test_a_bad_queue_option_is_a_usage_error(pytester):
    suites(pytester.path, Maze="0-1")
    refused = settings_refusal(pytester, "suites", "--agentgym-queue=nats://h:4222?acks=1")
    assert "--agentgym-queue: nats://h:4222?acks=1: unknown key(s) acks" in refused


def test_a_queue_with_xdist_is_a_usage_error(tmp_path):
    suites(tmp_path, Maze="0-1")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", "-n", "2",
                          "--agentgym-queue=nats://127.0.0.1:1"], cwd=tmp_path, capture_output=True, text=True,
                         env=env_with_repo(), timeout=120)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--agentgym-queue and pytest-xdist (-n) do not go together" in run.stderr


def test_a_coordinator_with_no_nats_server_records_every_episode_as_a_harness_error(tmp_path):
    from helpers.run_dirs import read_episodes

    suites(tmp_path, Maze="0-1")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                          "--agentgym-queue=nats://127.0.0.1:1", "--agentgym-run-id=noqueue"], cwd=tmp_path,
                         capture_output=True, text=True, env=env_with_repo(), timeout=120)
    assert run.returncode == 3, run.stdout + run.stderr  # infrastructure: nothing was played
    assert "NO WORK QUEUE, every episode will be an error: NATS at nats://127.0.0.1:1 unreachable" in run.stdout
    assert "agentgym: NOT PLAYED: Maze: no work queue: NATS at nats://127.0.0.1:1 unreachable" in run.stdout
    rows = read_episodes(tmp_path / "reports" / "noqueue")
    assert [(r["error"]["type"], r["error"]["where"]) for r in rows] == [("QueueUnavailable", "harness")] * 2
