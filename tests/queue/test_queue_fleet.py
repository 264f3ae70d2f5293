"""The work queue end to end: a pytest coordinator and `pytest-agentgym worker`
processes against a real nats-server with JetStream on a free port.

Faults are real: a worker SIGKILLed mid-episode, nats-server restarted mid-run,
the coordinator SIGKILLed and resumed, a worker that cannot serve an environment.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers.nats_server import NatsServer, read_stream
from pytest_agentgym.worker.serve import nak_delay
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.run_dirs import read_episodes
from helpers.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.heavy]


@pytest.fixture
def nats(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    yield server
    server.stop()


@pytest.fixture
def fleet(tmp_path, nats):
    made: list[Fleet] = []

    def make(query: str) -> Fleet:
        made.append(Fleet(tmp_path / "fleet", f"{nats.url}?{query}"))
        return made[-1]

    yield make
    for one in made:
        one.stop_all()


def coordinator(root: Path, url: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(pytest_command("suites", f"--agentgym-queue={url}", "-q", *args), cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env_with_repo())


def finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    output, _ = proc.communicate(timeout=timeout)
    return output


def keyed(rows: list[dict]) -> dict[tuple, dict]:
    return {(r["env"], r["task_index"], r["repeat"]): r for r in rows}


def stored_results(url: str, stream: str, subject: str) -> list[dict]:
    """Every result the results stream holds on ``subject`` (with its delivery number)."""
    return [payload for _, _, payload in asyncio.run(read_stream(url, stream, subject))]


def test_a_60_episode_run_over_3_workers_survives_a_worker_killed_mid_episode(tmp_path, fleet, nats):
    root = tmp_path / "project"
    suites(root, Maze="0-19", Wordle="0-19", TextCraft="0-19")
    profile = worker_profile(tmp_path / "worker.yaml", concurrency=2, latency_ms=40)
    url = "name=accept&ack_wait=3&max_deliver=5"
    workers = fleet(url)
    for name in ("w1", "w2", "w3"):
        workers.start(name, profile=profile)
    workers.wait_serving("w1", "w2", "w3")

    proc = coordinator(root, workers.url, "--agentgym-run-id=fleet")
    wait_until(lambda: len(workers.playing("w1")) > 0, 120, "w1 plays an episode",
               procs=(proc, workers.procs["w1"]))
    workers.kill("w1")  # SIGKILL: no nak, no ack; JetStream redelivers after AckWait
    lost = workers.playing("w1")
    output = finish(proc)
    assert proc.returncode == 0, output
    assert "60 passed" in output, output

    rows = read_episodes(root / "reports" / "fleet")
    assert len(rows) == 60 and len(keyed(rows)) == 60, Counter((r["env"], r["task_index"]) for r in rows)
    assert {r["worker"] for r in rows} <= {"w1", "w2", "w3"} and len({r["worker"] for r in rows}) >= 2
    by_msg_id = {f"fleet:{r['env']}:{r['task_index']}:r{r['repeat']}:g1": r for r in rows}
    for msg_id in lost:  # the killed worker's episodes were played again by another worker
        assert by_msg_id[msg_id]["worker"] in {"w2", "w3"}, by_msg_id[msg_id]
    deliveries = {(p["record"]["env"], p["record"]["task_index"]): p["delivery"]
                  for p in stored_results(nats.url, "AGENTGYMQ_ACCEPT_RESULTS", "agentgymq.accept.results.fleet.>")}
    assert any(deliveries[(by_msg_id[m]["env"], by_msg_id[m]["task_index"])] >= 2 for m in lost)
    assert (root / "reports" / "fleet" / "report.html").is_file()
    from pytest_agentgym.report.render import render_run_dir

    page = render_run_dir(root / "reports" / "fleet", output=tmp_path / "plain.html", compress=False).read_text()
    assert all(f'"worker":"{r["worker"]}"' in page for r in rows)  # the episode panel names the worker

    # the same selection in one process: the same reward for every episode
    single = subprocess.run(pytest_command("suites", f"--agentgym-node={profile}", "--agentgym-run-id=single",
                                           "--agentgym-concurrency=4", "-q"),
                            cwd=root, capture_output=True, text=True, env=env_with_repo(), timeout=600)
    assert single.returncode == 0, single.stdout + single.stderr
    local = keyed(read_episodes(root / "reports" / "single"))
    assert {k: r["reward"] for k, r in keyed(rows).items()} == {k: r["reward"] for k, r in local.items()}

    # the results the workers sent keep what rebuilds each conversation: both runs export the same ones
    def exported(run_id: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "pytest_agentgym", "export", str(root / "reports" / run_id)],
                              capture_output=True, text=True, env=env_with_repo(), timeout=120)
        assert done.returncode == 0, done.stderr
        lines = (root / "reports" / run_id / "export" / "chat-jsonl.jsonl").read_text().splitlines()
        return {(r["env"], r["task_index"]): r["messages"] for r in map(json.loads, lines)}

    assert exported("fleet") == exported("single") and len(exported("fleet")) == 60


def test_a_nats_server_restart_mid_run_loses_nothing_and_counts_nothing_twice(tmp_path, fleet, nats):
    root = tmp_path / "project"
    suites(root, Maze="0-14", Wordle="0-14")
    profile = worker_profile(tmp_path / "worker.yaml", concurrency=2, latency_ms=40)
    workers = fleet("name=restart&ack_wait=5&max_deliver=5")
    workers.start("w1", profile=profile)
    workers.start("w2", profile=profile)
    workers.wait_serving("w1", "w2")
    proc = coordinator(root, workers.url, "--agentgym-run-id=restarted")
    run_dir = root / "reports" / "restarted"
    wait_until(lambda: len(read_episodes(run_dir)) >= 5, 120, "5 episodes recorded", procs=(proc,))
    nats.restart()  # SIGTERM, same port and store: streams and consumers survive
    output = finish(proc)
    assert proc.returncode == 0, output
    assert "30 passed" in output, output
    rows = read_episodes(run_dir)
    assert len(rows) == 30 and len(keyed(rows)) == 30
    assert all(r["error"] is None for r in rows)
    assert all(p.poll() is None for p in workers.procs.values()), "a worker gave up on the restart"


def test_a_worker_that_cannot_serve_an_env_naks_it_to_one_that_can(tmp_path, fleet):
    root = tmp_path / "project"
    suites(root, Maze="0-3", Wordle="0-3")
    workers = fleet("name=split&ack_wait=5&max_deliver=20")
    workers.start("maze-only", profile=worker_profile(tmp_path / "m.yaml", skip=("Wordle",), concurrency=2))
    workers.start("wordle-only", profile=worker_profile(tmp_path / "w.yaml", skip=("Maze",), concurrency=2))
    workers.wait_serving("maze-only", "wordle-only")
    proc = coordinator(root, workers.url, "--agentgym-run-id=split", "-v")
    output = finish(proc)
    assert proc.returncode == 0, output
    assert "2 worker(s), 4 slot(s): maze-only" in output, output  # the header's roll call
    played_by = {(r["env"], r["worker"]) for r in read_episodes(root / "reports" / "split")}
    assert played_by == {("Maze", "maze-only"), ("Wordle", "wordle-only")}


def test_the_nak_delay_of_an_unserved_item_varies_around_the_configured_delay():
    # A fixed delay lets two workers that nak each other's items fall into step, each
    # getting back the item it has just naked until MaxDeliver (see nak_delay).
    rng = random.Random(7)
    delays = [nak_delay(2.0, rng) for _ in range(200)]
    assert all(1.0 <= d < 3.0 for d in delays)
    assert len(set(delays)) == 200 and min(delays) < 1.5 and max(delays) > 2.5


def test_an_item_no_worker_can_serve_becomes_worker_lost_after_max_deliver(tmp_path, fleet):
    root = tmp_path / "project"
    suites(root, Maze="0-1", Wordle="0-1")
    workers = fleet("name=lost&ack_wait=3&max_deliver=2")
    workers.start("maze-only", profile=worker_profile(tmp_path / "m.yaml", skip=("Wordle",)), nak_delay=0.2)
    workers.wait_serving("maze-only")
    proc = coordinator(root, workers.url, "--agentgym-run-id=lost")
    output = finish(proc)
    assert proc.returncode == 1, output
    assert "2 passed, 3 errors" in output, output  # the two episodes and the error-budget gate
    assert "harness:WorkerLost" in output or "WorkerLost" in output, output
    rows = keyed(read_episodes(root / "reports" / "lost"))
    assert {k: (r["error"] or {}).get("type") for k, r in rows.items()} == {
        ("Maze", 0, 1): None, ("Maze", 1, 1): None, ("Wordle", 0, 1): "WorkerLost", ("Wordle", 1, 1): "WorkerLost"}
    assert "delivered 2 time(s) (MaxDeliver 2)" in rows[("Wordle", 0, 1)]["error"]["message"]


def test_a_killed_coordinator_resumes_and_collects_what_workers_stored_meanwhile(tmp_path, fleet, nats):
    root = tmp_path / "project"
    suites(root, Maze="0-11")
    workers = fleet("name=resume&ack_wait=20&max_deliver=5")
    workers.start("w1", profile=worker_profile(tmp_path / "w.yaml", concurrency=2, latency_ms=40))
    workers.wait_serving("w1")
    proc = coordinator(root, workers.url, "--agentgym-run-id=resumed")
    run_dir = root / "reports" / "resumed"
    wait_until(lambda: len(read_episodes(run_dir)) >= 2, 120, "2 episodes recorded", procs=(proc,))
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    before = len(read_episodes(run_dir))
    # the worker goes on playing the published items; their results wait in the stream
    wait_until(lambda: workers.output("w1").count("(run resumed): passed") == 12, 120, "w1 played all 12",
               procs=(workers.procs["w1"],))
    again = coordinator(root, workers.url, f"--agentgym-resume={run_dir}")
    output = finish(again)
    assert again.returncode == 0, output
    rows = read_episodes(run_dir)
    assert len(keyed(rows)) == 12 and len(rows) == 12, [(r["task_index"], r["generation"]) for r in rows]
    assert sum(r["generation"] == 2 for r in rows) == 12 - before
    assert workers.output("w1").count("(run resumed): passed") == 12  # nothing was played twice
    results = stored_results(nats.url, "AGENTGYMQ_RESUME_RESULTS", "agentgymq.resume.results.resumed.>")
    assert len(results) == 12
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_a_queue_run_records_what_a_workers_server_says_of_its_data(tmp_path, fleet, nats, monkeypatch):
    """The coordinator starts no environment server: a worker's embedded WebShop on the
    project catalogue says it is not comparable with published scores (its GET /embedded/data),
    the worker's results carry that, and the queue run's run.json records it, as a pytest run's does."""
    pytest.importorskip("thefuzz", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")
    monkeypatch.delenv("AGENTENV_WEBSHOP_DATA", raising=False)
    root = tmp_path / "project"
    suites(root, WebShop="0-3", Maze="0-1")
    profile = worker_profile(tmp_path / "worker.yaml", concurrency=2)
    profile.write_text(profile.read_text().replace(", WebShop", ""))  # this worker serves WebShop
    workers = fleet("name=datanote&ack_wait=30")
    workers.start("w1", profile=profile)
    workers.wait_serving("w1")
    proc = coordinator(root, workers.url, "--agentgym-run-id=noted")
    output = finish(proc)
    assert proc.returncode == 0, output
    assert len(read_episodes(root / "reports" / "noted")) == 6
    notes = json.loads((root / "reports" / "noted" / "run.json").read_text())["notes"]
    assert [n for n in notes if "project catalogue" in n] == [
        "WebShop plays the project catalogue: not comparable with published WebShop scores "
        "(AGENTENV_WEBSHOP_DATA names WebShop's own files; docs/envs/webshop.md) (workers w1)"]
