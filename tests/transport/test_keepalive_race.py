"""The keep-alive race of the lean transport (pytest_agentgym/transport/): a server
closes a connection it holds idle while the client, whose event loop has not seen the
close yet, sends the next request on it. Against a real server on 127.0.0.1 that counts
every request it runs: no request fails for it, none runs twice, and a connection that
drops after the server may have run the request is never sent again.

The server is blocking sockets in threads (tests/transport/_keepalive_server.py), so that
it closes a connection whatever the client's event loop is doing; the tests block that
loop (a busy loop, as at hundreds of episodes in flight) while they wait for the server
to have closed, so the client cannot have seen the close before it sends.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from _keepalive_server import CountingServer


def _route(server: CountingServer, **options):
    from pytest_agentgym.transport.keepalive import KeepAliveTransport
    from pytest_agentgym.transport.route import Route

    transport = KeepAliveTransport(**options)
    return transport, Route(transport, server.url)


def _step(n: int) -> bytes:
    return json.dumps({"id": 0, "action": f"move {n}"}).encode()


def test_a_connection_closed_while_idle_is_not_reused_though_the_loop_has_not_seen_it():
    """The server closes each connection after 20 ms idle; the client's loop is blocked until
    the server has closed it (so its reader is not at EOF), then sends on the pooled one."""
    with CountingServer(keep_alive=0.02) as server:
        transport, route = _route(server)

        async def steps() -> list[int]:
            statuses = []
            for n in range(20):
                statuses.append((await route.request("POST", "/step", _step(n), 5.0)).status_code)
                server.wait_for(lambda: server.idle_closes >= n + 1)  # blocks this loop: it sees nothing
            return statuses

        assert asyncio.run(steps()) == [200] * 20
    assert server.runs == {f"move {n}": 1 for n in range(20)}
    assert transport.opened == 20 and transport.resent == 0  # found closed before sending: not sent at all


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_request_on_a_reused_connection_closed_unanswered_is_sent_again_once(how):
    """The server drops every connection when its second request arrives, unanswered and not
    run: unread (the kernel resets the connection) or read and thrown away (closed). Each such
    request is sent again on a new connection; every /step runs exactly once."""
    with CountingServer(drop_second=how) as server:
        transport, route = _route(server)

        async def steps() -> list[int]:
            sequential = [(await route.request("POST", "/step", _step(n), 5.0)).status_code for n in range(30)]
            together = await asyncio.gather(*(route.request("POST", "/step", _step(n), 5.0)
                                              for n in range(30, 130)))
            return sequential + [answer.status_code for answer in together]

        assert asyncio.run(steps()) == [200] * 130
    assert server.runs == {f"move {n}": 1 for n in range(130)}
    assert server.dropped > 0 and transport.resent == server.dropped


@pytest.mark.parametrize("how", ["no-answer", "half-answer"])
def test_a_new_connection_that_drops_is_not_sent_again(how):
    """On a connection of its own the server runs the request, then closes without an answer
    or in the middle of one: the error reaches the caller and the request ran once."""
    with CountingServer(run_then_drop=how) as server:
        transport, route = _route(server)
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)) as caught:
            asyncio.run(route.request("POST", "/step", _step(1), 5.0))
    assert "closed the connection" in str(caught.value)
    assert server.runs == {"move 1": 1}
    assert server.connections == 1 and transport.resent == 0


def test_a_reused_connection_that_drops_mid_answer_is_not_sent_again():
    """Bytes of the answer came: the server read and ran the request; not sent again."""
    with CountingServer(run_then_drop="half-answer", drop_from=2) as server:
        transport, route = _route(server)

        async def two() -> None:
            await route.request("POST", "/step", _step(1), 5.0)
            await route.request("POST", "/step", _step(2), 5.0)

        with pytest.raises(httpx.RemoteProtocolError, match="before a complete answer"):
            asyncio.run(two())
    assert server.runs == {"move 1": 1, "move 2": 1}
    assert server.connections == 1 and transport.resent == 0


def test_the_env_client_loses_no_step_when_the_server_drops_idle_connections(tmp_path):
    """The protocol client over the transport, 64 episodes' worth of steps in lock-step
    against a server that drops every connection at its second request: no step fails."""
    from pytest_agentgym.envs.protocol import EnvClient

    with CountingServer(drop_second="reset") as server:

        async def play() -> list[dict]:
            async with EnvClient(server.url, env="Maze") as client:
                answers = []
                for round_ in range(3):
                    answers += await asyncio.gather(*(client.step(e, f"move {round_}-{e}") for e in range(64)))
                return answers

        answers = asyncio.run(play())
    assert len(answers) == 192 and all(a["observation"] == "ok" for a in answers)
    assert server.runs == {f"move {r}-{e}": 1 for r in range(3) for e in range(64)}
    assert server.dropped > 0
