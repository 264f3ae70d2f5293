"""Webhook URLs whose secret is in the *path* (Slack, Discord, Mattermost), in a whole run.

A real pytest run (the reference agent, two Maze episodes on the embedded server, a
real nats-server) is given three ``--agentgym-notify`` URLs:

* Slack's shape on Slack's own host, ``http://hooks.slack.com:PORT/services/T.../B.../SECRET``,
  reached through a real HTTP proxy on loopback that alone resolves ``hooks.slack.com``
  to 127.0.0.1 (tests/helpers/http_proxy.py), so the host rule of results/redact.py is
  the one at work;
* Discord's shape on loopback, ``/api/webhooks/ID/TOKEN`` (the marker rule);
* Mattermost's shape on loopback, ``/hooks/ID``, which the receiver answers 404, so the
  run has a "not delivered" line in its notes and on the terminal.

Each secret must reach the receiver (the posts arrive on the real paths) and appear in
none of: the ``.lock`` file read while the run is live, run.json (its ``command`` and
``notes``), report.html, episodes.jsonl, logs/, the NATS payloads, the terminal (its
"rerun with" line and the warning).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from helpers.http_proxy import RecordingProxy
from helpers.nats_server import NatsServer, Subscriber
from helpers.waiting import wait_until
from helpers.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.faults  # issue 39's findings are in the fault tier

SLACK_SECRET = "Xk9TqLm2Rv7WpZs4Nb8YcH3d"
DISCORD_TOKEN = "dScT0k3n-abc_DEFghiJ"
MATTERMOST_ID = "mm7hookid3abcdefghijk12345"
SECRETS = (SLACK_SECRET, DISCORD_TOKEN, MATTERMOST_ID)

DELIVERED = ("/services/", "/api/webhooks/")


def found(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.fixture(scope="module")
def hooked_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("webhook-secrets")
    (root / "suites").mkdir()
    (root / "suites" / "maze.yaml").write_text("environment: Maze\ntasks: 0-1\n")
    nats = NatsServer(root / "nats")
    (root / "node.yaml").write_text(
        "name: hooknode\n"
        "model: {endpoints: [{kind: reference, latency_ms: 200}]}\n"
        "limits: {max_rounds: 3, episode_timeout: 60, concurrency: 2}\n"
        f"nats: {{url: '{nats.url}'}}\n"
        "envs: {servers: spawn}\n")
    receiver = WebhookReceiver(lambda path: 204 if path.startswith(DELIVERED) else 404)
    proxy = RecordingProxy(hosts={"hooks.slack.com": "127.0.0.1"})
    slack = f"http://hooks.slack.com:{receiver.port}/services/T0001/B0002/{SLACK_SECRET}"
    discord = f"http://127.0.0.1:{receiver.port}/api/webhooks/123456789/{DISCORD_TOKEN}"
    mattermost = f"http://127.0.0.1:{receiver.port}/hooks/{MATTERMOST_ID}"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", f"--agentgym-node={root / 'node.yaml'}",
            f"--agentgym-notify={slack},{discord},{mattermost}", "--agentgym-run-id=hooked"]
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env["HTTP_PROXY"] = proxy.url
    run_dir = root / "reports" / "hooked"
    lock = run_dir / ".lock"

    def live_lock() -> str:
        try:
            text = lock.read_text()
            return text if "command" in json.loads(text or "{}") else ""
        except (OSError, ValueError):
            return ""

    async def play() -> tuple[int, str, str, list]:
        async with Subscriber(nats.url) as subscriber:
            proc = await asyncio.create_subprocess_exec(*args, cwd=root, env=env, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            output = asyncio.ensure_future(proc.communicate())
            await asyncio.to_thread(wait_until, lambda: live_lock() or output.done(), 120,
                                    "the run's .lock naming its command")
            held = live_lock()
            out, _ = await output
            await subscriber.settle()
            return proc.returncode, out.decode(), held, list(subscriber.received)

    try:
        code, output, held, received = asyncio.run(play())
    finally:
        receiver.close()
        proxy.close()
        nats.stop()
    return {"code": code, "output": output, "lock": held, "received": received, "run_dir": run_dir,
            "paths": receiver.paths, "proxied": proxy.targets(), "urls": (slack, discord, mattermost)}


def test_every_webhook_gets_its_real_url(hooked_run):
    assert hooked_run["code"] == 0, hooked_run["output"]
    assert sorted(hooked_run["paths"]) == sorted([f"/api/webhooks/123456789/{DISCORD_TOKEN}",
                                                  f"/hooks/{MATTERMOST_ID}",
                                                  f"/services/T0001/B0002/{SLACK_SECRET}"])
    slack = hooked_run["urls"][0]
    assert hooked_run["proxied"] == [slack]  # the Slack one went through the proxy, as a real host would


def test_the_lock_of_the_live_run_names_its_command_without_the_secrets(hooked_run):
    held = hooked_run["lock"]
    assert held, "the run ended before its .lock could be read"
    command = json.loads(held)["command"]
    assert "--agentgym-notify=http://hooks.slack.com:" in command
    assert "/services/***/***/***" in command and "/api/webhooks/***/***" in command
    assert found(held) == []


def test_no_file_of_the_run_holds_a_secret(hooked_run):
    run_dir: Path = hooked_run["run_dir"]
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    names = {path.relative_to(run_dir).as_posix() for path in files}
    assert {"run.json", "episodes.jsonl", "report.html"} <= names
    assert any(name.startswith("logs/") for name in names), names
    leaks = {name: found(path.read_text(errors="replace"))
             for name, path in zip(sorted(names), sorted(files, key=lambda p: p.relative_to(run_dir).as_posix()))}
    assert {name: secrets for name, secrets in leaks.items() if secrets} == {}
    info = json.loads((run_dir / "run.json").read_text())
    assert "/services/***/***/***" in info["command"]
    assert any(f"/hooks/*** not delivered: answered HTTP 404" in note for note in info["notes"]), info["notes"]
    assert "/services/***/***/***" in (run_dir / "report.html").read_text()


def test_no_nats_payload_holds_a_secret(hooked_run):
    received = hooked_run["received"]
    status = [payload for subject, _, payload in received if subject == "agentgym.field.status.v1"]
    assert status and "/services/***/***/***" in status[0]["config"]["command"]
    assert [found(json.dumps(payload)) for _, _, payload in received] == [[]] * len(received)


def test_the_terminal_shows_the_urls_redacted(hooked_run):
    lines = hooked_run["output"].splitlines()
    assert [line for line in lines if found(line)] == []
    rerun = [line for line in lines if line.startswith("agentgym: rerun with: ")]
    assert len(rerun) == 1 and "/services/***/***/***" in rerun[0] and "/api/webhooks/***/***" in rerun[0]
    assert any("notify http://127.0.0.1:" in line and "/hooks/*** not delivered" in line for line in lines)
