"""SciWorld faults with real signals: a JVM killed under an open env, the server
killed with its JVMs running."""

from __future__ import annotations

import signal

import httpx
import psutil
import pytest

from helpers.sciworld_support import java_children, needs_simulator, start_server

pytestmark = [pytest.mark.heavy, needs_simulator, pytest.mark.faults]


def post(url: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=300) if body is not None else httpx.post(url + path, timeout=300)


def test_a_killed_jvm_fails_only_its_env_with_the_py4j_message_and_is_never_reused(tmp_path):
    server = start_server(tmp_path, env={"AGENTGYM_SCIWORLD_SPARE_JVMS": "1"})
    try:
        first, second = (post(server.url, "/create").json()["id"] for _ in range(2))
        for env_id in (first, second):
            assert post(server.url, "/reset", {"id": env_id, "data_idx": 4240}).json()["score"] == 0
        # the first env took the start-up JVM, the oldest child
        victim = min(java_children(server.proc.pid), key=lambda process: process.create_time())
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)

        broken = post(server.url, "/step", {"id": first, "action": "look around"})
        assert broken.status_code == 200
        message = broken.json()["error"]  # the call, the exception's type, then py4j's message
        assert message.startswith(f"step 'look around' in environment {first} failed: Py4J"), message
        assert "An error occurred while trying to connect to the Java server" in message
        healthy = post(server.url, "/step", {"id": second, "action": "open door to kitchen"}).json()
        assert healthy == {"observation": "The door is now open.", "reward": 0, "score": 0, "done": False}

        assert post(server.url, "/close", {"id": first}).json() is True
        third = post(server.url, "/create").json()["id"]  # must not get the dead JVM back
        answer = post(server.url, "/reset", {"id": third, "data_idx": 4240}).json()
        assert answer.get("task_name") == "lifespan-longest-lived", answer
    finally:
        server.stop()


def test_killing_the_server_ends_its_jvms(tmp_path):
    server = start_server(tmp_path)
    post(server.url, "/create")
    post(server.url, "/create")
    jvms = java_children(server.proc.pid)
    assert len(jvms) == 2
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(30)
    gone, alive = psutil.wait_procs(jvms, timeout=60)
    assert alive == [], f"JVMs outlived their server: {[process.pid for process in alive]}"
    server.stop()
