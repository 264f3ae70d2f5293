"""TextCraft adapter: how an episode is opened and how replies become actions.

Follows AgentGym's ``TextCraftEnvClient``:

* **Opening.** ``POST /create`` with the JSON body ``{"commands": null, "goal":
  null}`` (the server requires a JSON object there; a body-less create gets HTTP
  422). The server pre-resets the new env with ``data_idx = id``; the client
  then resets it to the task, ``POST /reset {"id", "data_idx": i}``, and the
  reset's observation is the first user turn.
* **Actions**, family (b) of the protocol sheet: more than one ``Action:`` is
  refused client-side with AgentGym's error text (reward 0, not done, the server
  is not called); otherwise the first non-blank line after ``Action:``, reduced
  to letters, digits, commas and single spaces. A reply **without** ``Action:``
  is sent as the empty action (the server answers ``Could not execute ``), not as
  the whole reply. As in the current AgentGym client, the action ``look`` (any
  case) is sent as ``inventory``.
* **Steps**: ``{"observation", "reward": 0|1, "done"}``; the episode's reward is
  the last step's.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, ParsedAction, extract_one_line

#: What the AgentGym client posts to /create (its extra "minecraft_dir" key is ignored
#: by the server and left out here).
CREATE_BODY = {"commands": None, "goal": None}


@register
class TextCraftAdapter(EnvAdapter):
    name = "TextCraft"
    prompt_template = "textcraft.j2"

    def create_body(self) -> dict[str, Any]:
        return dict(CREATE_BODY)

    def parse_action(self, reply: str) -> ParsedAction:
        """Family (b); the action ``look`` (any case) goes out as ``inventory``."""
        parsed = extract_one_line(reply)
        if parsed.action is not None and parsed.action.lower() == "look":
            return ParsedAction("inventory")
        return parsed
