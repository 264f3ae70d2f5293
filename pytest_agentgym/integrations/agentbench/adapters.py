"""AgentBench tasks as environments: the AgentBench family (ALFWorld, WebShop).

An AgentBench task server writes the prompt, keeps the conversation, parses the
agent's reply and scores the sample itself; the episode loop only carries turns:

* **Opening**: ``/start_sample`` with the task index; the sample's ``history``
  (roles ``user``/``agent``, read as ``user``/``assistant``) is the opening
  conversation, its last user turn the first observation.
* **Actions**: the model's reply is sent whole, as the agent's content of
  ``/interact`` (the task parses it: ALFWorld ``ACTION: ...`` matched against the
  admissible commands, WebShop ``Action: search[...]|click[...]``).
* **Steps**: while the sample runs, the answer's ``history`` is the next
  conversation (the task may cut or rewrite earlier turns, as ALFWorld drops the
  previous "AVAILABLE ACTIONS"), so the model sees what AgentBench's own client
  would send. When the status is no longer ``running``, the sample is done: the
  reward is the task's verdict in ``result`` (ALFWorld ``result`` true/false read
  as 1/0; WebShop ``reward``), and a status of ``task error`` or ``unknown`` is
  the task server's failure (``env:EnvBadResponse``), not a policy outcome.
* **Close**: a session still running when the episode ends (rounds or budget
  spent, an error) is given up with ``/cancel``.

``envs.<Name>.options`` sets ``task`` (default ``alfworld-std`` /
``webshop-std``) and ``target`` (``controller``, the default, or ``worker``).
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from pytest_agentgym.envs import register
from pytest_agentgym.envs.base import EnvAdapter, Opening, ParsedAction, StepResult, finite_number
from pytest_agentgym.envs.protocol import EnvBadResponse, EnvClient, EnvServerError
from pytest_agentgym.integrations.agentbench.protocol import FINISHED, RUNNING, AgentBenchClient

_ROLES = {"user": "user", "agent": "assistant"}
_OPTIONS = ("task", "target")


def conversation(output: dict[str, Any], where: str) -> tuple[dict[str, str], ...]:
    """A sample's ``history`` as OpenAI chat messages (``agent`` -> ``assistant``)."""
    history = output.get("history")
    if not isinstance(history, list):
        raise TypeError(f"{where}: the output has no 'history' list: {output!r:.200}")
    messages = []
    for item in history:
        if not (isinstance(item, dict) and item.get("role") in _ROLES
                and isinstance(item.get("content"), str)):
            raise TypeError(f"{where}: a history item is not {{\"role\": \"user\"|\"agent\", "
                            f"\"content\": <string>}}: {item!r:.200}")
        messages.append({"role": _ROLES[item["role"]], "content": item["content"]})
    return tuple(messages)


def trailing_user_text(messages: tuple[dict[str, str], ...]) -> str:
    """What the task said after the agent's last turn (joined), or ``""``."""
    tail: list[str] = []
    for message in reversed(messages):
        if message["role"] != "user":
            break
        tail.append(message["content"])
    return "\n".join(reversed(tail))


