"""Server lifecycle with real processes: spawn, health, death, restart, stop without
orphans, the harness dying or getting Ctrl-C, and the pool's choice per environment.

Every server here is a real process on 127.0.0.1; "is it gone" is checked with
psutil, polling with a deadline.
"""

from __future__ import annotations

import dataclasses

import asyncio
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import httpx
import psutil
import pytest
from helpers import REPO as ROOT
from helpers.env_idx_server import command as env_idx_command
from helpers.waiting import wait_until

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.envs.protocol import EnvClient, EnvHTTPError, EnvUnreachable
from pytest_agentgym.envs.spec import EnvSpec, load_default_specs
from pytest_agentgym.servers.lifecycle import (
    ANY_ANSWER,
    HEALTH_ENDPOINT,
    ManagedServer,
    ServerError,
    ServerPool,
    ServerStartError,
    ServerUnavailable,
    build_argv,
    free_port,
    plan_server,
    probe,
)

pytestmark = pytest.mark.heavy


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def webshop_server(tmp_path: Path, **kwargs) -> ManagedServer:
    return ManagedServer("WebShop", command=env_idx_command("webshop"),
                         log_path=tmp_path / "webshop.log", startup_timeout=60, **kwargs)


async def open_webshop(url: str, task_index: int = 0):
    async with EnvClient(url, env="WebShop", dialect="env_idx", timeout=10) as client:
        return await adapter_class("WebShop")().open(client, task_index)


async def step(url: str, env_id: int, action: str):
    async with EnvClient(url, env="WebShop", dialect="env_idx", timeout=10) as client:
        return await client.step(env_id, action)


# -- spawning and health ------------------------------------------------------------


def test_build_argv_fills_placeholders_without_a_shell():
    argv = build_argv("{python} -m pkg serve 'two words' --host {host} --port {port}",
                      host="127.0.0.1", port=4321, python="/opt/py")
    assert argv == ["/opt/py", "-m", "pkg", "serve", "two words", "--host", "127.0.0.1",
                    "--port", "4321"]
    assert build_argv(["{python}", "--port={port}"], host="h", port=1, python="p") == ["p", "--port=1"]


def test_spawned_server_answers_and_logs(tmp_path):
    with webshop_server(tmp_path) as server:
        assert server.is_alive() and server.poll() is None
        assert server.url == f"http://127.0.0.1:{server.port}"
        opening = asyncio.run(open_webshop(server.url))
        assert opening.first_observation.startswith("WebShop [SEP] Instruction:")
        proc = psutil.Process(server.pid)
        assert os.getsid(proc.pid) == proc.pid  # its own session
    log = (tmp_path / "webshop.log").read_text()
    assert "starting:" in log and str(server.port) in log


def test_command_that_exits_at_once_reports_exit_code_and_log_tail(tmp_path):
    server = ManagedServer("Broken", command=[
        "{python}", "-c", "import sys; print('missing data in /nowhere'); sys.exit(3)"],
        log_path=tmp_path / "broken.log")
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert info.value.exit_code == 3
    message = str(info.value)
    assert "exited with code 3" in message and "missing data in /nowhere" in message
    assert "Broken" in message and str(tmp_path / "broken.log") in message


def test_missing_executable_is_a_clear_start_error(tmp_path):
    server = ManagedServer("ALFWorld", command="no-such-alfworld-binary --port {port}",
                           log_path=tmp_path / "a.log")
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert "cannot run" in str(info.value) and "no-such-alfworld-binary" in str(info.value)


SILENT_SERVER = textwrap.dedent("""
    import socket, sys, time
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(8)
    held = []
    while True:
        conn, _ = sock.accept()
        held.append(conn)  # accept, never answer
""")


def test_spawned_server_that_never_answers_is_stopped_after_a_bounded_wait(tmp_path):
    script = tmp_path / "silent.py"
    script.write_text(SILENT_SERVER)
    server = ManagedServer("Silent", command=["{python}", str(script), "{port}"],
                           log_path=tmp_path / "silent.log", startup_timeout=2,
                           probe_timeout=0.5, stop_grace=2)
    with pytest.raises(ServerStartError) as info:
        server.start()
    message = str(info.value)
    assert "did not answer GET /" in message and "within 2 s" in message
    assert "accepts connections but nothing answered" in message
    assert server.pid is None and server.poll() is not None  # it was stopped


UNHEALTHY_SERVER = textwrap.dedent("""
    import http.server, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # the root answers; /health says "not yet"
            self.send_response(503 if self.path == "/health" else 200)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""")


