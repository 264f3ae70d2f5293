"""Structural pins of issue 11 (performance), none of them timed: one health-probe
client per server lifecycle, no per-call TypedDict transform when the model is
asked, xdist workers that read ahead, and finished records that the pytest
process does not keep once they are written."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from projects import episodes, make_project, run, suite
from pytest_agentgym.model.client import EndpointClient
from pytest_agentgym.process import health
from pytest_agentgym.process import managed as process

SLOW_SERVER = """\
import http.server, sys, time
time.sleep(1.5)  # not listening yet: the harness has to poll a few times
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_one_health_probe_client_serves_every_poll_of_a_server_lifecycle(tmp_path, monkeypatch):
    made, probes = [], []
    real_client, real_probe = health.probe_client, health.probe

    def counting_client():  # type: ignore[no-untyped-def]
        made.append(1)
        return real_client()

    def counting_probe(*args, **kwargs):  # type: ignore[no-untyped-def]
        probes.append(kwargs.get("client") if "client" in kwargs else (args[3] if len(args) > 3 else None))
        return real_probe(*args, **kwargs)

    monkeypatch.setattr(process, "probe_client", counting_client)
    monkeypatch.setattr(process, "probe", counting_probe)
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SERVER)
    server = process.ManagedServer("slow", command=[sys.executable, str(script), "{port}"],
                                   log_path=tmp_path / "slow.log", startup_timeout=30)
    try:
        server.start()
        assert server.is_alive()
    finally:
        server.stop()
    assert len(probes) >= 2, f"the server answered at once: the test did not poll ({(tmp_path / 'slow.log').read_text()})"
    assert len(made) == 1
    assert all(client is probes[0] and client is not None for client in probes)


class _ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(body)
        answer = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "Action:\nmove up"}}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):  # type: ignore[no-untyped-def]
        pass


def test_asking_the_model_skips_the_sdks_per_call_typed_dict_transform(monkeypatch):
    import openai._utils._transform as transform
    from openai.resources.chat.completions import completions

    calls = []
    real = transform.async_maybe_transform

    async def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(transform, "async_maybe_transform", counting)
    monkeypatch.setattr(completions, "async_maybe_transform", counting)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    messages = [{"role": "user", "content": f"observation {n}"} for n in range(40)]

    async def ask() -> list[str]:
        async with EndpointClient(f"http://127.0.0.1:{server.server_port}/v1", "m") as client:
            return [(await client.chat(messages[: n + 1])).text for n in range(0, 40, 8)]

    try:
        replies = asyncio.run(ask())
    finally:
        server.shutdown()
    assert replies == ["Action:\nmove up"] * 5
    assert calls == []
    assert [len(body["messages"]) for body in _ChatHandler.bodies[-5:]] == [1, 9, 17, 25, 33]
    assert _ChatHandler.bodies[-1]["messages"][-1] == {"role": "user", "content": "observation 32"}


READ_AHEAD_CONFTEST = """
import os
from pytest_agentgym.plugin.stash import HARNESS_KEY

def pytest_runtest_setup(item):
    engine = item.config.stash[HARNESS_KEY].resources.engine
    if engine is None or not hasattr(item.config, "workerinput"):
        return
    ahead = sum(engine.submitted(other.nodeid) for other in item.session.items if other is not item)
    with open(os.environ["AHEAD_LOG"], "a") as log:
        log.write(f"{item.config.workerinput['workerid']} {ahead}\\n")
"""


def test_xdist_workers_read_ahead_and_play_each_episode_once(pytester, monkeypatch):
    node = make_project(pytester, latency_ms=50)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-11\n")
    pytester.makeconftest(READ_AHEAD_CONFTEST)
    log = pytester.path / "ahead.log"
    monkeypatch.setenv("AHEAD_LOG", str(log))
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=ahead", "-n", "2",
                 "--agentgym-concurrency=4", "--agentgym-max-rounds=3")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    seen: dict[str, list[int]] = {}
    for line in log.read_text().split("\n"):
        if line:
            worker, ahead = line.split()
            seen.setdefault(worker, []).append(int(ahead))
    assert sorted(seen) == ["gw0", "gw1"]
    for worker, counts in seen.items():
        assert max(counts) >= 2, f"{worker} did not read ahead: {counts}"
    played = [(r["env"], r["task_index"], r["repeat"]) for r in episodes(pytester, "ahead")]
    assert sorted(played) == [("Maze", task, 1) for task in range(12)]


RETAINED_CONFTEST = """
import gc, os
import pytest
from pytest_agentgym.results.records import EpisodeRecord

def pytest_runtest_logfinish(nodeid, location):
    gc.collect()
    alive = sum(1 for o in gc.get_objects() if isinstance(o, EpisodeRecord))
    with open(os.environ["ALIVE_LOG"], "a") as log:
        log.write(f"{alive}\\n")

@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    carrying = sum(1 for reports in terminalreporter.stats.values() for r in reports
                   if getattr(r, "agentgym_record", None) is not None)
    with open(os.environ["ALIVE_LOG"], "a") as log:
        log.write(f"reports {carrying}\\n")
"""


def test_finished_records_are_not_kept_in_the_pytest_process(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-15\n")
    pytester.makeconftest(RETAINED_CONFTEST)
    log = pytester.path / "alive.log"
    monkeypatch.setenv("ALIVE_LOG", str(log))
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=kept",
                 "--agentgym-concurrency=2", "--agentgym-max-rounds=2")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    lines = log.read_text().split()
    assert len(episodes(pytester, "kept")) == 16
    counts = [int(n) for n in lines[:-2]] + [int(lines[-1])]
    alive_after_items, carrying_reports = counts[:-1], counts[-1]
    assert len(alive_after_items) == 16
    # once the last item is reported nothing is held (before: every record, twice over);
    # on the way, only those the engine has finished ahead of the items, each let go
    # as its item is reported
    assert alive_after_items[-1] <= 1, alive_after_items
    assert carrying_reports == 0


def test_an_env_client_reuses_its_connections(tmp_path):
    """The lean transport keeps connections alive: many requests, few connections."""
    from pytest_agentgym.transport import KeepAliveTransport

    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    transport = KeepAliveTransport()

    async def many() -> list[int]:
        async with httpx.AsyncClient(transport=transport) as client:
            url = f"http://127.0.0.1:{server.server_port}/v1/chat/completions"
            body = {"model": "m", "messages": []}
            answers = await asyncio.gather(*(client.post(url, json=body) for _ in range(4)))
            answers += [await client.post(url, json=body) for _ in range(20)]
            return [a.status_code for a in answers]

    try:
        statuses = asyncio.run(many())
    finally:
        server.shutdown()
    assert statuses == [200] * 24
    assert transport.opened == 4


_SPAWN_PATH = """
import sys
import pytest_agentgym.plugin, pytest_agentgym.run.evaluation, pytest_agentgym.results.ledger, pytest_agentgym.plugin.items
import pytest_agentgym.servers.pool
print(sorted(m for m in ("httpx", "jinja2", "openai", "fastapi") if m in sys.modules))
"""


def test_what_a_run_imports_before_it_spawns_its_servers_leaves_out_the_clients():
    """The servers are spawned at configure time (EvaluationRun.warm_up): the plugin, the
    run and the server pool must not import the HTTP client, the prompt templates or the
    SDK, so that the servers boot while those are imported."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SPAWN_PATH], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
