"""A queue run counts a result only from one of its workers and only for one of its
episodes (queue/acceptance.py): the rule for each reason, how the notes count what it
refused, and the coordinator applying it against a real nats-server, with this test
publishing heartbeats and results by hand (tests/helpers/queue_forger.py)."""

from __future__ import annotations

import dataclasses

import pytest

import pytest_agentgym
from helpers.nats_server import NatsServer
from helpers.queue_forger import QueueClient
from helpers.waiting import wait_until
from pytest_agentgym.engine.episode import EpisodeLimits, EpisodeRequest
from pytest_agentgym.envs.spec import DEFAULT_ENVS_FILE, load_specs
from pytest_agentgym.queue import acceptance
from pytest_agentgym.queue.acceptance import played_before, unaccepted
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.coordinator import QueueCoordinator
from pytest_agentgym.queue.meaning import RunMeaning
from pytest_agentgym.queue.wire import Heartbeat, Result, WorkItem, encode
from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.records import EpisodeRecord

RUN_FP = fingerprint.build(model="reference", endpoint_kind="reference", checkpoint=None, envs={
    "Maze": {"max_rounds": 15, "sampling": {}, "prompt_sha256": None, "server": None}})
ADDRESS = QueueAddress.parse("nats://127.0.0.1:4222?name=q")
SPEC = load_specs(DEFAULT_ENVS_FILE)["Maze"]


def _record(**overrides) -> EpisodeRecord:
    fields = dict(run_id="r1", env="Maze", task_index=3, repeat=1, reward=1.0, success=True, rounds=3,
                  stop_reason="done", started_at="2025-01-01T00:00:00+00:00", duration_s=1.0, model="reference",
                  outcome="passed")
    return EpisodeRecord(**{**fields, **overrides})


def _beat(worker: str = "w1", **overrides) -> Heartbeat:
    fields = dict(worker=worker, queue="q", profile="node", model="reference", capacity=2, load=0,
                  version=pytest_agentgym.__version__, endpoint_kind="reference")
    return Heartbeat(**{**fields, **overrides})


def _why(record: EpisodeRecord | None = None, *, beat: Heartbeat | None = _beat(), worker: str = "w1",
         came_on: str | None = None) -> list[str]:
    record = record or _record()
    return unaccepted(Result(record, worker, 1, 1), run_id="r1", run=RUN_FP, queue="q", beat=beat,
                      came_on=came_on or ADDRESS.result_subject("r1", "Maze", 3, 1),
                      expected_on=ADDRESS.result_subject("r1", record.env, record.task_index, record.repeat))


# -- the rule, no network -----------------------------------------------------------------------

def test_a_result_of_a_heard_worker_for_the_runs_episode_counts():
    assert _why() == []


def test_a_worker_never_heard_is_not_one_of_the_runs():
    assert _why(beat=None, worker="forger") == [
        "not a worker of queue q: it never answered the roll call nor sent a heartbeat"]


@pytest.mark.parametrize("beat, said", [
    (_beat(model="random"), "model: 'reference' run, 'random' worker"),
    (_beat(checkpoint="/ckpt/7"), "checkpoint: None run, '/ckpt/7' worker"),
    (_beat(endpoint_kind="openai"), "endpoint_kind: 'reference' run, 'openai' worker"),
    (_beat(version="0.0.9"), f"plugin_version: '{pytest_agentgym.__version__}' run, '0.0.9' worker"),
    (_beat(wire=1), "wire version 1 worker, 2 run"),
])
def test_a_worker_whose_heartbeat_refuses_the_run_does_not_count(beat, said):
    (reason,) = _why(beat=beat)
    assert reason.startswith("its heartbeat says it refuses this run: ") and said in reason, reason


