"""WebShop adapter (protocol sheet §6): shopping on a 1000-product text web site.

env_idx dialect.

* Reset body: ``{"env_idx", "session_id": <task index>}``; the answer is
  ``[observation, null]``. The original client then replaces that observation
  with ``GET /observation?env_idx=``, and so does this adapter.
* Step answer: ``{"state", "reward", "done", "info": null}``; the reward is paid
  on ``click[Buy Now]`` only, in [0, 1].
* Actions are read with family (a), the base class default; without an
  ``Action:`` marker the whole reply is sent when it contains ``search[`` or
  ``click[`` (a rule of AgentGym's shared ``parse_react``, made for WebShop).
* No ``/close``; each ``/create`` builds a full environment on the server.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import (
    ACK_SHORT,
    EnvAdapter,
    Opening,
    StepResult,
    finite_number,
    json_boolean,
)
from pytest_agentgym.envs.protocol import EnvClient

def read_pair(body: Any, env: str) -> str:
    """The observation of an env_idx ``/reset`` answer, ``[observation, null]``."""
    if (
        isinstance(body, (list, tuple))
        and len(body) == 2
        and isinstance(body[0], str)
    ):
        return body[0]
    raise TypeError(f"{env} /reset should answer [observation, null], got {body!r:.200}")


def read_state_step(body: Any, env: str) -> StepResult:
    """An env_idx ``/step`` answer, ``{"state", "reward", "done", "info"}``; the reward
    must be a finite number and done a boolean (``ValueError`` otherwise)."""
    if not isinstance(body, dict) or not {"state", "reward", "done"} <= body.keys():
        raise TypeError(
            f'{env} /step should answer {{"state", "reward", "done", "info"}}, got {body!r:.200}'
        )
    where = f"{env} /step"
    return StepResult(
        observation=str(body["state"]),
        reward=finite_number(body, "reward", where),
        done=json_boolean(body, "done", where),
    )


@register
class WebShopAdapter(EnvAdapter):
    name = "WebShop"
    prompt_template = "webshop.j2"
    acknowledgement = ACK_SHORT

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"session_id": task_index}

    def first_observation(self, reset_body: Any) -> str:
        return read_pair(reset_body, self.name)

    async def open(self, client: EnvClient, task_index: int) -> Opening:
        env_id = await client.create()
        await self.reset_and_observe(client, env_id, task_index)  # the shape is checked, the text replaced
        observation = await client.observation(env_id)
        if not isinstance(observation, str):
            raise client.bad_answer("/observation", f"expected the page as a JSON string, got {observation!r:.200}",
                                    env_id)
        return Opening(env_id, self.conversation(observation))

    def read_step(self, body: Any) -> StepResult:
        return read_state_step(body, self.name)
