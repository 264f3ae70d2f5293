"""NATS events of whole pytest runs, against a real nats-server on a free port:
what a subscriber sees, JetStream across a server restart, and a run with no
server at all (outbox, then publish-outbox)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from pytest_agentgym.publish import load_schema
from helpers.nats_server import NatsServer, Subscriber, free_port, read_stream
from helpers.waiting import wait_until

pytestmark = pytest.mark.heavy

EPISODE = "agentgym.episode.completed.v1"
BATCH = "agentgym.eval.batch.completed.v1"
STATUS = "agentgym.field.status.v1"


def project(root: Path, nats_url: str, *, latency_ms: int = 0, create_stream: bool = False) -> list[str]:
    """A project with a node publishing to ``nats_url`` and two small suites; returns pytest args."""
    (root / "suites").mkdir()
    (root / "suites" / "maze.yaml").write_text("environment: Maze\ntasks: 0-3\n")
    (root / "suites" / "wordle.yaml").write_text("environment: Wordle\ntasks: 0-2\n")
    node = root / "node.yaml"
    node.write_text(
        "name: natsnode\n"
        f"model: {{endpoints: [{{kind: reference, latency_ms: {latency_ms}}}]}}\n"
        "limits: {max_rounds: 15, episode_timeout: 60, concurrency: 2}\n"
        f"nats: {{url: '{nats_url}', create_stream: {str(create_stream).lower()}}}\n"
        "envs: {servers: spawn}\n"
    )
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", f"--agentgym-node={node}"]


def validate(subject: str, payload: dict) -> None:
    jsonschema.validate(payload, load_schema(subject))


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_a_subscriber_sees_each_episode_once_each_batch_and_both_statuses(tmp_path, xdist):
    server = NatsServer(tmp_path / "nats")
    args = project(tmp_path, server.url) + ["--agentgym-run-id=subscribed", *xdist]

    async def run() -> tuple[int, list]:
        async with Subscriber(server.url) as subscriber:
            proc = await asyncio.create_subprocess_exec(*args, cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            output, _ = await proc.communicate()
            await subscriber.settle()
            assert proc.returncode == 0, output.decode()
            return proc.returncode, list(subscriber.received)

    try:
        _, received = asyncio.run(run())
    finally:
        server.stop()
    by_subject = Counter(subject for subject, _, _ in received)
    assert by_subject == {EPISODE: 7, BATCH: 2, STATUS: 2}
    episodes = [(p["env"], p["task_index"]) for s, _, p in received if s == EPISODE]
    assert sorted(episodes) == sorted([("Maze", i) for i in range(4)] + [("Wordle", i) for i in range(3)])
    assert sorted(p["status"] for s, _, p in received if s == STATUS) == ["finished", "started"]
    assert {p["env"]: p["n_episodes"] for s, _, p in received if s == BATCH} == {"Maze": 4, "Wordle": 3}
    assert len({msg_id for _, msg_id, _ in received}) == len(received)  # every msg id distinct
    for subject, _, payload in received:
        validate(subject, payload)
        assert payload["run_id"] == "subscribed"


def test_jetstream_holds_each_episode_once_across_a_server_restart(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)
    args = project(tmp_path, server.url, latency_ms=60, create_stream=True) + ["--agentgym-run-id=restart"]
    results = tmp_path / "reports" / "restart" / "episodes.jsonl"

    def finished() -> int:
        return results.read_text().count("\n") if results.exists() else 0

    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: finished() >= 2, 120, "two episodes finished", procs=(proc,))
        server.stop()
        wait_until(lambda: finished() >= 4, 120, "two more episodes finished during the outage", procs=(proc,))
        server.start()
        output, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, output.decode()
        stored = asyncio.run(read_stream(server.url))
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    counts = Counter(msg_id for subject, msg_id, _ in stored if subject == EPISODE)
    assert len(counts) == 7 and set(counts.values()) == {1}, counts
    assert Counter(s for s, _, _ in stored)[BATCH] == 2


def test_no_server_keeps_every_event_in_the_outbox_and_publish_outbox_delivers_once(tmp_path):
    port = free_port()  # nothing listens here during the run
    url = f"nats://127.0.0.1:{port}"
    args = project(tmp_path, url) + ["--agentgym-run-id=offline"]
    run = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir = tmp_path / "reports" / "offline"
    outbox = [json.loads(line) for line in (run_dir / "outbox.jsonl").read_text().splitlines()]
    assert Counter(e["subject"] for e in outbox) == {EPISODE: 7, BATCH: 2, STATUS: 2}
    assert "unreachable" in run.stdout or "outbox" in run.stdout

    server = NatsServer(tmp_path / "nats", jetstream=True, port=port)
    try:
        asyncio.run(_create_stream(url))
        deliver = [sys.executable, "-m", "pytest_agentgym", "publish-outbox", str(run_dir), "--nats", url]
        first = subprocess.run(deliver, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stdout + first.stderr
        second = subprocess.run(deliver, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stdout + second.stderr
        stored = asyncio.run(read_stream(url))
    finally:
        server.stop()
    ids = Counter(msg_id for _, msg_id, _ in stored)
    assert len(stored) == 11 and set(ids.values()) == {1}
    assert ids.keys() == {e["msg_id"] for e in outbox}


async def _create_stream(url: str) -> None:
    import nats

    nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2)
    try:
        await nc.jetstream().add_stream(name="AGENTGYM", subjects=["agentgym.>"])
    finally:
        await nc.close()