@pytest.mark.parametrize("change, said", [
    (dict(run_id="r0"), "its record is of run 'r0', not this run's 'r1'"),
    (dict(model="FORGED"), "its record names model 'FORGED', the run's is 'reference'"),
    (dict(checkpoint="/ckpt/7"), "its record names checkpoint '/ckpt/7', the run's is None"),
])
def test_a_record_of_another_run_model_or_checkpoint_does_not_count(change, said):
    assert _why(_record(**change)) == [said]


@pytest.mark.parametrize("change", [dict(task_index=4), dict(repeat=2), dict(env="Wordle")])
def test_a_record_of_another_episode_than_its_subject_names_does_not_count(change):
    assert _why(_record(**change), came_on=ADDRESS.result_subject("r1", "Maze", 3, 1)) == [
        "its record's episode (environment, task, repeat) is not the one its subject names"]


def test_every_reason_is_named_and_the_notes_count_results_and_reasons():
    meaning = RunMeaning()
    forged = _record(model="FORGED", checkpoint="x")
    for _ in range(3):
        meaning.refused_result("forger", _why(forged, beat=None, worker="forger"))
    meaning.refused_result("w1", _why(_record(run_id="r0")))
    notes = meaning.notes()
    assert notes == (
        "refused 3 result(s) from worker 'forger' (none recorded; their episodes wait for a result from the run's "
        "own workers): its record names checkpoint 'x', the run's is None (3 time(s)); its record names model "
        "'FORGED', the run's is 'reference' (3 time(s)); not a worker of queue q: it never answered the roll call "
        "nor sent a heartbeat (3 time(s))",
        "refused 1 result(s) from worker 'w1' (none recorded; their episodes wait for a result from the run's "
        "own workers): its record is of run 'r0', not this run's 'r1' (1 time(s))")


@dataclasses.dataclass
class Stored:
    """A stored message as JetStream's get_msg gives it (the fields played_before reads)."""

    data: bytes
    headers: dict | None


def _stored(result: Result) -> Stored:
    return Stored(*encode(result.to_payload()))


@pytest.mark.parametrize("result, played", [
    (Result(_record(), "w1", 1, 1), True),
    (Result(_record(), "forger", 1, 1), False),  # another name
    (Result(_record(model="FORGED"), "w1", 1, 1), False),
    (Result(_record(checkpoint="/ckpt/7"), "w1", 1, 1), False),
    (Result(_record(run_id="r0"), "w1", 1, 1), False),
    (Result(_record(task_index=4), "w1", 1, 1), False),
    (Result(_record(), "w1", 1, 2), False),  # another generation's
    (Result(_record(), "w1", 1, 1, reissue=1), False),  # before the item was published again
])
def test_a_worker_takes_only_its_own_result_of_the_item_as_played_before(result, played):
    item = WorkItem(run_id="r1", env="Maze", task_index=3, repeat=1, generation=1, max_rounds=15, timeout_s=60.0,
                    retries=1)
    assert played_before(_stored(result), item, worker="w1", model="reference") is played
    assert played_before(Stored(b"{oops", None), item, worker="w1", model="reference") is False


# -- the coordinator, a real nats-server ----------------------------------------------------------

