"""Per-environment statistics over finished episodes.

Episodes that ended in an infrastructure error have no reward and are left out
of the reward and success figures (they are not policy outcomes); they are
counted in ``errors``. So are rewards that are not finite numbers (NaN or
infinite: written as null in episodes.jsonl), which no mean could include.
The terminal summary, the NATS batch events and the HTML report all take
their numbers from :func:`summarize`.

The 95% interval of the mean reward depends on the rewards (the ``CI_*`` texts,
recorded as ``reward_ci_method``): when every reward is 0 or 1 it is the exact
Clopper-Pearson interval of a proportion (as the success rate's); otherwise it
is Student's t interval of the rewards with one pseudo-reward added at each end
of the environment's reward range (``reward_range`` in configs/envs.yaml; the
observed range when none is known), a floor on the variance that keeps a few
rare non-zero rewards from giving a falsely narrow interval, clipped to that
range. benchmarks/gates/interval_coverage.py measured their coverage; the table and the
methods considered are in docs/results.md.
"""

from __future__ import annotations

import functools
import math
import operator
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from pytest_agentgym.results.records import EpisodeRecord

#: A reward range: (lowest, highest) reward an environment can give.
RewardRange = tuple[float, float]

#: ``EnvSummary.reward_ci_method`` values.
CI_BINARY = "clopper-pearson (every reward 0 or 1)"
CI_CLIPPED_TO_RANGE = "student-t with a pseudo-reward at each end of the reward range, clipped to it"
CI_CLIPPED_TO_OBSERVED = "student-t with a pseudo-reward at each end of the observed rewards, clipped to them"
CI_SINGLE = "single episode"

# Two-sided 95% critical values of Student's t for 1..30 degrees of freedom;
# above 30 the normal value 1.96 is used (the difference is under 2%).
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t_critical_95(degrees_of_freedom: int) -> float:
    if degrees_of_freedom < 1:
        raise ValueError("need at least one degree of freedom")
    return _T95[degrees_of_freedom - 1] if degrees_of_freedom <= 30 else 1.96


def mean_ci95(values: Sequence[float], bounds: RewardRange | None = None) -> tuple[float, float, float] | None:
    """Mean and its 95% confidence interval; None for no values.

    Every value 0 or 1: the Clopper-Pearson interval of the proportion. Else
    Student's t interval (n - 1 degrees of freedom) of the values with one
    pseudo-value added at each end of ``bounds`` (low, high), clipped to
    ``bounds``; without ``bounds`` the observed lowest and highest value serve.
    Values outside ``bounds`` widen them (a wrongly declared range never hides
    what was observed). With one value the interval is that value.
    """
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n == 1:
        return mean, mean, mean
    if all(v in (0.0, 1.0) for v in values):
        low, high = clopper_pearson_ci95(round(math.fsum(values)), n)  # type: ignore[misc]
        return mean, low, high
    low_end = min(values) if bounds is None else min(bounds[0], *values)
    high_end = max(values) if bounds is None else max(bounds[1], *values)
    padded = [*values, low_end, high_end]
    centre = math.fsum(padded) / (n + 2)
    variance = math.fsum((v - centre) ** 2 for v in padded) / (n + 1)
    half = t_critical_95(n - 1) * math.sqrt(variance / (n + 2))
    return mean, float(max(low_end, centre - half)), float(min(high_end, centre + half))


def wilson_ci95(successes: int, n: int) -> tuple[float, float] | None:
    """Wilson score interval of a proportion (kept for comparison: the summary uses
    :func:`clopper_pearson_ci95`, which covers at least 95% also near 0% and 100%)."""
    if n == 0:
        return None
    z = 1.96
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson_ci95(successes: int, n: int) -> tuple[float, float] | None:
    """The exact (Clopper-Pearson) 95% interval of a proportion; None for n = 0: beta
    quantiles, computed without scipy (results/distributions.py: the run's end and
    ``compare`` stay quick to start)."""
    if n == 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, {n}], not {successes}")
    from pytest_agentgym.results.distributions import beta_quantile

    low = 0.0 if successes == 0 else beta_quantile(0.025, successes, n - successes + 1)
    high = 1.0 if successes == n else beta_quantile(0.975, successes + 1, n - successes)
    return low, high


@dataclass(frozen=True)
class EnvSummary:
    env: str
    episodes: int
    scored: int
    errors: int
    failed: int
    mean_reward: float | None
    reward_ci95: tuple[float, float] | None
    success_rate: float | None
    success_ci95: tuple[float, float] | None
    mean_rounds: float | None
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    retried: int
    #: how ``reward_ci95`` was computed (one of the ``CI_*`` texts), None without scored episodes
    reward_ci_method: str | None = None
    #: the range the interval was clipped to: the environment's reward range, else the observed one
    reward_range: RewardRange | None = None

    def to_dict(self) -> dict:
        return asdict(self)


