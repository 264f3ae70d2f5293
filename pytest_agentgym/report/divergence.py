"""Where two trajectories of the same task part ways: the first turn that differs.

The compare view shows a baseline episode and a candidate episode of one
(task, repeat) side by side, turn by turn, and marks the first turn whose
observation, reply or action differs, saying which of the three. When one
trajectory is shorter, the first turn it lacks is where they part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pytest_agentgym.results.records import Turn

#: What is compared turn by turn, in the order it is named.
COMPARED = ("observation", "reply", "action")


@dataclass(frozen=True)
class Divergence:
    #: position of the turn in both trajectories (0 for the first turn)
    position: int
    #: the turn's own index (as recorded; normally ``position``)
    turn: int
    #: the fields that differ (of :data:`COMPARED`), or ``("baseline ended",)`` /
    #: ``("candidate ended",)`` when one trajectory has no such turn
    fields: tuple[str, ...]
    #: the other run's number of turns, when one ended
    ended_after: int | None = None

    def describe(self) -> str:
        """``turn 3: the reply and the action differ`` / ``turn 5: the baseline ended after 5 turns``."""
        if self.ended_after is not None:
            side = self.fields[0].split()[0]
            return f"turn {self.turn}: the {side} ended after {self.ended_after} turn(s)"
        names = [f"the {name}" for name in self.fields]
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return f"turn {self.turn}: {joined} differ{'s' if len(names) == 1 else ''}"

    def to_json(self) -> dict:
        return {"position": self.position, "turn": self.turn, "fields": list(self.fields),
                "text": self.describe()}


def first_divergence(base: Sequence[Turn], cand: Sequence[Turn]) -> Divergence | None:
    """The first turn whose observation, reply or action differs; None when the
    two trajectories agree on all three in every turn (and are as long)."""
    for position in range(max(len(base), len(cand))):
        if position >= len(base):
            return Divergence(position, cand[position].index, ("baseline ended",), len(base))
        if position >= len(cand):
            return Divergence(position, base[position].index, ("candidate ended",), len(cand))
        b, c = base[position], cand[position]
        fields = tuple(name for name in COMPARED if getattr(b, name) != getattr(c, name))
        if fields:
            return Divergence(position, c.index, fields)
    return None