@pytest.fixture
def address(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    yield QueueAddress.parse(f"{server.url}?name=acc&ack_wait=30")
    server.stop()


@pytest.fixture
def client(address):
    made = QueueClient(address.server, address)
    yield made
    made.close()


def _coordinator(address: QueueAddress, written: list) -> QueueCoordinator:
    coord = QueueCoordinator(address, run_id="r1", model="reference", endpoint_kind="reference")
    coord.connect()
    coord.adopt_fingerprint(RUN_FP)
    coord.start(lambda r: written.append(r) or r)
    return coord


def _request(task: int) -> EpisodeRequest:
    return EpisodeRequest(run_id="r1", spec=SPEC, task_index=task, repeat=1,
                          limits=EpisodeLimits(max_rounds=15, timeout_s=60.0), nodeid=f"Maze[{task}]")


def _result(worker: str, task: int = 3, **change) -> Result:
    """A result played under the run's fingerprint (the work item's, copied)."""
    meaning = RunMeaning("reference")
    meaning.adopt(RUN_FP)
    return Result(_record(task_index=task, worker=worker, **change), worker, 1, 1,
                  meaning.for_episode("Maze", max_rounds=15, sampling={}))


def test_the_coordinator_refuses_forged_results_and_the_runs_worker_resolves_the_episode(address, client):
    written: list[EpisodeRecord] = []
    coord = _coordinator(address, written)
    try:
        future = coord.submit("Maze[3]", _request(3))
        client.beat(_beat("w1", queue="acc"))
        wait_until(lambda: "w1" in coord.workers, 10, "the coordinator hears w1")
        subject = address.result_subject("r1", "Maze", 3, 1)
        # w1's name on records of another model, checkpoint, run, episode: refused at once
        for forged in (_result("w1", model="FORGED"), _result("w1", checkpoint="/ckpt/x"),
                       _result("w1", run_id="r0"), _result("w1", task=4)):
            client.publish(forged, subject=subject)
        wait_until(lambda: coord.stats["unaccepted"] == 4, 10, lambda: f"4 refused: {coord.stats}")
        assert not future.done() and written == []  # the episode still waits for its worker's result
        client.publish(_result("w1"), subject=subject)
        record = future.result(timeout=10)
        assert (record.worker, record.model, record.task_index) == ("w1", "reference", 3)
        assert [r.worker for r in written] == ["w1"] and coord.stats["reissued"] == 0
    finally:
        coord.close()
    (note,) = coord.notes()
    assert note.startswith("refused 4 result(s) from worker 'w1'"), note
    for said in ("names model 'FORGED'", "names checkpoint '/ckpt/x'", "is of run 'r0'",
                 "is not the one its subject names"):
        assert f"{said}" in note and note.count("(1 time(s))") == 4, note


def test_a_result_from_a_worker_never_heard_is_refused_after_a_roll_call_goes_unanswered(address, client):
    written: list[EpisodeRecord] = []
    coord = _coordinator(address, written)
    try:
        future = coord.submit("Maze[3]", _request(3))
        client.publish(_result("forger"))
        wait_until(lambda: coord.stats["unaccepted"] == 1, acceptance.VOUCH_S + 10, "the forger's result refused")
        assert not future.done() and written == []
    finally:
        coord.close()
    assert coord.notes() == ("refused 1 result(s) from worker 'forger' (none recorded; their episodes wait for a "
                             "result from the run's own workers): not a worker of queue acc: it never answered the "
                             "roll call nor sent a heartbeat (1 time(s))",)


def test_a_worker_heard_only_when_its_result_makes_the_coordinator_call_the_roll_counts(address, client):
    written: list[EpisodeRecord] = []
    coord = _coordinator(address, written)
    try:
        future = coord.submit("Maze[3]", _request(3))
        client.answer_pings(_beat("late", queue="acc"))  # a worker that joined after the roll call
        assert "late" not in coord.workers
        client.publish(_result("late"))
        assert future.result(timeout=acceptance.VOUCH_S).worker == "late"
        assert "late" in coord.workers and coord.stats["unaccepted"] == 0
    finally:
        coord.close()
    assert coord.notes() == ()


def test_results_still_waiting_for_their_workers_when_the_run_ends_are_counted(address, client):
    coord = _coordinator(address, [])
    coord.submit("Maze[3]", _request(3))
    client.publish(_result("forger"))
    client.publish(dataclasses.replace(_result("forger"), delivery=2))
    wait_until(lambda: coord.stats["results"] == 2, 10, "both results read")
    coord.close()  # before VOUCH_S: judged as the run ends, so that the notes name them
    assert coord.stats["unaccepted"] == 2
    assert coord.notes()[0].startswith("refused 2 result(s) from worker 'forger'")
