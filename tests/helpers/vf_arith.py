"""A small verifiers environment for the tests: arithmetic questions, one answer each.

Run by a suite as ``environment: verifiers:vf_arith`` (tests/integrations/test_verifiers_suite.py),
and by verifiers itself (the module is also the taskset ``vf_arith``). Each example
asks ``What is A op B?``; the rubric's one reward, ``correct``, is 1 when the last
integer of the agent's reply is the answer, else 0. The agent is
:class:`~pytest_agentgym.integrations.verifiers_turns.ChatTurnHarness` (one chat
completion, in-process), so no sandbox is needed. tests/helpers/vf_arith_policy.py is the
reference agent's policy for it: right on additions and subtractions, one off on
products, so a run has rewards of both kinds.

``load_environment(count=N, broken_rubric=False, follow_up=False)``: the first N
questions (default all); ``broken_rubric`` makes the rubric raise on products (an
error of the environment, not of the model); ``follow_up`` makes each example two
turns: after the answer the environment says "Now double your answer.", and the
reward is 1 when the last reply is twice the right answer.
"""

from __future__ import annotations

import re

import verifiers.v1 as vf
from verifiers.v1.runtimes import SubprocessConfig

from pytest_agentgym.integrations.verifiers_turns import ChatTurnHarness

#: (a, op, b): the questions, in example order
QUESTIONS = ((3, "+", 4), (6, "*", 7), (12, "-", 5), (9, "*", 9), (20, "+", 22), (8, "*", 3))
PROMPT = "Arithmetic quiz: what is {a} {op} {b}? End your reply with the number."
FOLLOW_UP = "Now double your answer."
_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


class ArithData(vf.TaskData):
    answer: int
    op: str


class ArithTaskConfig(vf.TaskConfig):
    broken_rubric: bool = False
    follow_up: bool = False


class ArithTask(vf.Task[ArithData, vf.State, ArithTaskConfig]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        if self.config.broken_rubric and self.data.op == "*":
            raise ZeroDivisionError("the rubric of vf_arith is broken on products (broken_rubric=True)")
        numbers = re.findall(r"-?\d+", trace.last_reply)
        wanted = self.data.answer * (2 if self.config.follow_up else 1)
        return 1.0 if numbers and int(numbers[-1]) == wanted else 0.0


class ArithConfig(vf.TasksetConfig):
    id: str = "vf_arith"
    count: int | None = None
    task: ArithTaskConfig = ArithTaskConfig()


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self):
        for a, op, b in QUESTIONS[: self.config.count]:
            yield ArithTask(ArithData(prompt=PROMPT.format(a=a, op=op, b=b), answer=_OPS[op](a, b), op=op),
                            self.config.task)


class FollowUpEnv(vf.SingleAgentEnv):
    """Two turns per example: the question (the task speaks first), then the follow-up."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        async with agents.agent.interaction(task) as interaction:
            await interaction.turn()
            await interaction.turn(FOLLOW_UP)


def load_environment(count: int | None = None, broken_rubric: bool = False, follow_up: bool = False) -> vf.Env:
    config = vf.SingleAgentEnvConfig(
        taskset=ArithConfig(count=count, task=ArithTaskConfig(broken_rubric=broken_rubric, follow_up=follow_up)),
        agent=vf.AgentConfig(runtime=SubprocessConfig()))
    return (FollowUpEnv if follow_up else vf.SingleAgentEnv)(config)


__all__ = ["ArithTaskset", "ChatTurnHarness", "load_environment"]
