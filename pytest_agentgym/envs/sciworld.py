"""SciWorld adapter (protocol sheet §5): ScienceWorld tasks.

* Reset body: ``{"id", "data_idx": <task index>}``; the answer carries
  ``task_name, var_num, task_description, observation, reward, score, deleted, done``.
* First observation: ``task_description + "\\n" + observation`` (the original client).
* Step answer: ``{"observation", "reward" (the change), "score", "done"}``; the
  client reports ``score`` (0-100, negative when the task failed) as the step's
  reward (``reward_from = "score"``), so the episode's reward is the last score.
  Success (``score == 100``) is the rule in configs/envs.yaml.
* Actions are read with family (a), the base class default. The server has ``/close`` (each env is a JVM).
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import ACK_LONG, EnvAdapter

_RESET_KEYS = ("task_description", "observation")


@register
class SciWorldAdapter(EnvAdapter):
    name = "SciWorld"
    prompt_template = "sciworld.j2"
    acknowledgement = ACK_LONG
    reward_from = "score"

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"data_idx": task_index}

    def first_observation(self, reset_body: Any) -> str:
        if not isinstance(reset_body, dict) or not all(
            isinstance(reset_body.get(key), str) for key in _RESET_KEYS
        ):
            raise TypeError(
                "SciWorld /reset should answer task_description and observation strings, "
                f"got {reset_body!r:.200}"
            )
        return reset_body["task_description"] + "\n" + reset_body["observation"]
