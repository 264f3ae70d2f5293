"""Aggregate gates: per-environment thresholds and comparison with a baseline run.

A suite declares gates such as ``mean_reward >= 0.5`` or ``success_rate >= 0.8``
per environment; a baseline run adds ``mean_reward >= baseline - max_drop``.
Each gate gives a :class:`GateVerdict`; any failed verdict makes the run's exit
status non-zero.
"""

from __future__ import annotations

import operator
import re
from dataclasses import asdict, dataclass

from pytest_agentgym.aggregate import EnvSummary

METRICS = ("mean_reward", "success_rate")
_GATE = re.compile(r"^\s*(mean_reward|success_rate)\s*(>=|>|<=|<|==)\s*(-?\d+(?:\.\d+)?)\s*$")
_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq}


class GateError(ValueError):
    """A gate that cannot be parsed; the message shows the accepted form."""


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> "Gate":
        match = _GATE.match(str(text))
        if not match:
            raise GateError(
                f"gate {text!r} is not of the form '<metric> <op> <number>' with metric one of "
                f"{', '.join(METRICS)} and op one of >=, >, <=, <, == (e.g. 'success_rate >= 0.8')"
            )
        metric, op, number = match.groups()
        return cls(metric, op, float(number))

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class GateVerdict:
    env: str
    gate: str
    value: float | None
    passed: bool
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def check(gate: Gate, summary: EnvSummary) -> GateVerdict:
    value = getattr(summary, gate.metric)
    if value is None:
        return GateVerdict(
            summary.env, str(gate), None, False,
            f"no scored episode of {summary.env} ({summary.errors} error(s)); the gate cannot be met",
        )
    passed = _OPS[gate.op](value, gate.threshold)
    return GateVerdict(
        summary.env, str(gate), value, passed,
        f"{gate.metric} = {value:.3f} ({'meets' if passed else 'misses'} {gate.op} {gate.threshold:g})",
    )


def check_baseline(
    summary: EnvSummary, baseline: EnvSummary | None, max_drop: float
) -> GateVerdict:
    """``mean_reward >= baseline mean - max_drop``; an environment absent from the
    baseline passes with a note (there is nothing to regress from)."""
    gate = f"mean_reward >= baseline - {max_drop:g}"
    if baseline is None or baseline.mean_reward is None:
        return GateVerdict(summary.env, gate, summary.mean_reward, True, "not in the baseline run")
    if summary.mean_reward is None:
        return GateVerdict(summary.env, gate, None, False, "no scored episode to compare")
    floor = baseline.mean_reward - max_drop
    passed = summary.mean_reward >= floor
    return GateVerdict(
        summary.env, gate, summary.mean_reward, passed,
        f"mean_reward = {summary.mean_reward:.3f} vs baseline {baseline.mean_reward:.3f} "
        f"(floor {floor:.3f}): {'no regression' if passed else 'REGRESSION'}",
    )
