"""SQLGym adapter (protocol sheet §7): text-to-SQL on BIRD, one step per episode.

env_idx dialect.

* Reset body: ``{"env_idx", "item_id": <task index>}``; the answer is
  ``[question, null]``; the question is the database described in words, a
  blank line, then the question. Test items are 9428-10961 (BIRD dev).
* The action is the SQL between the last ```` ```sql ```` and the ```` ``` ````
  after it (:func:`extract_sql`); the whole reply when there is no fence.
* Step answer: ``{"state", "reward", "done": true, "info": {"ground_truth"}}``;
  ``state`` is the execution result or the error, cut to 100 characters;
  reward 1.0 iff the result rows equal the gold rows as sets.
* No ``/close``; the original server keeps only 8 envs and hands their ids
  out again round-robin, so concurrent episodes can collide there.
"""

from __future__ import annotations

from typing import Any

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import ACK_SHORT, EnvAdapter, ParsedAction, StepResult
from pytest_agentgym.envs.webshop import read_pair, read_state_step

SQL_FENCE = "```sql"
FENCE = "```"


def extract_sql(reply: str) -> str:
    """The SQL the original client sends: the text after the last ```` ```sql ````,
    up to the next ```` ``` ````, stripped."""
    return reply.split(SQL_FENCE)[-1].split(FENCE)[0].strip()


@register
class SQLGymAdapter(EnvAdapter):
    name = "SQLGym"
    prompt_template = "sqlgym.j2"
    acknowledgement = ACK_SHORT

    def reset_payload(self, task_index: int) -> dict[str, Any]:
        return {"item_id": task_index}

    def first_observation(self, reset_body: Any) -> str:
        return read_pair(reset_body, self.name)

    def parse_action(self, reply: str) -> ParsedAction:
        return ParsedAction(extract_sql(reply))

    def read_step(self, body: Any) -> StepResult:
        return read_state_step(body, self.name)
