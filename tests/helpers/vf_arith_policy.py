"""The reference agent's policy for tests/helpers/vf_arith.py, loaded with
``AGENTGYM_REFERENCE_POLICIES=vf_arith_policy:ARITH`` (tests/ on PYTHONPATH).

It answers additions and subtractions right and products one too high, so a run
of vf_arith has rewards 1 and 0 in a known pattern (1, 0, 1, 0, 1, 0); asked to
double its answer, it doubles the number it gave. ``random_reply`` answers 0 to
everything.
"""

from __future__ import annotations

import re

_QUESTION = re.compile(r"Arithmetic quiz: what is (-?\d+) ([-+*]) (-?\d+)\?")


class ArithPolicy:
    name = "vf_arith (test)"

    def recognizes(self, messages):
        return any(_QUESTION.search(m.get("content") or "") for m in messages if m.get("role") == "user")

    def reply(self, messages, rng):
        asked = [_QUESTION.search(m["content"] or "") for m in messages if m.get("role") == "user"]
        a, op, b = [match for match in asked if match][-1].groups()
        a, b = int(a), int(b)
        answer = a + b if op == "+" else a - b if op == "-" else a * b + 1
        if messages[-1].get("content") == "Now double your answer.":
            return f"Twice {answer} is {2 * answer}"
        return f"Let me work it out: {a} {op} {b} = {answer}. The answer is {answer}"

    def random_reply(self, messages, rng):
        return "The answer is 0"


ARITH = ArithPolicy()