class AgentBenchAdapter(EnvAdapter):
    """Base of the AgentBench family; a subclass names its task and reads its verdict."""

    #: The AgentBench task played unless ``options.task`` says another.
    default_task: ClassVar[str]
    #: The field of the finished sample's ``result`` that holds its reward.
    reward_field: ClassVar[str]
    prompt_template = ""  # the task server writes the prompt

    def __init__(self, template_path: Any = None) -> None:
        if template_path is not None:
            raise ValueError(f"environment {self.name}: an AgentBench task server writes its own "
                             f"prompt; remove envs.{self.name}.prompt_template")
        #: the prompt is the task server's; what identifies it here is the task family
        self.prompt_sha256 = hashlib.sha256(
            f"agentbench:{self.name}:prompt written by the task server".encode()).hexdigest()

    def instructions(self, **context: Any) -> str:
        raise NotImplementedError("an AgentBench task server writes the instructions")

    def make_client(self, spec: Any, server_url: str) -> AgentBenchClient:
        unknown = sorted(set(spec.options) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"environment {spec.name}: unknown options {', '.join(unknown)}; "
                             f"AgentBench environments take {', '.join(_OPTIONS)}")
        return AgentBenchClient(spec.base_url(server_url), env=spec.name,
                                task=spec.options.get("task", self.default_task),
                                target=spec.options.get("target", "controller"),
                                timeout=spec.request_timeout)

    async def open(self, client: EnvClient, task_index: int) -> Opening:
        if not isinstance(client, AgentBenchClient):
            raise TypeError(f"{self.name} needs an AgentBenchClient (the adapter's make_client), "
                            f"got {type(client).__name__}")
        session_id, output = await client.start_sample(task_index)
        try:
            if output["status"] != RUNNING:
                raise ValueError(f"the sample ended before the agent's first turn, with status "
                                 f"{output['status']!r}: {output.get('result')!r:.300}")
            messages = conversation(output, f"{self.name} /start_sample")
            if not messages or messages[-1]["role"] != "user":
                raise ValueError("the opening history does not end with the task's (user) turn")
        except (TypeError, ValueError) as exc:
            try:
                await client.close(session_id)
            except EnvServerError:
                pass  # giving the session up is best effort; the error below stands
            raise EnvBadResponse(str(exc), url=client.base_url, endpoint="/start_sample",
                                 env=client.env, env_id=session_id) from exc
        return Opening(session_id, messages)

    def parse_action(self, reply: str) -> ParsedAction:
        """The whole reply: the AgentBench task parses it."""
        return ParsedAction(reply)

    def read_step(self, body: Any) -> StepResult:
        """An ``/interact`` output (the client hands over ``output``)."""
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise TypeError(f"{self.name} /interact: expected an output with a status, got {body!r:.200}")
        status = body["status"]
        messages = conversation(body, f"{self.name} /interact")
        if status == RUNNING:
            if not messages or messages[-1]["role"] != "user":
                raise ValueError(f"{self.name} /interact: a running sample's history must end "
                                 "with the task's (user) turn")
            return StepResult(messages[-1]["content"], 0.0, False, conversation=messages)
        if FINISHED[status] == "server":
            raise ValueError(f"the task server ended the sample with status {status!r}: "
                             f"{body.get('result')!r:.300}")
        note = f"[AgentBench: sample {status}]"
        said = trailing_user_text(messages)
        return StepResult(f"{said}\n{note}" if said else note, self.reward(body.get("result")), True)

    def reward(self, result: Any) -> float:
        """The sample's reward: ``result[reward_field]``, a number, or a boolean read
        as 1/0 (ALFWorld writes whether the game was won)."""
        if not isinstance(result, dict) or self.reward_field not in result:
            raise ValueError(f"{self.name}: the finished sample's result has no "
                             f"{self.reward_field!r} field: {result!r:.200}")
        if isinstance(result[self.reward_field], bool):
            return 1.0 if result[self.reward_field] else 0.0
        return finite_number(result, self.reward_field, f"{self.name} result")


@register
class AgentBenchALFWorld(AgentBenchAdapter):
    """AgentBench's ALFWorld (``alfworld-std``: 50 games, ``alfworld-dev``: 20): its
    ``result`` is ``{"result": true|false (won), "log": [...], "init_prompt"}``;
    a sample that ended early (invalid action, three repeats, limit) has ``0``."""

    name = "AgentBench-ALFWorld"
    default_task = "alfworld-std"
    reward_field = "result"


@register
class AgentBenchWebShop(AgentBenchAdapter):
    """AgentBench's WebShop (``webshop-std``: sessions 0-199, ``webshop-dev``:
    200-279): its ``result`` is ``{"reward": <0..1>, "history": [...]}``."""

    name = "AgentBench-WebShop"
    default_task = "webshop-std"
    reward_field = "reward"
