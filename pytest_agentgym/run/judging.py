"""What a run concludes from its records at the end, without pytest: the summaries and
gate verdicts (plans.judge), the baseline's verdicts (or the error a crashed comparison
is), the verdicts of stopped environments, the status, whether the run is partial
(then no gate is judged) and the counts run.json keeps. :func:`conclude` writes
nothing: the run puts the :class:`Conclusion` into run.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pytest_agentgym.results.aggregate import EnvSummary
from pytest_agentgym.results.gates import NOT_JUDGED, GateVerdict
from pytest_agentgym.results.ledger import final_status
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo
from pytest_agentgym.run import ending
from pytest_agentgym.run.plans import EnvPlan, baseline_gate_name, baseline_verdicts, judge
from pytest_agentgym.run.plans import counts as run_counts

if TYPE_CHECKING:  # stopping is imported when a run stops early
    from pytest_agentgym.run.stopping import RunStops

Key = tuple[str, int, int]

#: run.json's status of a run that ended without playing every episode it selected and was
#: neither interrupted nor crashed (``-x``, ``--maxfail``): its gates are NOT JUDGED
PARTIAL = "partial"


@dataclass
class Conclusion:
    summaries: dict[str, EnvSummary]
    verdicts: list[GateVerdict]
    status: str
    #: why the gates were not judged (the run is partial), or None
    partial: str | None
    counts: dict[str, int]
    #: the paired comparisons with the baseline (pytest_agentgym.compare)
    comparisons: list = field(default_factory=list)
    #: the baseline comparison's unexpected exception, told in one line
    internal_error: str | None = None


def conclude(records: Sequence[EpisodeRecord], *, settings: Any, plans: Mapping[str, EnvPlan], run_dir: Any,
             stops: RunStops | None, generation: int, exitstatus: int, interrupted: bool, abort_reason: str | None,
             blocked: Mapping[str, ErrorInfo], planned_keys: set[Key]) -> Conclusion:
    """Judge ``records``: gates (none for a shard: its merge is judged), the baseline (at
    the alpha its stopper left when ``stops`` looked along the way), the stops, the
    environments none of whose episodes could be played (``blocked``), and a partial run
    (not all of ``planned_keys`` but those the stops left unplayed are played)."""
    stopper = stops.stopper if stops is not None else None
    unplayed = stops.unplayed if stops is not None else {}
    summaries, verdicts = judge(records, plans, settings, _resume_command(run_dir))
    comparisons: list = []
    internal_error = None
    if settings.shard is not None:
        verdicts = []  # a slice says little: the gates are judged on the merged run
    elif settings.baseline:
        stops = stopper.stops if stopper is not None else {}
        compared = [env for env in summaries if env not in stops]
        try:
            extra, comparisons = baseline_verdicts(settings.baseline, run_dir, compared, plans, settings,
                                                   alpha=stopper.final_alpha if stopper else 0.05)
        except Exception as exc:  # noqa: BLE001 - a bug must not read as "regressed" (exit 1)
            internal_error, extra = comparison_crashed(exc, compared, plans, settings)
        verdicts += extra
    if stopper is not None:
        from pytest_agentgym.run.stopping import stopped_verdicts

        verdicts = stopped_verdicts(verdicts, stopper.stops, margin=settings.max_drop,
                                    metric_of=lambda env: plans[env].baseline_metric)
    status = "crashed" if exitstatus == 3 and not interrupted else final_status(records, interrupted=interrupted)
    if blocked:  # judged on nothing: say why instead of an error budget exceeded
        verdicts = [v.not_judged(f"none of {v.env}'s episodes could be played "
                                 f"({blocked[v.env].type}: see 'agentgym: NOT PLAYED')")
                    if v.env in blocked else v for v in verdicts]
    expected = planned_keys - set(unplayed.values())  # a stopped environment's rest is not missing
    played = len({r.key for r in records} & expected) if planned_keys else len(records)  # kept ones included
    partial = ending.partial_reason(status, abort_reason, played, len(expected))
    if partial is not None:
        verdicts = [v.not_judged(partial) for v in verdicts] + (
            unplayed_gates(plans, summaries, verdicts, partial) if settings.shard is None else [])
        if status not in ("interrupted", "crashed"):
            status = PARTIAL  # ran to its end without playing all it selected (-x, --maxfail)
    counts = run_counts(records, verdicts, generation)
    if planned_keys:
        counts = {**counts, "planned": len(planned_keys)}
    if unplayed:
        counts = {**counts, "stopped_early": len(unplayed)}
    return Conclusion(summaries, verdicts, status, partial, counts, comparisons, internal_error)


def unplayed_gates(plans: Mapping[str, EnvPlan], summaries: Mapping[str, EnvSummary], verdicts: Sequence[GateVerdict],
                   why: str) -> list[GateVerdict]:
    """The gates of the planned environments with no record at all (a partial run never
    reached them): NOT JUDGED like the others, rather than missing from run.json."""
    judged = {v.env for v in verdicts}
    return [GateVerdict(env, str(gate), None, False, why, outcome=NOT_JUDGED)
            for env, plan in plans.items() if env not in summaries and env not in judged for gate in plan.gates]


def comparison_crashed(exc: Exception, envs: Sequence[str], plans: Mapping[str, EnvPlan],
                       settings: Any) -> tuple[str, list[GateVerdict]]:
    """The baseline comparison raised what no rule expected: each environment's baseline
    gate is an error that says so, and the run exits as pytest's internal error (3),
    never 1, which CI reads as a regression (EvaluationRun.internal_error): that line, and
    the verdicts."""
    from pytest_agentgym.compare.error import describe_internal_error

    error = (f"internal error in the baseline comparison: {describe_internal_error(exc)}; "
             f"this is a bug in pytest-agentgym, not a verdict on the model: please report it")
    return error, [GateVerdict(env, baseline_gate_name(plans[env].baseline_metric if env in plans
                                                       else "success", settings.max_drop),
                               None, False, error, outcome="error") for env in envs]


def _resume_command(run_dir: Any) -> str | None:
    """The command that resumes the run in ``run_dir`` (its run.json, written at the start), or
    None when it cannot be read: a gate the errors decide names it."""
    from pytest_agentgym.results.resumption import resume_command
    from pytest_agentgym.results.store import RunDir

    try:
        return resume_command(RunDir(run_dir).read_info(), run_dir)
    except Exception:  # noqa: BLE001 - a reason without the command is still a reason
        return None
