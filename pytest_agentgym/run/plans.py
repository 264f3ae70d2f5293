"""What a run asks of each environment, and what it concludes at the end.

An :class:`EnvPlan` is what the run's suites ask of one environment (its gates,
its error budget, the rounds and sampling its episodes get). :func:`judge`
turns the run's records into per-environment summaries and gate verdicts (the
error budget included); :func:`baseline_verdicts` compares the run with its
baseline, paired per task (pytest_agentgym.compare, the code of
``pytest-agentgym compare``); :func:`counts` gives the figures run.json and the
status event keep. Plain functions: no pytest, no I/O beyond reading run
directories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from pytest_agentgym.results.aggregate import EnvSummary, mixed_models, summarize
from pytest_agentgym.results.gates import DEFAULT_MAX_ERROR_RATE, Gate, GateVerdict, check_env
from pytest_agentgym.results.records import EpisodeRecord


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
    """Rounds per episode of ``suite``: the one rule of run/requests.py (--agentgym-max-rounds,
    else the suite's or the environment's, capped by the node's limit)."""
    from pytest_agentgym.run.requests import RequestRules

    return RequestRules.of(settings, {}).rounds(settings.spec(suite.environment), suite.max_rounds)


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


def plan_record(plan: EnvPlan, reward_range: Sequence[float] | None = None) -> dict[str, Any]:
    """``plan`` as plain data (a shard's run.json keeps it, merge judges the gates with it)."""
    return {"gates": [str(g) for g in plan.gates], "gate_path": plan.gate_path,
            "max_error_rate": plan.max_error_rate, "max_rounds": plan.max_rounds, "asserts": plan.asserts,
            "baseline_metric": plan.baseline_metric,
            "reward_range": list(reward_range) if reward_range else None}


def plan_from_record(data: Mapping[str, Any]) -> EnvPlan:
    """Inverse of :func:`plan_record` (without the reward range)."""
    return EnvPlan(gates=tuple(Gate.parse(g) for g in data.get("gates", ())),
                   gate_path=data.get("gate_path", "agentgym"),
                   max_error_rate=float(data.get("max_error_rate", DEFAULT_MAX_ERROR_RATE)),
                   max_rounds=int(data.get("max_rounds", 0)), asserts=bool(data.get("asserts")),
                   baseline_metric=data.get("baseline_metric", "success"))


def judge(records: Sequence[EpisodeRecord], plans: Mapping[str, EnvPlan], settings: Any,
          resume: str | None = None) -> tuple[dict[str, EnvSummary], list[GateVerdict]]:
    """Summaries per environment and the verdicts of each environment's gates within
    its error budget."""
    return judge_with_ranges(records, plans, reward_ranges(settings), resume)


def judge_with_ranges(records: Sequence[EpisodeRecord], plans: Mapping[str, EnvPlan],
                      ranges: Mapping[str, Any], resume: str | None = None
                      ) -> tuple[dict[str, EnvSummary], list[GateVerdict]]:
    """:func:`judge` with each environment's reward range given (a merge has no settings).
    ``resume``: the command that resumes the run, named by a gate its errors decide."""
    summaries = summarize(records, dict(ranges))
    mixed = mixed_models(records)
    verdicts: list[GateVerdict] = []
    for env, summary in summaries.items():
        plan = plans.get(env) or EnvPlan()
        if env in mixed:  # a rate over two models' episodes says nothing of either
            verdicts.extend(GateVerdict(env, str(gate), None, False, mixed[env], outcome="error")
                            for gate in plan.gates)
            continue
        verdicts.extend(check_env(summary, plan.gates, plan.max_error_rate, resume=resume))
    return summaries, verdicts


def baseline_gate_name(metric: str, margin: float) -> str:
    """The name of an environment's baseline verdict (also of one decided early)."""
    return f"baseline {metric}, margin {margin:g}"


#: How the comparison's verdicts read as gate outcomes.
_OUTCOMES = {"ok": "passed", "regressed": "failed", "error": "error", "inconclusive": "inconclusive"}


def baseline_verdicts(baseline: str, run_dir: Any, envs: Sequence[str], plans: Mapping[str, EnvPlan],
                      settings: Any, *, alpha: float = 0.05) -> tuple[list[GateVerdict], list[Any]]:
    """The paired comparison of this run with its baseline, one verdict per environment
    both runs hold, and the comparisons made (environments that share a metric and an
    error budget are compared together, Holm-adjusted across them). The settings were
    checked before the run started, so differences let through are not refused again.
    ``alpha``: less than 0.05 when interim looks spent some of it (run/stopping.py)."""
    from pytest_agentgym.compare import CompareError, compare_runs

    groups: dict[tuple[str, float], list[str]] = {}
    for env in envs:
        plan = plans.get(env) or EnvPlan(baseline_metric=settings.baseline_metric or "success")
        groups.setdefault((plan.baseline_metric, plan.max_error_rate), []).append(env)
    verdicts: list[GateVerdict] = []
    comparisons = []
    for (metric, budget), names in groups.items():
        gate = baseline_gate_name(metric, settings.max_drop)
        try:  # an environment of two models (a failover) is compare's error: results/aggregate.mixed_models
            comparison = compare_runs(baseline, run_dir, metric=metric, margin=settings.max_drop, alpha=alpha,
                                      allow_mismatch=True, max_error_rate=budget, envs=names)
        except CompareError as exc:
            verdicts.extend(GateVerdict(env, gate, None, False, f"cannot compare: {exc}", outcome="error")
                            for env in names)
            continue
        comparisons.append(comparison)
        for env, result in comparison.environments.items():
            outcome = _OUTCOMES[result.verdict]
            passed = outcome == "passed" or (outcome == "inconclusive" and not settings.strict_gates)
            verdicts.append(GateVerdict(env, gate, result.delta, passed, result.line(), outcome=outcome))
    return verdicts, comparisons


def counts(records: Sequence[EpisodeRecord], verdicts: Sequence[GateVerdict], generation: int) -> dict[str, int]:
    """What run.json's ``counts`` and the final status event hold. ``records``: what the run
    counts (``results.current_records``); ``duplicates`` is how many second records of an
    episode and generation reading left out (the ``duplicates`` that the records carry when
    they were read through ``results.reading``; 0 for a plain list)."""
    by_outcome = {outcome: sum(1 for r in records if r.outcome == outcome)
                  for outcome in ("passed", "failed", "unsolved")}
    return {
        "episodes": len(records),
        **by_outcome,
        "errors": sum(1 for r in records if r.outcome == "error"),
        "kept": sum(1 for r in records if r.generation < generation),
        "duplicates": len(getattr(records, "duplicates", ())),
        "gates_failed": sum(1 for v in verdicts if v.outcome == "failed"),
        "gates_errored": sum(1 for v in verdicts if v.outcome == "error"),
        "gates_inconclusive": sum(1 for v in verdicts if v.outcome == "inconclusive"),
    }