def test_the_health_check_decides_what_counts_as_an_answer(tmp_path):
    script = tmp_path / "unhealthy.py"
    script.write_text(UNHEALTHY_SERVER)
    with ManagedServer("AnyAnswer", command=["{python}", str(script), "{port}"],
                       log_path=tmp_path / "any.log") as server:
        assert server.health == ANY_ANSWER and probe(server.url, 2.0) is None
        assert probe(server.url, 2.0, HEALTH_ENDPOINT) == "GET /health answered HTTP 503"
    strict = ManagedServer("Strict", command=["{python}", str(script), "{port}"], health=HEALTH_ENDPOINT,
                           log_path=tmp_path / "strict.log", startup_timeout=2, label="model server")
    with pytest.raises(ServerStartError) as info:
        strict.start()
    message = str(info.value)
    assert message.startswith("model server (")
    assert "did not answer GET /health with HTTP 200" in message and "answered HTTP 503" in message
    assert strict.pid is None and strict.poll() is not None  # it was stopped


def test_attaching_to_a_socket_that_never_answers_gives_a_bounded_wait(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    outcome: list[BaseException] = []

    def attach():
        try:
            ManagedServer("ALFWorld", url=url, startup_timeout=1.5, probe_timeout=0.5).start()
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    try:
        worker = threading.Thread(target=attach)
        worker.start()
        worker.join(30)  # generous liveness bound, not a timing claim
        assert not worker.is_alive(), "attach() kept waiting past its startup timeout"
    finally:
        listener.close()
    assert len(outcome) == 1 and isinstance(outcome[0], ServerStartError)
    message = str(outcome[0])
    assert url in message and "within 1.5 s" in message and "envs.ALFWorld.url" in message


# -- death and restart --------------------------------------------------------------


def test_server_killed_mid_episode_gives_unreachable_and_restarts_on_same_port(tmp_path):
    server = webshop_server(tmp_path).start()
    try:
        port = server.port
        opening = asyncio.run(open_webshop(server.url))
        os.kill(server.pid, signal.SIGKILL)
        wait_until(lambda: not server.is_alive(), 15, "the killed server is seen dead")
        assert server.poll() == -signal.SIGKILL
        with pytest.raises(EnvUnreachable) as info:
            asyncio.run(step(server.url, opening.env_id, "search[mug]"))
        assert info.value.env_id == opening.env_id and "/step" in str(info.value)

        server.restart()
        assert server.port == port and server.is_alive()
        fresh = asyncio.run(open_webshop(server.url, 1))
        assert "black ceramic coffee mug" in fresh.first_observation
        body = asyncio.run(step(server.url, fresh.env_id, "search[coffee mug]"))
        assert "B0MUG00003" in body["state"]
        with pytest.raises(EnvHTTPError):  # the old env died with the old process
            asyncio.run(step(server.url, opening.env_id, "search[mug]"))
    finally:
        server.stop()


def test_attached_server_cannot_be_restarted_from_here(tmp_path):
    with webshop_server(tmp_path) as spawned:
        attached = ManagedServer("WebShop", url=spawned.url).start()
        assert attached.is_alive() and attached.poll() is None
        with pytest.raises(ServerError) as info:
            attached.restart()
        assert "attached" in str(info.value)
        attached.stop()  # a no-op: the spawned one keeps running
        assert spawned.is_alive()


# -- stopping without orphans -------------------------------------------------------

FAMILY_SERVER = textwrap.dedent("""
    import http.server, os, subprocess, sys
    pids_file, port = sys.argv[1], int(sys.argv[2])
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    same_group = subprocess.Popen(sleeper)
    own_session = subprocess.Popen(sleeper, start_new_session=True)
    with open(pids_file, "w") as f:
        f.write(f"{same_group.pid} {own_session.pid}")
    http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
""")


def test_stop_leaves_no_process_behind(tmp_path):
    script, pids_file = tmp_path / "family.py", tmp_path / "pids"
    script.write_text(FAMILY_SERVER)
    server = ManagedServer("Family", command=["{python}", str(script), str(pids_file), "{port}"],
                           log_path=tmp_path / "family.log", cwd=tmp_path).start()
    leader = server.pid
    children = [int(p) for p in pids_file.read_text().split()]
    assert all(psutil.pid_exists(p) for p in [leader, *children])
    server.stop()
    wait_until(lambda: all(gone(p) for p in [leader, *children]), 15, "the server and its children are gone")
    assert not server.is_alive()


def test_server_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = tmp_path / "stubborn.py"
    script.write_text("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SILENT_SERVER)
    server = ManagedServer("Stubborn", command=["{python}", str(script), "{port}"],
                           log_path=tmp_path / "s.log", stop_grace=0.5, startup_timeout=1,
                           probe_timeout=0.2)
    server.spawn()  # started without waiting for health: it never answers
    pid = server.pid
    wait_until(lambda: listening(server.port), 15, "the script sets up")
    server.stop()
    assert gone(pid) and server.poll() == -signal.SIGKILL


HARNESS = textwrap.dedent("""
    import signal, sys, threading, time
    # Ctrl-C raises KeyboardInterrupt even when this process was started with SIGINT ignored
    # (a test run started in the background of a non-interactive shell passes that on)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {tests!r})
    from helpers.env_idx_server import command
    from pytest_agentgym.servers.lifecycle import ManagedServer
    server = ManagedServer("WebShop", command=command("webshop"), log_path={log!r})
    if {from_thread!r}:
        worker = threading.Thread(target=server.start)  # a short-lived thread
        worker.start(); worker.join()
    else:
        server.start()
    print(server.pid, server.url, flush=True)
    time.sleep(600)
""")


def start_harness(tmp_path: Path, from_thread: bool) -> tuple[subprocess.Popen, int]:
    """A separate Python process that starts a server and then idles; returns it and
    the server's pid once the server answers HTTP."""
    code = HARNESS.format(tests=str(ROOT / "tests"), log=str(tmp_path / "h.log"),
                          from_thread=from_thread)
    harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               cwd=ROOT)
    try:
        line = harness.stdout.readline().split()
        assert len(line) == 2, f"harness did not start its server: {line}"
        pid, url = int(line[0]), line[1]
        # Still serving after the thread that spawned it has ended (pdeathsig is per thread).
        assert probe(url, 5.0) is None and not gone(pid), "the server died with its spawning thread"
    except BaseException:
        harness.kill()  # its server follows through pdeathsig
        harness.wait()
        raise
    return harness, pid


@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "worker-thread"])
def test_server_dies_when_the_harness_is_sigkilled(tmp_path, from_thread):
    harness, server_pid = start_harness(tmp_path, from_thread)
    try:
        harness.kill()
        harness.wait(10)
        wait_until(lambda: gone(server_pid), 15, "the server ends with its SIGKILLed harness")
    finally:
        if not gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_server_is_stopped_when_the_harness_gets_ctrl_c(tmp_path):
    harness, server_pid = start_harness(tmp_path, from_thread=False)
    try:
        harness.send_signal(signal.SIGINT)
        assert harness.wait(20) != 0  # KeyboardInterrupt ended it
        wait_until(lambda: gone(server_pid), 15, "the server ends with its Ctrl-C'd harness")
    finally:
        if not gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)


