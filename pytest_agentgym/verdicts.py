"""What a run asks of each environment, and what it concludes at the end.

An :class:`EnvPlan` is what the run's suites ask of one environment (its gates,
its error budget, the rounds and sampling its episodes get). :func:`judge`
turns the run's records into per-environment summaries and gate verdicts (the
error budget and the baseline included); :func:`counts` gives the figures
run.json and the status event keep. Plain functions: no pytest, no I/O beyond
reading a baseline run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pytest_agentgym.aggregate import EnvSummary, summarize
from pytest_agentgym.gates import DEFAULT_MAX_ERROR_RATE, Gate, GateVerdict, check_baseline, check_env
from pytest_agentgym.results import EpisodeRecord, current_records
from pytest_agentgym.store import RunDir


@dataclass
class EnvPlan:
    """What the run's suites ask of one environment (the first suite of an env wins)."""

    gates: tuple[Gate, ...] = ()
    gate_path: str = "agentgym"
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    max_rounds: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    asserts: bool = False  # a gate or a min_reward says what a good episode is
    #: what --agentgym-baseline compares: the option's, the suite's, else success
    baseline_metric: str = "success"


def max_rounds_for(suite: Any, settings: Any) -> int:
    """Rounds per episode: --agentgym-max-rounds, else the suite's or the environment's,
    capped by the node's limit."""
    if settings.max_rounds is not None:
        return settings.max_rounds
    rounds = suite.max_rounds or settings.spec(suite.environment).max_rounds
    return min(rounds, settings.node_max_rounds) if settings.node_max_rounds else rounds


def plan_for(suite: Any, settings: Any, gate_path: str) -> EnvPlan:
    """The plan of ``suite``'s environment. The error budget: --agentgym-max-error-rate,
    the suite's, the node's ``limits.max_error_rate``, else 5%."""
    budget = next(v for v in (settings.max_error_rate, suite.max_error_rate, settings.node_max_error_rate,
                              DEFAULT_MAX_ERROR_RATE) if v is not None)
    return EnvPlan(gates=suite.gates, gate_path=gate_path, max_error_rate=budget,
                   max_rounds=max_rounds_for(suite, settings), sampling=dict(suite.sampling),
                   asserts=bool(suite.gates) or suite.min_reward is not None,
                   baseline_metric=settings.baseline_metric or suite.baseline_metric or "success")


def reward_ranges(settings: Any) -> dict[str, tuple[float, float]]:
    """Each environment's reward range as this run configured it (node overrides too)."""
    return {name: spec.reward_range for name, spec in settings.env_specs.items() if spec.reward_range}


def judge(records: Sequence[EpisodeRecord], plans: Mapping[str, EnvPlan], settings: Any
          ) -> tuple[dict[str, EnvSummary], list[GateVerdict]]:
    """Summaries per environment and every gate verdict: each environment's gates
    within its error budget, then the comparison with the baseline run, if any."""
    ranges = reward_ranges(settings)
    summaries = summarize(records, ranges)
    verdicts: list[GateVerdict] = []
    for env, summary in summaries.items():
        plan = plans.get(env) or EnvPlan()
        verdicts.extend(check_env(summary, plan.gates, plan.max_error_rate))
    if settings.baseline:
        base = summarize(current_records(RunDir(settings.baseline).read_episodes()), ranges)
        for env, summary in summaries.items():
            verdicts.append(check_baseline(summary, base.get(env), settings.max_drop))
    return summaries, verdicts


def counts(records: Sequence[EpisodeRecord], verdicts: Sequence[GateVerdict], generation: int) -> dict[str, int]:
    """What run.json's ``counts`` and the final status event hold."""
    by_outcome = {outcome: sum(1 for r in records if r.outcome == outcome)
                  for outcome in ("passed", "failed", "unsolved")}
    return {
        "episodes": len(records),
        **by_outcome,
        "errors": sum(1 for r in records if r.outcome == "error"),
        "kept": sum(1 for r in records if r.generation < generation),
        "gates_failed": sum(1 for v in verdicts if v.outcome == "failed"),
        "gates_errored": sum(1 for v in verdicts if v.outcome == "error"),
    }
