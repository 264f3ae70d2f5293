"""The work queue on a nats-server with users, permissions and TLS: the config of
docs/scale-out.md ("Running beyond one trusted machine"), read from the page itself, on a
real nats-server on a free loopback port with certificates made here.

A worker without credentials is refused; a worker's user cannot publish work items or
create streams; with credentials and mutual TLS a queue run plays the same episodes as
without them, and the run's events land in a stream through the events user.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.nats_server import NatsServer, queue_made, read_stream
from helpers.queue_fleet import Fleet, env_with_repo, pytest_command, suites, worker_profile
from helpers.run_dirs import read_episodes
from helpers.tls_certs import make_certs, server_tls_block
from helpers.waiting import wait_until

pytestmark = [pytest.mark.heavy]

PASSWORDS = {"AGENTGYM_COORDINATOR_PASSWORD": "coordinator-secret-1",
             "AGENTGYM_WORKER_PASSWORD": "worker-secret-2",
             "AGENTGYM_EVENTS_PASSWORD": "events-secret-3"}
MARKER = "<!-- nats-server-permissions:"


def documented_config() -> str:
    """The nats-server config block that follows the marker in docs/scale-out.md."""
    page = (REPO / "docs" / "scale-out.md").read_text()
    after = page.split(MARKER, 1)[1]
    found = re.search(r"```[a-z]*\n(.*?)```", after, re.S)
    assert found, "docs/scale-out.md: no code block after the permissions marker"
    return found.group(1)


@pytest.fixture
def certs(tmp_path):
    return make_certs(tmp_path / "tls")


@pytest.fixture
def secured(tmp_path, certs, monkeypatch):
    """A nats-server with JetStream, the documented users and permissions, and mutual TLS."""
    for name, value in PASSWORDS.items():
        monkeypatch.setenv(name, value)  # the workers and the coordinator inherit them
    server = NatsServer(tmp_path / "nats", jetstream=True, config=documented_config() + server_tls_block(certs),
                        env=PASSWORDS, scheme="tls")
    yield server
    server.stop()


def url_of(server: NatsServer, user: str | None, certs, **extra: str) -> str:
    keys = {"tls_ca": str(certs.ca), "tls_cert": str(certs.client_cert), "tls_key": str(certs.client_key)}
    if user:
        keys.update(user=user, password_env=f"AGENTGYM_{user.upper()}_PASSWORD")
    keys.update(extra)
    return f"{server.url}?" + "&".join(f"{k}={v}" for k, v in keys.items())


def worker_once(tmp_path, url: str, timeout: float = 60) -> subprocess.CompletedProcess:
    profile = worker_profile(tmp_path / "worker.yaml", concurrency=1)
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "worker", "--nats", url, "--node", str(profile),
                           "--name", "w", "--log-dir", str(tmp_path / "wlog"), "--reconnect", "2"],
                          cwd=tmp_path, capture_output=True, text=True, env=env_with_repo(), timeout=timeout)


def test_a_worker_without_credentials_is_refused_and_exits_2(tmp_path, secured, certs):
    result = worker_once(tmp_path, url_of(secured, None, certs))
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert f"NATS at {secured.url} refused the sign-in (no auth" in said, said


def test_a_worker_with_a_wrong_password_is_refused_and_the_password_is_not_shown(tmp_path, secured, certs,
                                                                                  monkeypatch):
    monkeypatch.setenv("AGENTGYM_WORKER_PASSWORD", "guessed")
    result = worker_once(tmp_path, url_of(secured, "worker", certs))
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert "refused the sign-in (user worker (password from $AGENTGYM_WORKER_PASSWORD)" in said, said
    assert "guessed" not in said


def test_a_client_that_does_not_trust_the_servers_ca_is_refused(tmp_path, secured, certs):
    result = worker_once(tmp_path, url_of(secured, "worker", certs, tls_ca=str(certs.other_ca)))
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert f"NATS at {secured.url} refused TLS" in said and "CERTIFICATE_VERIFY_FAILED" in said, said


def test_the_worker_user_cannot_publish_work_items_or_create_streams(secured, certs):
    from pytest_agentgym.queue import streams
    from pytest_agentgym.queue.address import QueueAddress

    coordinator = QueueAddress.parse(url_of(secured, "coordinator", certs))
    worker = QueueAddress.parse(url_of(secured, "worker", certs))

    async def attempt() -> tuple[list[str], list[str]]:
        nc = await streams.connect(coordinator, name="admin", reconnect_s=1)
        js = nc.jetstream(timeout=2)
        await streams.ensure_streams(js, coordinator)  # the coordinator's user may
        await streams.ensure_workers_consumer(js, coordinator)
        await nc.close()
        nc = await streams.connect(worker, name="intruder", reconnect_s=1)
        violations: list[str] = []

        async def noted(exc: BaseException) -> None:
            violations.append(str(exc))

        nc._error_cb = noted  # the server's -ERR for a denied publish comes here
        await nc.publish(worker.work_subject("someone", "Maze", 0, 0), b"{}")
        await nc.flush(timeout=2)
        js = nc.jetstream(timeout=1)
        failures = []
        for action in (js.add_stream(name="INTRUDER", subjects=["intruder.>"]),
                       js.delete_stream(worker.work_stream),
                       js.publish(worker.work_subject("someone", "Maze", 0, 0), b"{}")):
            try:
                await action
                failures.append("allowed")
            except Exception as exc:  # noqa: BLE001 - denied: no answer, or an error
                failures.append(type(exc).__name__)
        await nc.flush(timeout=2)
        await nc.close()
        return violations, failures

    violations, failures = asyncio.run(attempt())
    assert "allowed" not in failures, failures
    said = " ".join(violations).lower()
    assert 'permissions violation for publish to "agentgymq.agentgym.work.someone.maze.0.0"' in said, violations
    assert 'permissions violation for publish to "$js.api.stream.create.intruder"' in said, violations
    assert 'permissions violation for publish to "$js.api.stream.delete.agentgymq_agentgym_work"' in said, violations


def test_a_worker_user_cannot_subscribe_to_the_coordinators_inbox(secured, certs):
    from pytest_agentgym.queue import streams
    from pytest_agentgym.queue.address import QueueAddress

    coordinator = QueueAddress.parse(url_of(secured, "coordinator", certs))
    worker = QueueAddress.parse(url_of(secured, "worker", certs))

    async def attempt() -> tuple[bytes, list[str], list[str], int]:
        nc = await streams.connect(coordinator, name="pytest-agentgym coordinator inbox-test", reconnect_s=1,
                                         door="coordinator")
        spy = await streams.connect(worker, name="pytest-agentgym worker spy", reconnect_s=1, door="worker")
        violations: list[str] = []
        heard: list[str] = []

        async def noted(exc: BaseException) -> None:
            violations.append(str(exc).lower())

        async def listen(msg) -> None:
            heard.append(msg.subject)

        spy._error_cb = noted  # the server's -ERR for a denied subscription comes here
        for subject in ("_INBOX.>", "_INBOX_agentgym_coordinator.>", "_INBOX_agentgym_worker.>"):
            await spy.subscribe(subject, cb=listen)
        await spy.flush(timeout=2)
        # the coordinator's requests: their answers go to its inbox, under its own prefix
        js = nc.jetstream(timeout=2)
        await streams.ensure_streams(js, coordinator)
        answers = sum([bool(await js.stream_info(coordinator.work_stream)) for _ in range(3)])
        deadline = asyncio.get_running_loop().time() + 10
        while sum("subscription" in v for v in violations) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)  # polling the -ERRs that arrive asynchronously
        await spy.flush(timeout=2)  # the server has routed everything it would route to the spy
        prefix = bytes(nc._inbox_prefix)
        await spy.close()
        await nc.close()
        return prefix, violations, heard, answers

    prefix, violations, heard, answers = asyncio.run(attempt())
    assert prefix == b"_INBOX_agentgym_coordinator" and answers == 3
    said = " ".join(violations)
    assert 'permissions violation for subscription to "_inbox.>"' in said, violations
    assert 'permissions violation for subscription to "_inbox_agentgym_coordinator.>"' in said, violations
    assert "_inbox_agentgym_worker" not in said, violations  # its own inboxes it may read
    assert heard == [], heard  # not one of the coordinator's answers reached the worker's user


def test_with_credentials_and_mutual_tls_a_queue_run_plays_every_episode_and_publishes_its_events(
        tmp_path, secured, certs):
    root = tmp_path / "project"
    suites(root, Maze="0-3", Wordle="0-3")
    events = url_of(secured, "events", certs)
    coordinator_url = url_of(secured, "coordinator", certs, ack_wait="5")
    asyncio.run(_events_stream(url_of(secured, "coordinator", certs)))
    proc = subprocess.Popen(pytest_command("suites", f"--agentgym-queue={coordinator_url}",
                                           "--agentgym-run-id=secured", f"--agentgym-nats={events}"),
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env_with_repo())
    fleet = Fleet(tmp_path / "fleet", url_of(secured, "worker", certs))
    try:
        # the worker's user may not create the queue: the coordinator makes it, then waits for workers
        wait_until(lambda: queue_made(coordinator_url), 60, "the coordinator made the queue",
                   procs=(proc,))
        profile = worker_profile(tmp_path / "worker.yaml", concurrency=2)
        for name in ("w1", "w2"):
            fleet.start(name, profile=profile)
        output, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        codes = fleet.stop_all()
    assert proc.returncode == 0, output
    assert "user coordinator (password from $AGENTGYM_COORDINATOR_PASSWORD), TLS" in output, output
    rows = read_episodes(root / "reports" / "secured")
    assert sorted((r["env"], r["task_index"]) for r in rows) == [(env, i) for env in ("Maze", "Wordle")
                                                                  for i in range(4)]
    assert {r["worker"] for r in rows} <= {"w1", "w2"} and all(r["outcome"] == "passed" for r in rows), rows
    assert codes == {"w1": 0, "w2": 0}, (codes, fleet.output("w1"), fleet.output("w2"))
    stored = asyncio.run(_stored_events(url_of(secured, "coordinator", certs)))
    completed = [p for subject, _, p in stored if subject == "agentgym.episode.completed.v1"]
    assert sorted((p["env"], p["task_index"]) for p in completed) == sorted(
        (r["env"], r["task_index"]) for r in rows)
    for secret in PASSWORDS.values():
        assert secret not in output and secret not in (root / "reports" / "secured" / "run.json").read_text()


async def _events_stream(url: str) -> None:
    import nats

    from pytest_agentgym.transport.nats_options import nats_server

    server, auth = nats_server(url)
    nc = await nats.connect(server, **auth.connect_kwargs())
    await nc.jetstream().add_stream(name="AGENTGYM", subjects=["agentgym.>"])
    await nc.close()


async def _stored_events(url: str) -> list:
    from pytest_agentgym.transport.nats_options import nats_server

    server, auth = nats_server(url)
    return await read_stream(server, connect=auth.connect_kwargs())


def fleet_once(url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "fleet", "--nats", url, "--once", "--wait", "0.5"],
                          capture_output=True, text=True, env=env_with_repo(), timeout=60)


def test_fleet_signs_in_like_the_workers_and_says_when_it_is_refused(secured, certs):
    refused = fleet_once(url_of(secured, None, certs))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"pytest-agentgym fleet: NATS at {secured.url} refused the sign-in"), \
        refused.stderr
    shown = fleet_once(url_of(secured, "coordinator", certs))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"queue agentgym at {secured.url}: 0 worker(s)"), shown.stdout


def test_a_tls_url_to_a_server_without_tls_sends_nothing_and_exits_2(tmp_path, monkeypatch):
    # nats-py itself would connect in the clear and send the password (tls:// included)
    monkeypatch.setenv("AGENTGYM_WORKER_PASSWORD", "worker-secret-2")
    plain = NatsServer(tmp_path / "plain", jetstream=True, config="trace: true\n")
    try:
        url = plain.url.replace("nats://", "tls://") + "?user=worker&password_env=AGENTGYM_WORKER_PASSWORD"
        result = worker_once(tmp_path, url)
    finally:
        plain.stop()
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert f"{url.split('?')[0]} does not require TLS, and this URL asks for it" in said, said
    assert "CONNECT" not in plain.log_path.read_text()  # the server traced no sign-in


def test_a_worker_whose_user_may_not_create_the_queue_says_so_and_exits_2(tmp_path, secured, certs):
    result = worker_once(tmp_path, url_of(secured, "worker", certs))  # no coordinator has made the queue
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert "cannot create stream AGENTGYMQ_AGENTGYM_WORK" in said and "start the coordinator first" in said, said
