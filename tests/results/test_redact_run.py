"""A whole pytest run against a base URL with credentials in it.

``--agentgym-base-url=http://alice:secret@127.0.0.1:PORT/v1?api_key=s3cret``
points at a real HTTP endpoint (tests/helpers/model_faults.py) that records what it
receives; the run plays two Maze episodes on the embedded server and publishes
to a real nats-server. The credentials must reach the endpoint, and
``secret``/``s3cret`` must appear nowhere a person or a consumer reads: the
terminal, run.json, episodes.jsonl, report.html, logs/, the NATS payloads.
"""

from __future__ import annotations

import asyncio
import base64
import sys
from pathlib import Path

import pytest

from helpers.model_faults import FakeEndpoint, ok
from helpers.nats_server import NatsServer, Subscriber

SECRETS = ("secret", "s3cret")
REPLY = "Thought:\nup it is\n\nAction:\nmove up"


@pytest.fixture(scope="module")
def secret_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("redaction")
    (root / "suites").mkdir()
    (root / "suites" / "maze.yaml").write_text("environment: Maze\ntasks: 0-1\n")
    nats = NatsServer(root / "nats")
    (root / "node.yaml").write_text(
        "name: quietnode\n"
        "model: {endpoints: [{kind: reference}]}\n"
        "limits: {max_rounds: 3, episode_timeout: 60, concurrency: 2}\n"
        f"nats: {{url: '{nats.url}'}}\n"
        "envs: {servers: spawn}\n"
    )
    fake = FakeEndpoint(script=[ok(REPLY)], models=("fake-model",)).start()
    url = f"http://alice:secret@127.0.0.1:{fake.port}/v1?api_key=s3cret"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", f"--agentgym-node={root / 'node.yaml'}",
            f"--agentgym-base-url={url}", "--agentgym-model=fake-model", "--agentgym-run-id=quiet-run"]

    async def run() -> tuple[int, str, list]:
        async with Subscriber(nats.url) as subscriber:
            proc = await asyncio.create_subprocess_exec(*args, cwd=root, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            output, _ = await proc.communicate()
            await subscriber.settle()
            return proc.returncode, output.decode(), list(subscriber.received)

    try:
        code, output, received = asyncio.run(run())
    finally:
        fake.stop()
        nats.stop()
    return {"code": code, "output": output, "received": received, "fake": fake,
            "run_dir": root / "reports" / "quiet-run"}


def hidden(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def test_the_run_passes_and_the_credentials_reach_the_endpoint(secret_run):
    assert secret_run["code"] == 0, secret_run["output"]
    assert "run quiet-run finished (2 episodes)" in secret_run["output"]
    fake = secret_run["fake"]
    chats = [r for r in fake.requests if r.method == "POST"]
    assert len(chats) == 7  # the one-token chat that proves the route (model/endpoints.py), then two episodes of three rounds
    assert chats[0].body["max_tokens"] == 1
    assert {r.path for r in chats} == {"/v1/chat/completions?api_key=s3cret"}
    assert {r.headers["authorization"] for r in chats} == {"Basic " + base64.b64encode(b"alice:secret").decode()}


def test_no_file_of_the_run_shows_the_credentials(secret_run):
    run_dir: Path = secret_run["run_dir"]
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    names = {path.relative_to(run_dir).as_posix() for path in files}
    assert {"run.json", "episodes.jsonl", "report.html"} <= names
    assert any(name.startswith("logs/") for name in names), names
    leaks = {path.name: hidden(path.read_text(errors="replace")) for path in files}
    assert {name: found for name, found in leaks.items() if found} == {}
    assert "http://***@127.0.0.1:" in (run_dir / "run.json").read_text()


def test_no_nats_payload_shows_the_credentials(secret_run):
    received = secret_run["received"]
    subjects = sorted({subject for subject, _, _ in received})
    assert subjects == ["agentgym.episode.completed.v1", "agentgym.eval.batch.completed.v1",
                        "agentgym.field.status.v1"]
    status = [p for s, _, p in received if s == "agentgym.field.status.v1"]
    assert status[0]["config"]["endpoint"].startswith("http://***@127.0.0.1:")
    assert "api_key=***" in status[0]["config"]["command"]
    assert [hidden(repr(payload)) for _, _, payload in received] == [[]] * len(received)


def test_the_terminal_shows_no_credentials_outside_the_endpoint_header(secret_run):
    lines = secret_run["output"].splitlines()
    header = [line for line in lines if line.startswith("agentgym: model ")]
    assert len(header) == 1
    rest = [line for line in lines if line not in header]
    assert [line for line in rest if hidden(line)] == []
    assert any(line.startswith("agentgym: rerun with: ") and "api_key=***" in line for line in rest)
    assert " nan" not in secret_run["output"].lower()


# lead: run.py must redact the endpoint it prints in header_lines (chosen.base_url) and
# RunInfo.endpoint; call pytest_agentgym.results.redact.redact_url on it. Flips to XPASS (an error
# under strict) once it does.
def test_the_endpoint_header_line_shows_no_credentials(secret_run):
    header = [line for line in secret_run["output"].splitlines() if line.startswith("agentgym: model ")]
    assert header and hidden(header[0]) == []
