"""The process launcher (process/managed.py, process/children.py): a managed server is
waited for until healthy, a server that dies or never gets healthy is reported with its
exit code and log, stop() leaves no process behind, and children die with the process
that launched them. Every server is a real child process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from helpers.waiting import wait_until
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.process.health import HEALTH_ENDPOINT
from pytest_agentgym.process.managed import ManagedServer


CHILD_SERVER = textwrap.dedent("""
    import http.server, subprocess, sys
    if "with-grandchild" in sys.argv:  # to check that stop() leaves nothing behind
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
""")


def wait_gone(pids, timeout=10.0) -> list[int]:
    """The pids still alive (not zombies) after polling up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_managed_server_waits_for_health_and_stop_leaves_no_process(tmp_path):
    server = ManagedServer("child", command=[sys.executable, "-c", CHILD_SERVER, "{port}", "with-grandchild"],
                           health=HEALTH_ENDPOINT, log_path=tmp_path / "s.log")
    server.spawn()
    try:
        took = server.wait_ready(timeout=30, poll_interval=0.05)
        assert took < 30
        family = [server.pid] + [p.pid for p in psutil.Process(server.pid).children(recursive=True)]
        assert len(family) >= 2
    finally:
        server.stop(grace=5)
    assert wait_gone(family) == []


def test_a_server_that_dies_before_binding_reports_exit_code_and_log(tmp_path):
    server = ManagedServer("dying", command=[sys.executable, "-c", "print('cannot load weights'); raise SystemExit(3)"],
                           health=HEALTH_ENDPOINT, log_path=tmp_path / "d.log", label="dying server")
    server.spawn()
    with pytest.raises(ServerStartError) as caught:
        server.wait_ready(timeout=30, poll_interval=0.05)
    message = str(caught.value)
    assert "dying server exited with code 3" in message and "cannot load weights" in message


def test_a_server_that_never_gets_healthy_is_stopped_after_the_timeout(tmp_path):
    server = ManagedServer("silent", command=[sys.executable, "-c", "import time; time.sleep(600)"],
                           health=HEALTH_ENDPOINT, log_path=tmp_path / "n.log")
    server.spawn()
    pid = server.pid
    started = time.monotonic()
    with pytest.raises(ServerStartError, match="did not answer .* within 1 s"):
        server.wait_ready(timeout=1.0, poll_interval=0.05)
    assert time.monotonic() - started < 20
    assert wait_gone([pid]) == []