# -- planning and the pool ----------------------------------------------------------


def test_plan_for_an_uninstalled_real_server_says_what_to_do():
    spec = dataclasses.replace(load_default_specs()["WebShop"], embedded=None)  # as before it had one
    plan = plan_server(spec, which=lambda name: None)
    assert plan.how == "unavailable"
    assert plan.detail == (
        "environment server WebShop is not running at http://127.0.0.1:36007 and cannot be "
        "started here: install agentenv-webshop (its `webshop` command) or set envs.WebShop.url"
    )


def test_plan_prefers_url_then_embedded_then_command():
    spec = EnvSpec(name="X", category="moderate", port=36099, command="xserver --port {port}",
                   embedded="lmrlgym")
    assert plan_server(spec.with_overrides(url="http://127.0.0.1:9/")).how == "attach"
    embedded = plan_server(spec, which=lambda name: None)
    assert embedded.how == "embedded"
    assert embedded.command[1:5] == ("-m", "pytest_agentgym", "serve", "lmrlgym")
    on_path = plan_server(spec.with_overrides(embedded=None), which=lambda n: f"/usr/bin/{n}")
    assert on_path.how == "command" and on_path.command[0] == "xserver"


def test_a_command_given_as_an_argv_list_is_planned_as_it_is():
    """docs/servers.md: a command is a shell-like string or an argv list (a list crashed
    the run with an INTERNALERROR)."""
    argv = ["xserver", "--motd", "two words", "--port", "{port}"]
    spec = EnvSpec(name="X", category="moderate", port=36099, command=argv)
    plan = plan_server(spec, which=lambda n: f"/usr/bin/{n}")
    assert plan.how == "command" and plan.command == tuple(argv)


def pool_spec(name: str = "WebShop", **changes) -> EnvSpec:
    server = shlex.join(env_idx_command("webshop"))
    values = dict(name=name, category="moderate", port=free_port(), dialect="env_idx",
                  command=server, startup_timeout=60.0)
    values.update(changes)
    return EnvSpec(**values)


