"""The model as the episode loop sees it: a ``ChatModel`` over an endpoint client.

Every front door plays episodes against this adapter (run/factory.py makes it),
so a reply, its latency, its tokens and its per-token data reach the episode
the same way whether a pytest run, a queue worker or the rollout service asked.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # episode brings the environment client (httpx, jinja2)
    from pytest_agentgym.engine.episode import Completion


class ModelAdapter:
    """Gives the episode loop the ``ChatModel`` it expects, over an EndpointClient.

    The request's ``sampling`` is the effective sampling of its episode
    (run/requests.py ``RequestRules.effective_sampling``), sent as it is."""

    def __init__(self, client: Any, base_sampling: Any) -> None:
        from pytest_agentgym.engine.episode import Completion

        self._completion = Completion
        self._client = client
        self._base = base_sampling
        self.name = client.model
        self.base_url = client.base_url  # named in a first-round timeout
        self.api_key_env = getattr(client, "api_key_env", None)  # for a verifiers rollout's own client
        self._cache: dict[tuple, Any] = {}
        self._token_turns: Any = None

    @property
    def _turns(self) -> Any:
        """The client's :class:`~pytest_agentgym.model.token_turns.TokenTurns`, made on first use."""
        if self._token_turns is None:
            from pytest_agentgym.model.token_turns import TokenTurns

            self._token_turns = TokenTurns(self._client)
        return self._token_turns

    def _sampling(self, overrides: dict[str, Any]) -> Any:
        key = tuple(sorted((k, str(v)) for k, v in overrides.items()))
        if key not in self._cache:
            from pytest_agentgym.model.call_settings import Sampling

            base = {k: v for k, v in dataclasses.asdict(self._base).items() if v is not None}
            self._cache[key] = Sampling.from_mapping({**base, **overrides}, where="sampling")
        return self._cache[key]

    async def complete(self, messages: Sequence[dict[str, str]], *, budget_s: float,
                       sampling: dict[str, Any], previous: Completion | None = None) -> Completion:
        """The next reply. When the episode asked for token ids (``return_token_ids``), the
        turn goes through model/token_turns.py: after ``previous`` (the episode's last
        Completion, when ``messages`` extend it), as token ids where the endpoint takes them
        (not with ``token_in: false``); its token data says which way it went."""
        chosen = self._sampling(sampling)
        if chosen.return_token_ids:  # token_in: false keeps it on chat, still saying so per turn
            after = previous if chosen.token_in is not False else None
            reply = await self._turns.turn(messages, after, chosen, budget_s)
        else:
            reply = await self._client.chat(messages, sampling=chosen, budget=budget_s)
        return self._completion(reply.text, reply.latency_s, reply.prompt_tokens, reply.completion_tokens,
                                reply.token_data, reply.finish_reason)

    async def aclose(self) -> None:
        await self._client.aclose()
