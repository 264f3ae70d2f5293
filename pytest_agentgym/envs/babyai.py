"""BabyAI adapter: minigrid's BabyAI levels on AgentGym's babyai server.

Follows AgentGym's 2025 ``BabyAIEnvClient`` (protocol sheet, sections 0 and 1):

* the conversation is [instructions, "OK. I'll follow ...", reset observation];
* ``POST /reset`` carries ``{"data_idx": i}``; level ``i % 40``, seed ``i // 40``;
* actions are read with family (b): exactly one ``Action:``, the first non-blank
  line after it, reduced to letters, digits, commas and spaces. A reply with two
  or more ``Action:`` is refused client-side. A reply with **no** ``Action:`` is
  sent as the empty action (the client takes ``""`` when its regex finds nothing;
  the server answers "No change in state.");
* the step's reward is the server's ``score`` (the running sum of rewards), which
  is what the AgentGym client returns.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, ParsedAction, StepResult, extract_one_line


@register
class BabyAIAdapter(EnvAdapter):
    name = "BabyAI"
    prompt_template = "babyai.j2"

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"data_idx": task_index}

    def parse_action(self, reply: str) -> ParsedAction:
        if "Action:" not in reply:
            # AgentGym's client: no match -> action "" (not the whole reply).
            return ParsedAction("")
        return extract_one_line(reply)

    def read_step(self, body: Any) -> StepResult:
        """``{"observation", "reward", "score", "done"}``; the client reports ``score``."""
        if not isinstance(body, dict) or not {"observation", "score", "done"} <= body.keys():
            raise TypeError(
                f'expected {{"observation", "reward", "score", "done"}}, got {body!r:.200}'
            )
        score = float(body["score"])
        return StepResult(
            observation=str(body["observation"]),
            reward=score,
            done=bool(body["done"]),
            score=score,
        )
