"""An endpoint client whose answers come from the test (httpx's MockTransport), and
chat completions to answer with: for tests of what the client makes of an answer."""

from __future__ import annotations

import asyncio

import httpx

from pytest_agentgym.model.client import EndpointClient

MESSAGES = [{"role": "user", "content": "Your goal: go to the red ball"}]


def completion(content="Thought:\nx\n\nAction:\nturn left", usage=True, choices=True):
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m"}
    body["choices"] = ([{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}] if choices else [])
    if usage:
        body["usage"] = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
    return body


def mock_client(handler, **kwargs) -> EndpointClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return EndpointClient("http://model.test/v1", "m", http_client=http, **kwargs)


def ask(client: EndpointClient, **kwargs):
    async def go():
        try:
            return await client.chat(MESSAGES, **kwargs)
        finally:
            await client.aclose()
    return asyncio.run(go())
