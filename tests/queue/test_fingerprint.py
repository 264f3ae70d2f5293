"""A queue run is played under one fingerprint: work items carry it, workers that would
play under another (another model, another plugin version) refuse and say so, and the
coordinator records nothing played under another one.

The process tests run their own nats-server (JetStream, a free port) and two
`pytest-agentgym worker` processes: ``ref`` (the reference agent) and ``rnd`` (the same
agent with the random policy, model ``random``). The wire tests need no network.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import pytest_agentgym
from helpers.nats_server import NatsServer
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.fleet import FleetMismatch, pin
from pytest_agentgym.queue.meaning import RunMeaning, worker_fingerprint
from pytest_agentgym.queue.wire import (WIRE_VERSION, Heartbeat, Refusal, Result, WireError, WireVersionError,
                                        WorkItem, decode, encode)
from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.records import EpisodeRecord
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.run_dirs import read_episodes
from helpers.waiting import wait_until

pytestmark = pytest.mark.heavy

RUN_FP = fingerprint.build(model="reference", endpoint_kind="reference", checkpoint=None, envs={
    "Maze": {"max_rounds": 15, "sampling": {"temperature": 0.0, "max_tokens": 256}, "prompt_sha256": "ab" * 32,
             "server": None}})
SAMPLING = {"temperature": 0.0, "max_tokens": 256}


def _item(**overrides) -> WorkItem:
    meaning = RunMeaning()
    meaning.adopt(RUN_FP)
    fields = dict(run_id="r1", env="Maze", task_index=3, repeat=1, generation=1, max_rounds=15, timeout_s=60.0,
                  retries=1, sampling=dict(SAMPLING), fingerprint=meaning.for_episode("Maze", max_rounds=15,
                                                                                      sampling=dict(SAMPLING)))
    return WorkItem(**{**fields, **overrides})


def _mine(item: WorkItem, **overrides) -> dict:
    given = dict(model="reference", endpoint_kind="reference", checkpoint=None, node_sampling=dict(SAMPLING),
                 prompt_sha256="ab" * 32, server="embedded maze: Maze server 1.0 [0123456789ab]")
    return worker_fingerprint(item, **{**given, **overrides})


def _record() -> EpisodeRecord:
    return EpisodeRecord(run_id="r1", env="Maze", task_index=3, repeat=1, reward=1.0, success=True, rounds=3,
                         stop_reason="done", started_at="2025-01-01T00:00:00+00:00", duration_s=1.0,
                         model="reference")


def _beat(worker: str, model: str, **overrides) -> Heartbeat:
    fields = dict(worker=worker, queue="q", profile=f"{worker}node", model=model, capacity=2, load=0,
                  version=pytest_agentgym.__version__, endpoint_kind="reference")
    return Heartbeat(**{**fields, **overrides})


# -- the wire, no network ---------------------------------------------------------------------------

def test_a_worker_of_another_plugin_version_is_refused_and_its_result_never_recorded(monkeypatch):
    item = WorkItem.from_payload(decode(*encode(_item().to_payload())))
    assert item.fingerprint["plugin_version"] == pytest_agentgym.__version__
    assert item.fingerprint["model"] == "reference" and item.fingerprint["sampling"] == SAMPLING
    assert fingerprint.episode_differences(item.fingerprint, _mine(item)) == []  # the server: each worker's own

    # its heartbeat already tells the roll call, which names it and pins nothing from it
    pinned, refused = pin([_beat("old", "reference", version="0.0.9")], model=None, checkpoint=None,
                          address=QueueAddress.parse("nats://127.0.0.1:4222?name=q"))
    assert pinned is None and refused == [
        f"worker old (node oldnode) will refuse this run's work items: plugin_version: "
        f"'{pytest_agentgym.__version__}' run, '0.0.9' worker"]

    monkeypatch.setattr(pytest_agentgym, "__version__", "0.0.9")  # the worker's plugin is another version
    mine = _mine(item)
    differences = fingerprint.episode_differences(item.fingerprint, mine)
    assert differences == [f"plugin_version: '{item.fingerprint['plugin_version']}' run, '0.0.9' worker"]

    # a result it published anyway (a worker that does not check) is dropped, naming it
    meaning = RunMeaning()
    meaning.adopt(RUN_FP)
    result = Result.from_payload(decode(*encode(Result(_record(), "old", 1, 1, mine).to_payload())))
    assert meaning.problems(item.fingerprint, result) == differences
    meaning.dropped_result("old", differences)
    assert "dropped results from worker old" in meaning.notes()[0] and "'0.0.9' worker" in meaning.notes()[0]


def test_a_worker_that_would_send_other_sampling_or_prompts_refuses():
    item = _item()
    top_p = _mine(item, node_sampling={**SAMPLING, "top_p": 0.95})  # its node adds a key the run does not send
    assert fingerprint.episode_differences(item.fingerprint, top_p) == [
        "sampling: {max_tokens: 256, temperature: 0.0} run, {max_tokens: 256, temperature: 0.0, top_p: 0.95} worker"]
    hotter = _mine(item, node_sampling={"temperature": 0.7})  # the item's value is sent over the node's
    assert fingerprint.episode_differences(item.fingerprint, hotter) == []
    other = _mine(item, prompt_sha256="cd" * 32, model="random", checkpoint="/ckpt/x")
    assert [d.split(":")[0] for d in fingerprint.episode_differences(item.fingerprint, other)] == [
        "model", "checkpoint", "prompt_sha256"]
    named = _item(fingerprint={**item.fingerprint, "server": "embedded maze: Maze server 1.0 [aaaaaaaaaaaa]"})
    assert [d.split(":")[0] for d in fingerprint.episode_differences(named.fingerprint, _mine(named))] == ["server"]


@pytest.mark.parametrize("kind, make", [
    ("work", lambda: _item().to_payload()),
    ("result", lambda: Result(_record(), "w", 1, 1).to_payload()),
    ("refusal", lambda: Refusal("w", "r1", "r1:Maze:1:r1:g1", ("model: x",)).to_payload()),
])
def test_a_message_of_another_wire_version_is_refused_not_misread(kind, make):
    payload = make()
    parse = {"work": WorkItem, "result": Result, "refusal": Refusal}[kind].from_payload
    assert payload["v"] == WIRE_VERSION and parse(payload) is not None
    for other in (WIRE_VERSION - 1, WIRE_VERSION + 1):
        with pytest.raises(WireVersionError, match=f"of wire version {other}; .* speaks wire version {WIRE_VERSION}"):
            parse({**payload, "v": other})
    with pytest.raises(WireError, match="no wire version"):
        parse({k: v for k, v in payload.items() if k != "v"})


def test_the_roll_call_pins_one_model_and_never_mixes_two():
    address = QueueAddress.parse("nats://127.0.0.1:4222?name=q")
    both = [_beat("ref", "reference"), _beat("rnd", "random")]
    with pytest.raises(FleetMismatch, match=r"model 'random' via reference \(rnd\); model 'reference' via "
                                            r"reference \(ref\).*--agentgym-model=MODEL"):
        pin(both, model=None, checkpoint=None, address=address)
    pinned, refused = pin(both, model="reference", checkpoint=None, address=address)
    assert pinned == ("reference", "reference")
    assert refused == ["worker rnd (node rndnode) will refuse this run's work items: "
                       "model: 'reference' run, 'random' worker"]
    assert pin(both[:1], model=None, checkpoint=None, address=address) == (("reference", "reference"), [])
    old = Heartbeat.from_payload({k: v for k, v in _beat("old", "reference").to_payload().items() if k != "v"})
    assert pin([old], model=None, checkpoint=None, address=address)[0] is None  # an older worker pins nothing


# -- real processes ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """nats-server on a free port and two workers of one queue: ``ref`` serves model
    reference, ``rnd`` model random (the reference agent's random policy)."""
    base = tmp_path_factory.mktemp("fingerprint")
    server = NatsServer(base / "nats", jetstream=True)
    workers = Fleet(base / "fleet", f"{server.url}?name=fp&ack_wait=5&max_deliver=20")
    ref = worker_profile(base / "ref.yaml", concurrency=1, latency_ms=30, name="refnode")
    rnd = base / "rnd.yaml"
    rnd.write_text(worker_profile(rnd, concurrency=4, name="rndnode").read_text()
                   .replace("kind: reference,", "kind: reference, policy: random,"))
    try:
        workers.start("ref", profile=ref)
        workers.start("rnd", profile=rnd)
        workers.wait_serving("ref", "rnd")
        assert "model random via reference" in workers.output("rnd"), workers.output("rnd")
        yield workers
    finally:
        workers.stop_all()
        server.stop()


def _coordinate(root, url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(pytest_command("suites", f"--agentgym-queue={url}", *args), cwd=root,  # the header: no -q
                          capture_output=True, text=True, env=env_with_repo(), timeout=300)


def test_a_worker_of_another_model_plays_nothing_and_is_named(tmp_path, fleet):
    root = tmp_path / "project"
    suites(root, Maze="0-7", Wordle="0-3")
    done = _coordinate(root, fleet.url, "--agentgym-model=reference", "--agentgym-run-id=pinned")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "12 passed" in output, output
    # where the user sees it: the header names the worker and the difference
    assert "worker rnd (node rndnode) will refuse this run's work items: model: 'reference' run, " \
           "'random' worker" in output, output

    rows = read_episodes(root / "reports" / "pinned")
    assert len(rows) == 12
    assert {(r["model"], r["worker"]) for r in rows} == {("reference", "ref")}
    run = json.loads((root / "reports" / "pinned" / "run.json").read_text())
    assert run["model"] == "reference"
    assert (run["fingerprint"]["model"], run["fingerprint"]["endpoint_kind"]) == ("reference", "reference")
    assert any("worker rnd (node rndnode) will refuse" in n for n in run["notes"]), run["notes"]

    # rnd took items of the run and refused every one of them, saying why where its operator looks
    wait_until(lambda: "refused work items of run pinned" in fleet.output("rnd"), 30, "rnd says it refused",
               procs=(fleet.procs["rnd"],))
    assert "model: 'reference' run, 'random' worker" in fleet.output("rnd")
    assert "(run pinned)" not in fleet.output("rnd")  # the line of a played episode
    assert " playing pinned:" not in fleet.log("rnd")
    refusals = [n for n in run["notes"] if n.startswith("worker rnd refused this run's work items")]
    assert len(refusals) == 1 and "model: 'reference' run, 'random' worker" in refusals[0], run["notes"]
    # and at the end of the pytest output, with the run's summary
    assert f"agentgym: queue: {refusals[0]}" in output, output


def test_two_models_and_no_model_named_stop_the_run_before_any_episode(tmp_path, fleet):
    root = tmp_path / "project"
    suites(root, Maze="0-3")
    done = _coordinate(root, fleet.url, "--agentgym-run-id=mixed")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "agentgym: THE WORKERS DISAGREE, every episode will be an error" in output, output
    assert ("would play this run with different models or endpoint kinds: model 'random' via reference (rnd); "
            "model 'reference' via reference (ref)") in output, output
    assert "--agentgym-model=MODEL" in output
    rows = read_episodes(root / "reports" / "mixed")
    assert rows and all(r["error"] is not None and r["worker"] is None for r in rows), rows
    assert "(run mixed)" not in fleet.output("ref") + fleet.output("rnd")