#: The figures of an EnvSummary that run.json keeps per environment.
SUMMARY_FIELDS = ("mean_reward", "reward_ci95", "success_rate", "success_ci95", "episodes", "scored", "errors",
                  "mean_rounds")


def summaries_record(summaries: Mapping[str, EnvSummary]) -> dict[str, dict[str, Any]]:
    """run.json's ``summaries``: per environment, the figures of :data:`SUMMARY_FIELDS`
    (intervals as [low, high] lists, JSON's form)."""
    def plain(value: Any) -> Any:
        return list(value) if isinstance(value, tuple) else value

    return {env: {name: plain(getattr(s, name)) for name in SUMMARY_FIELDS} for env, s in summaries.items()}


@functools.lru_cache(maxsize=1)
def shipped_reward_ranges() -> dict[str, RewardRange]:
    """``reward_range`` of each environment in the shipped configs/envs.yaml."""
    from pytest_agentgym.envs.spec import load_default_specs  # lazily: envs sits above aggregate

    return {name: spec.reward_range for name, spec in load_default_specs().items()
            if spec.reward_range is not None}


def is_scored(record: EpisodeRecord) -> bool:
    """The episode counts in the figures: no error, and a finite reward."""
    return record.error is None and record.reward is not None and math.isfinite(record.reward)


def summarize_env(env: str, records: Iterable[EpisodeRecord],
                  reward_range: RewardRange | None = None) -> EnvSummary:
    """One environment's figures. ``reward_range`` clips the reward interval; None
    clips it to the rewards observed (see :func:`summarize` for the defaults)."""
    records = list(records)
    scored = [r for r in records if is_scored(r)]
    rewards = [float(r.reward) for r in scored]  # type: ignore[arg-type]
    bounds = reward_range if reward_range is not None else (
        (min(rewards), max(rewards)) if rewards else None)
    reward_stats = mean_ci95(rewards, bounds)
    method = None
    if len(rewards) == 1:
        method = CI_SINGLE
    elif rewards and all(v in (0.0, 1.0) for v in rewards):
        method = CI_BINARY
    elif rewards:
        method = CI_CLIPPED_TO_RANGE if reward_range is not None else CI_CLIPPED_TO_OBSERVED
    successes = sum(1 for r in scored if r.success)
    return EnvSummary(
        env=env,
        episodes=len(records),
        scored=len(scored),
        errors=sum(1 for r in records if r.error is not None),
        failed=sum(1 for r in records if r.outcome == "failed"),
        mean_reward=reward_stats[0] if reward_stats else None,
        reward_ci95=(reward_stats[1], reward_stats[2]) if reward_stats else None,
        success_rate=successes / len(scored) if scored else None,
        success_ci95=clopper_pearson_ci95(successes, len(scored)),
        mean_rounds=sum(r.rounds for r in scored) / len(scored) if scored else None,
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        wall_s=sum(r.duration_s for r in records),
        retried=sum(len(r.retried) for r in records),
        reward_ci_method=method,
        reward_range=(min(bounds[0], *rewards), max(bounds[1], *rewards)) if bounds and rewards else None,
    )


def summarize(records: Iterable[EpisodeRecord],
              reward_ranges: Mapping[str, RewardRange] | None = None) -> dict[str, EnvSummary]:
    """One summary per environment, in the order environments first appear.

    ``reward_ranges`` (environment -> (low, high)) bound each reward interval;
    an environment it does not name gets the range of the shipped
    configs/envs.yaml, and one unknown there is clipped to its observed rewards.
    """
    by_env: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_env.setdefault(record.env, []).append(record)
    given = dict(reward_ranges or {})
    shipped = shipped_reward_ranges() if set(by_env) - set(given) else {}
    return {env: summarize_env(env, recs, given.get(env, shipped.get(env)))
            for env, recs in by_env.items()}


_env_model = operator.attrgetter("env", "model")


def mixed_models(records: Iterable[EpisodeRecord]) -> dict[str, str]:
    """Why each environment whose episodes were played by more than one model (a
    ``model.outage`` failover, docs/outages.md) cannot be judged, e.g. ``not judged:
    episodes of two models: reference (5), random (3); ...``: one rule for the run's
    gates (run/plans.py) and ``compare`` (compare/judgement.py)."""
    pairs = Counter(map(_env_model, records))  # one count per (env, model): a C loop, not a dict per record
    by_env: dict[str, Counter[str]] = {}
    for (env, model), n in pairs.items():
        by_env.setdefault(env, Counter())[model] += n
    words = {2: "two", 3: "three"}
    return {env: (f"not judged: episodes of {words.get(len(models), len(models))} models: "
                  + ", ".join(f"{name} ({n})" for name, n in sorted(models.items()))
                  + "; the endpoint failed over mid-run (model.outage.policy: failover): judge one model, "
                    "e.g. resume the run when its endpoint is back, or run again")
            for env, models in by_env.items() if len(models) > 1}
