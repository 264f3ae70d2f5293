"""Maze adapter: LMRL-Gym's double-T maze on AgentGym's lmrlgym server (``/maze``).

The opening conversation follows AgentGym's ``MazeEnvClient`` (protocol sheet,
section 14.1.7): a one-line persona, the acknowledgement, then one user turn
holding our instruction prompt, a newline and the server's reset observation.
The task index is the ``game`` (0-24 are the usable starts; 25 is the goal and
the server refuses it). Actions are read with family (c): the text between the
first and second ``Action:``, stripped, sent as is, so the model must write
exactly ``move up|down|left|right``. The step's reward is the server's
(``1.0`` on Success, ``-1.0`` on the 51st step, otherwise ``0``).
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, ParsedAction, extract_first_split

#: The human turn that opens AgentGym's Maze conversation, before the acknowledgement.
MAZE_PERSONA = "You are an expert maze solver."


@register
class MazeAdapter(EnvAdapter):
    name = "Maze"
    prompt_template = "maze.j2"
    persona = MAZE_PERSONA

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"game": task_index}

    def conversation(self, observation: str, **context: Any) -> tuple[dict[str, str], ...]:
        """[persona, acknowledgement, instructions + "\\n" + first observation]."""
        return (
            {"role": "user", "content": self.persona},
            {"role": "assistant", "content": self.acknowledgement},
            {"role": "user", "content": self.instructions(**context) + "\n" + observation},
        )

    def parse_action(self, reply: str) -> ParsedAction:
        return ParsedAction(extract_first_split(reply))
