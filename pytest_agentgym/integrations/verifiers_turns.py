"""The two places where a verifiers rollout and this project's episode loop meet.

* :class:`InteractionModel` is the episode's model (the
  :class:`~pytest_agentgym.engine.episode.ChatModel` that :func:`~pytest_agentgym.engine.episode.run_episode`
  asks each round): each ``complete(messages)`` hands the turns the verifiers agent has
  not seen yet to its open ``Interaction`` and returns the agent's reply. So the
  episode (opening, action extraction, steps, rewards, the failure taxonomy) is the
  engine's own, and every model call is a verifiers turn, recorded on its trace.
* :class:`ChatTurnHarness` is the agent's program: one chat completion per segment,
  sent in-process to the rollout's interception endpoint (which forwards it to the
  run's model and records it), non-streaming, with no tools and no sandbox.

Imported only with the ``verifiers`` extra installed (``pip install 'pytest-agentgym[verifiers]'``).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult
from verifiers.v1.types import content_text

from pytest_agentgym.engine.episode import Completion
from pytest_agentgym.model.errors import ContextLengthExceeded, EndpointBadResponse
from pytest_agentgym.transport.proxies import async_http_client

#: Seconds one chat completion through the interception endpoint may take.
COMPLETION_TIMEOUT_S = 600.0


class InteractionModel:
    """The episode's model, played by a verifiers agent through an open interaction."""

    def __init__(self, interaction: Any, name: str) -> None:
        self.name = name
        self.base_url = "verifiers interaction"
        self._interaction = interaction
        #: how many of the episode's messages the agent has seen (its replies included)
        self._seen = 0

    async def complete(self, messages: Sequence[dict[str, str]], *, budget_s: float,
                       sampling: dict[str, Any], previous: Completion | None = None) -> Completion:
        """Send the unseen turns (the opening conversation first, then each new
        observation) as one user turn of the interaction; the agent's reply."""
        new = [dict(m) for m in messages[self._seen:]]
        if not new:
            raise ValueError("the episode asked the model without a new turn")
        started = time.monotonic()
        try:
            segment = await self._interaction.turn(new)
        except Exception as exc:  # noqa: BLE001 - the rollout's own failure, as a model error
            raise EndpointBadResponse(f"the verifiers agent failed to answer: {type(exc).__name__}: {exc}",
                                      url=self.base_url, model=self.name) from exc
        if segment.terminated:
            # the agent's own limits (max turns or tokens) ended its run: like a model
            # that refuses a longer conversation, a policy outcome
            raise ContextLengthExceeded(
                "the verifiers agent's run ended (its max_turns or token limits)",
                status_code=400, server_message="terminated", url=self.base_url, model=self.name)
        self._seen = len(messages) + 1  # the reply becomes part of the conversation
        return Completion(text=segment.last_reply, latency_s=time.monotonic() - started)


class ChatTurnHarnessConfig(vf.HarnessConfig):
    id: str = "pytest-agentgym-verifiers"


class ChatTurnHarness(vf.Harness[ChatTurnHarnessConfig]):
    """One chat completion per segment, in-process, through the interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: Any, **_: Any) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [_wire(message) for message in prompt or []]
        body: dict[str, Any] = {"model": ctx.model, "messages": messages, "stream": False}
        async with async_http_client(timeout=COMPLETION_TIMEOUT_S) as http:  # transport.proxies.proxy_for
            response = await http.post(endpoint.rstrip("/") + "/chat/completions", json=body,
                                       headers={"Authorization": f"Bearer {secret}"})
        if response.status_code != 200:
            return ProgramResult(exit_code=1, stdout="",
                                 stderr=f"chat completion answered HTTP {response.status_code}: "
                                        f"{response.text[:500]}")
        return ProgramResult(exit_code=0, stdout="", stderr="")


def _wire(message: Any) -> dict[str, Any]:
    """A verifiers message (typed or a dict) as an OpenAI chat message."""
    if isinstance(message, dict):
        return {"role": message["role"], "content": message.get("content")}
    return {"role": message.role, "content": content_text(message.content)}
