"""Back-pressure in the lean transport (pytest_agentgym/transport/): requests wait for a
connection instead of failing, when ``max_connections`` are busy and when this process
is out of file descriptors (hundreds of episodes in flight under ``ulimit -n 1024``).
Against a real server on 127.0.0.1 (tests/transport/_keepalive_server.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import httpx
import pytest

from _keepalive_server import CountingServer


def _step(n: int) -> bytes:
    return json.dumps({"id": 0, "action": f"move {n}"}).encode()


def test_requests_beyond_max_connections_wait_for_one():
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.route import Route

    with CountingServer() as server:
        transport = KeepAliveTransport(max_connections=4)
        route = Route(transport, server.url)

        async def many() -> list[int]:
            answers = await asyncio.gather(*(route.request("POST", "/step", _step(n), 5.0) for n in range(60)))
            return [answer.status_code for answer in answers]

        assert asyncio.run(many()) == [200] * 60
    assert server.runs == {f"move {n}": 1 for n in range(60)}
    assert server.connections == transport.opened == 4


def test_a_request_that_waits_past_its_timeout_for_a_connection_is_a_pool_timeout():
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.route import Route

    hold = threading.Event()
    with CountingServer(hold=hold) as server:
        route = Route(KeepAliveTransport(max_connections=1), server.url)

        async def two() -> int:
            first = asyncio.ensure_future(route.request("POST", "/step", _step(1), 10.0))
            deadline = asyncio.get_running_loop().time() + 10
            while not server.runs and asyncio.get_running_loop().time() < deadline:  # until it holds the connection
                await asyncio.sleep(0.01)
            with pytest.raises(httpx.PoolTimeout, match=r"waited 0.2 s for one of the 1 busy connections"):
                await route.request("POST", "/step", _step(2), 0.2)
            hold.set()
            return (await first).status_code

        assert asyncio.run(two()) == 200
    assert server.runs == {"move 1": 1}


_SHORT_OF_FILES = """
import asyncio, json, os, resource, sys
from pytest_agentgym.transport.keepalive import KeepAliveTransport
from pytest_agentgym.transport.route import Route

async def main():
    transport = KeepAliveTransport()
    route = Route(transport, sys.argv[1])
    open_now = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 8, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    answers = await asyncio.gather(*(route.request("POST", "/step", json.dumps({"action": f"move {n}"}).encode(), 10.0)
                                     for n in range(200)), return_exceptions=True)
    print(json.dumps({"answers": [a.status_code if not isinstance(a, Exception) else str(a) for a in answers],
                      "opened": transport.opened}))

asyncio.run(main())
"""


def test_out_of_file_descriptors_requests_wait_for_a_connection():
    """200 requests at once from a process allowed 8 more descriptors: each waits for one of the
    few connections it could open instead of failing with 'Too many open files'."""
    with CountingServer() as server:
        done = subprocess.run([sys.executable, "-c", _SHORT_OF_FILES, server.url],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answers"] == [200] * 200
    assert 1 <= result["opened"] <= 8
    assert server.runs == {f"move {n}": 1 for n in range(200)}


def test_the_engine_raises_a_low_open_files_limit_for_its_episodes_in_flight():
    """A process started with ``ulimit -n 256`` that plays 512 episodes in flight gets room
    for their connections (never more than the hard limit, never lowered)."""
    import subprocess
    import sys

    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))\n"
        "from pytest_agentgym.transport.keepalive import ensure_file_room\n"
        "print(ensure_file_room(512), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
        "print(ensure_file_room(2000), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
        "print(ensure_file_room(4), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["1792 1792", "4096 4096", "4096 4096"]
