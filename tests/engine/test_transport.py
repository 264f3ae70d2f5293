"""The lean keep-alive HTTP/1.1 transport (pytest_agentgym/transport.py) that the env and
model clients use on the hot path: many requests, few connections."""

from __future__ import annotations

import asyncio
import threading
from http.server import ThreadingHTTPServer

import httpx

from helpers.chat_server import ChatHandler


def test_an_env_client_reuses_its_connections(tmp_path):
    """The lean transport keeps connections alive: many requests, few connections."""
    from pytest_agentgym.transport import KeepAliveTransport

    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
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
