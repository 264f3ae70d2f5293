"""ALFWorld adapter (protocol sheet §4): household tasks in TextWorld.

* Reset body: ``{"id", "game": <task index>, "world_type": "Text"}``; the answer
  is ``{"id", "observation", "available_actions": [...], "task_type"}``.
* First observation, as the original client's ``observe()`` builds it:
  ``<observation>\\nAVAILABLE ACTIONS: a,b,c`` (joined with "," and no space).
  Later steps show only the step's observation.
* Step answer: ``{"observation", "reward": float(won), "available_actions", "done"}``.
* Actions are read with family (a), the base class default
  (:func:`~pytest_agentgym.envs.base.extract_react`).
* Test items are games 2420-2619 (``mappings_test.json``); the original server
  needs the alfworld data in ``~/.cache/alfworld``, the embedded one
  (``servers/embedded/alfworld.py``) ships games 2420-2427 and reads
  ``ALFWORLD_DATA``; neither has ``/close``.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import ACK_LONG, EnvAdapter

#: Separator of the first observation and the action list, as the original client writes it.
ACTIONS_HEADER = "\nAVAILABLE ACTIONS: "


@register
class ALFWorldAdapter(EnvAdapter):
    name = "ALFWorld"
    prompt_template = "alfworld.j2"
    acknowledgement = ACK_LONG

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"game": task_index, "world_type": "Text"}

    def first_observation(self, reset_body: Any) -> str:
        if not isinstance(reset_body, dict) or not isinstance(reset_body.get("observation"), str):
            raise TypeError(
                f'ALFWorld /reset should answer {{"observation": str, "available_actions": [...]}}, '
                f"got {reset_body!r:.200}"
            )
        actions = reset_body.get("available_actions") or []
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise TypeError(
                f"ALFWorld /reset 'available_actions' should be a list of strings, got {actions!r:.200}"
            )
        return reset_body["observation"] + ACTIONS_HEADER + ",".join(actions)
