"""BabyAI adapter: minigrid's BabyAI levels on AgentGym's babyai server.

Follows AgentGym's 2025 ``BabyAIEnvClient`` (protocol sheet, sections 0 and 1):

* the conversation is [instructions, "OK. I'll follow ...", reset observation];
* ``POST /reset`` carries ``{"data_idx": i}`` (the base class default); level
  ``i % 40``, seed ``i // 40``;
* actions are read with family (b), the base class's :func:`extract_one_line`:
  exactly one ``Action:``, the first non-blank line after it, reduced to letters,
  digits, commas and spaces. A reply with two or more ``Action:`` is refused
  client-side; a reply with **no** ``Action:`` is sent as the empty action (the
  server answers "No change in state.");
* the step's reward is the server's ``score`` (the running sum of rewards), which
  is what the AgentGym client returns (``reward_from = "score"``).
"""

from __future__ import annotations

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, ParsedAction, extract_one_line


@register
class BabyAIAdapter(EnvAdapter):
    name = "BabyAI"
    prompt_template = "babyai.j2"
    reward_from = "score"

    def parse_action(self, reply: str) -> ParsedAction:
        return extract_one_line(reply)
