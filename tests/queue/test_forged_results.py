"""Issue 39's forger: a NATS client beside a run's one honest worker overhears every work
item and answers it first with a result of its own, copying the item's fingerprint. The
coordinator counts none of them (queue/acceptance.py), every episode is the worker's, and
run.json's notes and the run's summary name the forger and how many it sent.

Real processes: the test's own nats-server (JetStream, a free port), one
`pytest-agentgym worker` (the reference agent's random policy, so that its honest
results fail the suite's gate where the forged ones, all reward 1.0, would pass it), the
pytest coordinator, and the forger (tests/helpers/queue_forger.py) in this process.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections import Counter
from datetime import datetime, timezone

import pytest

from helpers.nats_server import NatsServer, read_stream
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.queue_forger import Forger
from helpers.run_dirs import read_episodes
from pytest_agentgym.queue.address import QueueAddress
from pytest_agentgym.queue.wire import Result, WorkItem
from pytest_agentgym.results.records import EpisodeRecord

from pytest_agentgym.worker import serve

pytestmark = [pytest.mark.faults, pytest.mark.heavy, pytest.mark.skipif(
    not hasattr(serve, "played_before"),
    reason="the worker still takes any stored result on an item's subject as its own earlier play (a forged one "
           "makes it ack the item unplayed): worker/serve.py's lost-ack lookup must call "
           "queue.acceptance.played_before (/work/briefs/out/h2-requests.md)")]

RUN = "forged"
TASKS = 20
#: what the forger sends in the honest worker's name, on the subjects of tasks 0-3
AS_THE_WORKER = {0: dict(model="FORGED"), 1: dict(checkpoint="forged.ckpt"), 2: dict(run_id="another-run"),
                 3: dict(task_index=4)}
#: tasks whose forged result takes the msg id the honest worker's first delivery will use, so
#: JetStream drops the honest result as a duplicate unless the worker publishes it again
SQUATTED = range(5, 10)


def forged_record(item: WorkItem, worker: str, **change) -> EpisodeRecord:
    """An episode that looks played and passed, reward 1.0."""
    fields = dict(run_id=item.run_id, env=item.env, task_index=item.task_index, repeat=item.repeat, reward=1.0,
                  success=True, rounds=1, stop_reason="done", started_at=datetime.now(timezone.utc).isoformat(),
                  duration_s=0.1, model="FORGED", outcome="passed", nodeid=item.nodeid, checkpoint=item.checkpoint,
                  worker=worker, max_rounds=item.max_rounds, sampling=dict(item.sampling), generation=item.generation)
    return EpisodeRecord(**{**fields, **change})


def forge(address: QueueAddress):
    def results(item: WorkItem) -> list[tuple[str, Result]]:
        subject = address.result_subject(item.run_id, item.env, item.task_index, item.repeat)
        forged = Result(forged_record(item, "forger"), "forger", 1, item.generation, item.fingerprint)
        made = [(subject, forged, forged.msg_id()) if item.task_index in SQUATTED else (subject, forged)]
        if item.task_index in AS_THE_WORKER:  # the honest worker's name, the run's model unless changed
            record = forged_record(item, "w1", **{"model": "random", **AS_THE_WORKER[item.task_index]})
            made.append((subject, Result(record, "w1", 1, item.generation, item.fingerprint)))
        return made
    return results


def test_a_forger_beside_the_runs_worker_gets_nothing_recorded_and_is_named(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    url = f"{server.url}?name=forge&ack_wait=20"
    address = QueueAddress.parse(url)
    fleet = Fleet(tmp_path / "fleet", url)
    profile = worker_profile(tmp_path / "w.yaml", concurrency=2, latency_ms=40, name="honest")
    profile.write_text(profile.read_text().replace("kind: reference,", "kind: reference, policy: random,"))
    forger = None
    try:
        fleet.start("w1", profile=profile)
        fleet.wait_serving("w1")
        forger = Forger(server.url, address, forge(address))
        root = tmp_path / "project"
        suites(root, Maze=f"0-{TASKS - 1}")
        (root / "suites" / "maze.yaml").write_text(
            f"environment: Maze\ntasks: 0-{TASKS - 1}\ngates: [success_rate >= 0.95]\n")
        done = subprocess.run(pytest_command("suites", f"--agentgym-queue={url}", f"--agentgym-run-id={RUN}"),
                              cwd=root, capture_output=True, text=True, env=env_with_repo(), timeout=180)
        output = done.stdout + done.stderr
        forged_sent = list(forger.published)
        assert forger.problems == []
        stored = asyncio.run(read_stream(server.url, address.results_stream, address.results_of_run(RUN)))
    finally:
        if forger is not None:
            forger.close()
        fleet.stop_all()
        server.stop()

    # nothing forged was recorded: every episode is the honest worker's, played once
    run_dir = root / "reports" / RUN
    rows = read_episodes(run_dir)
    assert len(rows) == TASKS and {(r["model"], r["worker"], r["checkpoint"]) for r in rows} == {("random", "w1", None)}
    assert sorted(r["task_index"] for r in rows) == list(range(TASKS))
    assert fleet.output("w1").count(f"(run {RUN}):") == TASKS, fleet.output("w1")
    # the squatted msg ids: the worker saw its result dropped as another's and published it again
    republished = [line for line in fleet.log("w1").splitlines() if "was taken by another message" in line]
    assert sorted(int(re.search(rf"msg id {RUN}:Maze:(\d+):", line).group(1)) for line in republished) \
        == list(SQUATTED), fleet.log("w1")

    # the forger did its part: every work item answered on the run's results subjects
    assert len(forger.items) == TASKS and len(forged_sent) == TASKS + len(AS_THE_WORKER)
    senders = Counter(payload["worker"] for _, _, payload in stored)
    assert senders == {"forger": TASKS, "w1": TASKS + len(AS_THE_WORKER)}, senders

    # the exit status is the honest results': the random policy fails the gate the forged rewards would pass
    honest_rate = sum(r["success"] for r in rows) / TASKS
    assert honest_rate < 0.95, rows
    assert done.returncode == 1, output
    assert "FAILED: Maze success_rate" in output, output

    # run.json's notes and the summary name the forger, why and how many
    info = json.loads((run_dir / "run.json").read_text())
    notes = [n for n in info["notes"] if n.startswith("refused ")]
    by_worker = {n.split("from worker ")[1].split(" ")[0]: n for n in notes}
    assert set(by_worker) == {"'forger'", "'w1'"}, info["notes"]
    assert by_worker["'forger'"].startswith(f"refused {TASKS} result(s) from worker 'forger' (none recorded")
    assert f"not a worker of queue forge: it never answered the roll call nor sent a heartbeat ({TASKS} time(s))" \
        in by_worker["'forger'"]
    assert f"its record names model 'FORGED', the run's is 'random' ({TASKS} time(s))" in by_worker["'forger'"]
    assert by_worker["'w1'"].startswith(f"refused {len(AS_THE_WORKER)} result(s) from worker 'w1'")
    for said in ("its record names model 'FORGED', the run's is 'random' (1 time(s))",
                 "its record names checkpoint 'forged.ckpt', the run's is None (1 time(s))",
                 "its record is of run 'another-run', not this run's 'forged' (1 time(s))",
                 "its record's episode (environment, task, repeat) is not the one its subject names (1 time(s))"):
        assert said in by_worker["'w1'"], by_worker["'w1'"]
    for note in notes:
        assert f"agentgym: queue: {note}" in output, output
    assert info["status"] == "finished"
