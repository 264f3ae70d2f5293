"""Playing one AgentBench sample by hand through the project's client and adapter, for the
tests against the stand-in task servers (test_agentbench.py) and against AgentBench's own
(test_agentbench_upstream.py)."""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import adapter_class


async def play(spec: Any, url: str, index: int, replies: list[str]):
    """Open sample ``index`` of ``spec``'s environment at ``url``, send each reply while the
    sample runs, then close it: (opening, step results, sessions still running before the close)."""
    adapter = adapter_class(spec.name)()
    async with adapter.make_client(spec, url) as client:
        opening = await adapter.open(client, index)
        results = []
        for reply in replies:
            results.append(adapter.read_step(await client.step(opening.env_id, adapter.parse_action(reply).action)))
            if results[-1].done:
                break
        running = set(client.running)
        await client.close(opening.env_id)
    return opening, results, running
