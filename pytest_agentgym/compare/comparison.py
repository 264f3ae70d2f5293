"""What a comparison concludes, per environment and overall, and how it reads.

Plain frozen dataclasses: the terminal lines, the JSON of ``pytest-agentgym
compare --json``, the exit status, and what the HTML compare view draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_agentgym.compare.pairing import Flip

if TYPE_CHECKING:
    from pytest_agentgym.compare.runs import LoadedRun

#: How the detail of an ``inconclusive`` verdict that errored keys leave open begins.
ERRORS_OPEN = "the errors leave it open"
#: Verdicts from best to worst; a comparison's verdict is its worst environment's.
VERDICTS = ("ok", "inconclusive", "regressed", "error")


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=VERDICTS.index, default="error")


@dataclass(frozen=True)
class EnvComparison:
    env: str
    #: ``ok``, ``regressed``, ``inconclusive`` or ``error``
    verdict: str
    #: ``success`` or ``reward``
    metric: str
    #: the metric over the matched keys (tasks weigh one each), per run
    base_value: float | None
    cand_value: float | None
    #: cand - base: negative is worse
    delta: float | None
    #: the (1 - alpha) interval of delta
    ci: tuple[float, float] | None
    #: one-sided (a drop), Holm-adjusted across the environments compared
    p_value: float | None
    p_raw: float | None
    #: keys scored in both runs
    n_matched: int
    #: keys present in both runs and errored in either
    n_errors: int
    n_only_base: int
    n_only_cand: int
    #: paired tasks (at the current repeats) the margin needs; set when inconclusive
    needed_for_margin: int | None
    margin: float
    #: one readable sentence: why this verdict
    detail: str
    #: every key of the environment, sorted by (task, repeat)
    flips: tuple[Flip, ...]
    #: paired tasks (units) behind delta, the interval and the test
    n_tasks: int = 0
    #: how the p-value and the interval were computed
    method: str = ""
    #: when needed_for_margin exceeds the tasks compared: the repeats of those tasks that would do
    repeats_for_margin: int | None = None

    def line(self) -> str:
        """``BabyAI success: 0.61 -> 0.52, Δ -0.09 [-0.16, -0.02], n=90 paired, p=0.01 (Holm) -> REGRESSED (margin 0.05)``"""
        head = f"{self.env} {self.metric}: "
        if self.base_value is None or self.cand_value is None or self.delta is None:
            figures = f"n={self.n_tasks} paired, {self.n_errors} errored"
        else:
            interval = f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci else " [no interval]"
            p = f"p={self.p_value:.2g} (Holm)" if self.p_value is not None else "p=n/a"
            n = f"n={self.n_tasks} paired" + (
                f" tasks ({self.n_matched} episodes)" if self.n_matched != self.n_tasks else "")
            figures = f"{self.base_value:.2f} -> {self.cand_value:.2f}, Δ {self.delta:+.2f}{interval}, {n}, {p}"
        line = f"{head}{figures} -> {self.verdict.upper()} (margin {self.margin:g})"
        if self.verdict == "inconclusive":
            if self.detail.startswith(ERRORS_OPEN):
                line += f" (the {self.n_errors} errored episode(s) leave it open: resume to play them)"
            elif self.margin <= 0:
                line += " (no finite sample can show ok at margin 0)"
            elif self.needed_for_margin is not None and self.needed_for_margin > self.n_tasks:
                line += f" (needs about {self.needed_for_margin} tasks" + (
                    f", or {self.repeats_for_margin} repeats of the {self.n_tasks} tasks)"
                    if self.repeats_for_margin is not None else ")")
            else:
                line += " (the change is close to the margin)"
        elif self.verdict == "error":
            line += f": {self.detail}"
        return line

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "metric": self.metric, "delta": self.delta,
                "ci": list(self.ci) if self.ci else None, "p_value": self.p_value, "p_raw": self.p_raw,
                "n_matched": self.n_matched, "n_tasks": self.n_tasks, "n_errors": self.n_errors,
                "n_only_base": self.n_only_base, "n_only_cand": self.n_only_cand,
                "needed_for_margin": self.needed_for_margin, "repeats_for_margin": self.repeats_for_margin,
                "base_value": self.base_value,
                "cand_value": self.cand_value, "margin": self.margin, "method": self.method,
                "detail": self.detail}


@dataclass(frozen=True)
class Comparison:
    #: the run directories as given
    base: str
    candidate: str
    base_run_id: str
    candidate_run_id: str
    metric: str
    margin: float
    alpha: float
    #: the worst environment's: error > regressed > inconclusive > ok
    verdict: str
    environments: dict[str, EnvComparison]
    #: settings that differ, let through by allow_mismatch
    mismatches: tuple[str, ...] = ()
    #: the two runs as read for it (baseline, candidate): the compare view shows them without
    #: reading them again
    runs: "tuple[LoadedRun, LoadedRun] | None" = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "base": self.base, "candidate": self.candidate,
                "base_run_id": self.base_run_id, "candidate_run_id": self.candidate_run_id,
                "metric": self.metric, "margin": self.margin, "alpha": self.alpha,
                "mismatches": list(self.mismatches),
                "environments": {name: env.to_json() for name, env in self.environments.items()}}

    def lines(self) -> list[str]:
        """One line per environment (see :meth:`EnvComparison.line`)."""
        return [env.line() for env in self.environments.values()]

    def exit_code(self, strict: bool = False) -> int:
        """0 when ok (and inconclusive unless ``strict``); 1 otherwise."""
        passing = ("ok", "inconclusive") if not strict else ("ok",)
        return 0 if self.verdict in passing else 1