def test_children_die_with_the_process_that_launched_them(tmp_path):
    """PR_SET_PDEATHSIG: a launcher killed with SIGKILL takes its server along
    (with SIGTERM, the death signal the model side's launches use)."""
    pid_file = tmp_path / "child.pid"
    launcher = textwrap.dedent(f"""
        import signal, sys, time
        from pytest_agentgym.process.health import HEALTH_ENDPOINT
        from pytest_agentgym.process.managed import ManagedServer
        server = ManagedServer("child", command=[sys.executable, "-c", {CHILD_SERVER!r}, "{{port}}"],
                               health=HEALTH_ENDPOINT, death_signal=signal.SIGTERM,
                               log_path={str(tmp_path / 'c.log')!r}, startup_timeout=30)
        server.start()
        open({str(pid_file)!r}, "w").write(str(server.pid))
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", launcher])
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text(), 30, "the launcher writes its server's pid",
                   procs=(parent,))
        child = int(pid_file.read_text())
        assert psutil.pid_exists(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert wait_gone([child]) == []


@pytest.mark.faults
def test_a_ctrl_c_that_lands_while_a_child_is_forked_is_not_lost():
    """Python runs its at-fork hooks (logging's among them) in the parent after a fork
    with ``preexec_fn``; a SIGINT handled inside one used to be printed as "Exception
    ignored" and lost, so Ctrl-C during a server's start-up went unheard. Here the
    SIGINT is sent from such a hook: it must reach the caller as KeyboardInterrupt; and
    holding it across the fork must not leave SIGINT blocked in the child."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pytest_agentgym.process import children
        os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
        child = children.popen([sys.executable, "-c", "import signal, sys; "
                                "sys.exit(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))"],
                               signal.SIGTERM)
        print("no interrupt, child exit", child.wait())
    """)
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "KeyboardInterrupt" in finished.stderr and "Exception ignored" not in finished.stderr, finished.stderr
    assert "no interrupt" not in finished.stdout
    # the same child, without the hook's signal: it starts with the harness's signal mask
    unheld = subprocess.run([sys.executable, "-c", script.replace("os.register_at_fork", "(lambda **_: 0)")],
                            capture_output=True, text=True, timeout=60)
    assert unheld.stdout.strip() == "no interrupt, child exit 0", unheld.stdout + unheld.stderr


# -- revive: the one restart mechanism (environment servers, the reference agent, vLLM) ---------


@pytest.mark.faults
def test_revive_restarts_a_killed_server_once_for_callers_that_find_it_dead_together(tmp_path, caplog):
    import logging
    import os
    from concurrent.futures import ThreadPoolExecutor

    caplog.set_level(logging.WARNING, logger="pytest_agentgym.process")
    server = ManagedServer("child", command=[sys.executable, "-c", CHILD_SERVER, "{port}"],
                           health=HEALTH_ENDPOINT, log_path=tmp_path / "s.log", label="test agent",
                           startup_timeout=30)
    server.start()
    try:
        assert server.revive(3, 0.05) is None and server.restarts == 0  # alive: nothing done
        first, port = server.pid, server.port
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: server.died() is not None, 30, "the killed server is seen dead")
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: server.revive(3, 0.05), range(4)))
        (why,) = [answer for answer in answers if answer is not None]  # one restart, for all four
        # (seen as it was reaped, or a moment before: its port already refusing)
        assert why in ("it was killed by SIGKILL", f"{server.url} refuses connections while process {first} "
                                                   "is still there (killed, or its listener closed)")
        assert server.restarts == 1 and server.port == port and server.pid != first
        assert server.died() is None and server.revive(3, 0.05) is None
        log = (tmp_path / "s.log").read_text()
        assert log.count(" starting: ") == 2 and f"restarting: {why}" in log
        said = [r.getMessage() for r in caplog.records]
        assert any(m.startswith(f"test agent died ({why}); restarting it on ") for m in said)
        assert any(m.startswith(f"test agent restarted at http://127.0.0.1:{port} in ") for m in said)
    finally:
        server.stop()
    assert wait_gone([first]) == []


@pytest.mark.faults
def test_revive_gives_up_after_its_attempts_and_never_restarts_an_attached_server(tmp_path):
    import os

    from pytest_agentgym.process.errors import ServerError

    marker = tmp_path / "may-start"
    marker.touch()
    once = ("import os, sys\n"
            f"if not os.path.exists({str(marker)!r}): raise SystemExit(3)\n"
            f"os.remove({str(marker)!r})\n" + CHILD_SERVER)
    server = ManagedServer("once", command=[sys.executable, "-c", once, "{port}"], health=HEALTH_ENDPOINT,
                           log_path=tmp_path / "o.log", startup_timeout=30)
    server.start()
    try:
        os.kill(server.pid, signal.SIGKILL)
        wait_until(lambda: server.died() is not None, 30, "the killed server is seen dead")
        with pytest.raises(ServerStartError) as caught:
            server.revive(2, 0.05)
        assert "did not start after 2 attempts (waiting 0.05 s between them)" in str(caught.value)
        assert "exited with code 3" in str(caught.value)

        attached = ManagedServer("theirs", url=server.url, health=HEALTH_ENDPOINT, probe_timeout=0.5)
        with pytest.raises(ServerError, match="is attached, not started here: restart it where it runs"):
            attached.revive(3, 0.05)  # nothing answers there, and it is not ours to start
    finally:
        server.stop()
