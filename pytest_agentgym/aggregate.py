"""Per-environment statistics over finished episodes.

Episodes that ended in an infrastructure error have no reward and are left out
of the reward and success figures (they are not policy outcomes); they are
counted in ``errors``. The terminal summary, the NATS batch events and the HTML
report all take their numbers from :func:`summarize`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

from pytest_agentgym.results import EpisodeRecord

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


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float] | None:
    """Mean and its 95% confidence interval (Student's t); None for no values.

    With one value the interval is that value (nothing is known of the spread).
    """
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_critical_95(n - 1) * math.sqrt(variance / n)
    return mean, mean - half, mean + half


def wilson_ci95(successes: int, n: int) -> tuple[float, float] | None:
    """Wilson score interval of a proportion; well behaved at 0% and 100%."""
    if n == 0:
        return None
    z = 1.96
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


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

    def to_dict(self) -> dict:
        return asdict(self)


def summarize_env(env: str, records: Iterable[EpisodeRecord]) -> EnvSummary:
    records = list(records)
    scored = [r for r in records if r.error is None and r.reward is not None]
    rewards = [float(r.reward) for r in scored]  # type: ignore[arg-type]
    reward_stats = mean_ci95(rewards)
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
        success_ci95=wilson_ci95(successes, len(scored)),
        mean_rounds=sum(r.rounds for r in scored) / len(scored) if scored else None,
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        wall_s=sum(r.duration_s for r in records),
        retried=sum(len(r.retried) for r in records),
    )


def summarize(records: Iterable[EpisodeRecord]) -> dict[str, EnvSummary]:
    """One summary per environment, in the order environments first appear."""
    by_env: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_env.setdefault(record.env, []).append(record)
    return {env: summarize_env(env, recs) for env, recs in by_env.items()}