def test_pool_spawns_attaches_and_refuses(tmp_path):
    spec = pool_spec()
    with ServerPool([spec], log_dir=tmp_path) as pool:
        spawned = pool.start("WebShop")
        spawned_pid = spawned.pid
        assert not spawned.attached and spawned.port != spec.port  # a port chosen here
        assert pool.start("WebShop") is spawned
        assert pool.base_url("WebShop") == spawned.url
        other = ServerPool([pool_spec("Shop2", url=spawned.url)], log_dir=tmp_path)
        assert other.start("Shop2").attached
        missing = ServerPool([pool_spec("ALFWorld", command="no-such-alfworld --port {port}")])
        with pytest.raises(ServerUnavailable) as info:
            missing.start("ALFWorld")
        assert "install agentenv-no-such-alfworld" in str(info.value)
        with pytest.raises(KeyError):
            pool.start("Nope")
    wait_until(lambda: gone(spawned_pid), 15, "the spawned server is gone")
    assert not spawned.is_alive()


def test_pool_attaches_to_a_server_already_on_the_configured_port(tmp_path):
    with webshop_server(tmp_path) as running:
        spec = pool_spec(port=running.port)
        with ServerPool([spec], log_dir=tmp_path) as pool:
            assert pool.start("WebShop").attached
        with ServerPool([spec], log_dir=tmp_path, attach_running=False) as pool:
            assert not pool.start("WebShop").attached


def test_pool_ensure_restarts_a_dead_server_and_a_new_episode_works(tmp_path):
    with ServerPool([pool_spec()], log_dir=tmp_path) as pool:
        server = pool.start("WebShop")
        opening = asyncio.run(open_webshop(server.url))
        os.kill(server.pid, signal.SIGKILL)
        with pytest.raises(EnvUnreachable):
            asyncio.run(step(server.url, opening.env_id, "search[mug]"))
        restarted = pool.ensure("WebShop")
        assert restarted is server and server.is_alive()
        fresh = asyncio.run(open_webshop(server.url, 2))
        assert "led desk lamp" in fresh.first_observation


CLOSING_SERVER = textwrap.dedent("""
    import http.server, os, signal, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # answers its pid; GET /close-listener closes the listener first
            if self.path == "/close-listener":
                self.server.socket.close()
                self.server.closed = True
            self.send_response(200)
            self.end_headers()
            self.wfile.write(f"pid {os.getpid()}".encode())
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.closed = False
    while not server.closed:
        server.handle_request()
    signal.pause()  # the process stays, its port refuses: a killed server not yet reaped
""")


def test_pool_ensure_restarts_a_server_whose_port_refuses_while_its_process_remains(tmp_path):
    # A SIGKILLed server closes its listening socket a moment before its exit can be
    # seen; a client refused in between calls ensure() while poll() still says running.
    # This server holds that state for as long as the test needs it.
    script = tmp_path / "closing.py"
    script.write_text(CLOSING_SERVER)
    spec = pool_spec("Closing", command=f"{{python}} {shlex.quote(str(script))} {{port}}")
    with ServerPool([spec], log_dir=tmp_path, attach_running=False) as pool:
        server = pool.start("Closing")
        first = server.pid
        answer = httpx.get(server.url + "/close-listener", timeout=10)
        assert answer.text == f"pid {first}"  # sent after its listener was closed
        assert server.is_alive() and server.refuses_connections()

        assert pool.ensure("Closing") is server
        assert server.pid != first and gone(first)
        assert httpx.get(server.url + "/", timeout=10).text == f"pid {server.pid}"
        log = next(tmp_path.glob("Closing-*.log")).read_text()
        assert f"refuses connections while process {first} is still there" in log


def test_embedded_server_killed_mid_episode_is_restarted(tmp_path):
    # Maze, on the embedded lmrlgym server: every installation has it, and it starts fast
    spec = load_default_specs()["Maze"]
    assert spec.embedded == "lmrlgym"
    with ServerPool([spec], log_dir=tmp_path, attach_running=False) as pool:
        server = pool.start(spec.name)
        base = pool.base_url(spec.name)
        first = server.pid

        async def create():
            async with EnvClient(base, env=spec.name, dialect=spec.dialect, timeout=30) as client:
                return await client.create()

        assert isinstance(asyncio.run(create()), int)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(EnvUnreachable):
            asyncio.run(create())
        # called at once, as a retry does: the killed process may not be reaped yet
        assert pool.ensure(spec.name) is server and server.pid != first
        assert isinstance(asyncio.run(create()), int)
