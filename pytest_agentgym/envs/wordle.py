"""Wordle adapter: LMRL-Gym Wordle on AgentGym's lmrlgym server (``/wordle``).

Opening an episode follows AgentGym's ``WordleEnvClient`` (protocol sheet,
section 14.2.9): ``POST /create``, then ``GET /filtered_vocab`` *before* the
reset (all 40 words at that point) to fill the vocabulary into the rules prompt,
then ``POST /reset {"seed": task_index}`` whose "Let's start Wordle!" is not
shown to the model. The conversation is a one-line persona, the
acknowledgement, and the rules prompt as the first user turn; it is the same
for every seed. Actions are read with family (c), like Maze; the reward is the
server's (``1`` when solved, otherwise ``0``/``0.0``).
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, ParsedAction, extract_first_split
from pytest_agentgym.envs.protocol import EnvClient

#: The human turn that opens AgentGym's Wordle conversation, before the acknowledgement.
WORDLE_PERSONA = "You are an expert wordle player."


@register
class WordleAdapter(EnvAdapter):
    name = "Wordle"
    prompt_template = "wordle.j2"
    persona = WORDLE_PERSONA

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"seed": task_index}

    def rules(self, words: list[str]) -> str:
        """The rules prompt with the vocabulary filled in (one word per line)."""
        return self.instructions(vocab="\n".join(words), words=list(words))

    async def reset_and_observe(self, client: EnvClient, env_id: int, task_index: int) -> str:
        """``GET /filtered_vocab``, then ``POST /reset``; the first user turn is the
        rules prompt with that vocabulary (the reset's own text is not shown)."""
        words = await client.get("/filtered_vocab", env_id)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise client.bad_answer("/filtered_vocab", f"expected a JSON list of words, got {words!r:.200}",
                                    env_id)
        await client.reset(env_id, self.reset_payload(task_index))
        return self.rules(words)

    def conversation(self, observation: str, **context: Any) -> tuple[dict[str, str], ...]:
        """[persona, acknowledgement, rules prompt]."""
        return (
            {"role": "user", "content": self.persona},
            {"role": "assistant", "content": self.acknowledgement},
            {"role": "user", "content": observation},
        )

    def parse_action(self, reply: str) -> ParsedAction:
        return ParsedAction(extract_first_split(reply))
