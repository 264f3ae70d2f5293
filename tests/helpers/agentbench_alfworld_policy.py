"""The reference ALFWorld policy, made to play AgentBench's own ALFWorld task, loaded into
the reference agent with ``AGENTGYM_REFERENCE_POLICIES=helpers.agentbench_alfworld_policy``
(tests/ on PYTHONPATH).

The decisions are those of pytest_agentgym/model/reference/alfworld.py (``decide`` on the
state its ``_conversation`` reads); only the conversation is read and the reply written
the way AgentBench's ALFWorld task (src/server/tasks/alfworld/task.py) wants them. What the
reference policy cannot do by itself against that task, and what this module adds:

* AgentBench puts a one-shot example before the game: a whole solved game whose first
  turn also says "Your task is to: ...". The reference policy reads the first task it
  finds, so it would play the example. Here the game starts at the user turn that begins
  "Here is your task." and everything before it is left out.
* Every observation ends with " AVAILABLE ACTIONS: ..." (one command a line); earlier
  turns keep what came before those words. The reference policy wants a task sentence
  that ends its line, and answers without the list, so both are cut at those words.
* AgentBench reads the action with ``re.search("ACTION:(.*)", reply)``, upper case, on the
  line of the marker; the reference policy writes "Thought:\\n...\\n\\nAction:\\n...". Its
  replies are rewritten as "THOUGHT: ...\\nACTION: ..." on the way out and read back in
  its own form when the conversation is replayed.

Nothing else is changed: which receptacle to visit, what to take, open, treat and where
to put it are the reference policy's choices.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from pytest_agentgym.model.reference import alfworld as reference
from pytest_agentgym.model.reference.base import Message

#: how AgentBench's task opens the game (after the instructions and the one-shot example)
GAME_START = "Here is your task. "
#: what AgentBench adds to every observation, and cuts from the earlier ones
AVAILABLE = " AVAILABLE ACTIONS"
_AGENTBENCH_ACTION = re.compile(r"ACTION:(.*)")
_REFERENCE_REPLY = re.compile(r"^Thought:\n(?P<thought>.*)\n\nAction:\n(?P<action>.*)$", re.S)


def _without_actions(text: str) -> str:
    return text.split(AVAILABLE, 1)[0].rstrip()


def as_reference(messages: Sequence[Message]) -> list[Message] | None:
    """The game part of an AgentBench ALFWorld conversation, as the reference policy reads
    AgentGym's: the task turn, then replies in its "Action:" form and answers without the
    list of available actions. None when the conversation has no game turn."""
    starts = [i for i, m in enumerate(messages)
              if m.get("role") == "user" and (m.get("content") or "").startswith(GAME_START)]
    if not starts:
        return None
    game = messages[starts[-1]:]
    read: list[Message] = [{"role": "user", "content": _without_actions(game[0]["content"])}]
    for message in game[1:]:
        content = message.get("content") or ""
        if message.get("role") == "assistant":
            found = _AGENTBENCH_ACTION.search(content)
            content = f"Action: {found.group(1).strip()}" if found else content
        else:
            content = _without_actions(content)
        read.append({"role": message.get("role", ""), "content": content})
    return read


def as_agentbench(reply: str) -> str:
    """A reference reply ("Thought:\\n...\\n\\nAction:\\n...") in AgentBench's form."""
    found = _REFERENCE_REPLY.match(reply)
    if not found:
        raise ValueError(f"the reference ALFWorld policy replied in an unexpected form: {reply!r:.200}")
    return f"THOUGHT: {found['thought']}\nACTION: {found['action']}"


class AgentBenchALFWorldPolicy:
    name = "AgentBench-ALFWorld (reference decisions)"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        game = as_reference(messages)
        return game is not None and reference.POLICY.recognizes(game)

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        return as_agentbench(reference.POLICY.reply(as_reference(messages), rng))

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        return as_agentbench(reference.POLICY.random_reply(as_reference(messages), rng))


POLICY = AgentBenchALFWorldPolicy()
