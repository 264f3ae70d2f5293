"""What a run checks before its first episode, against what was recorded before it.

A resumed run must mean what the run it resumes meant (:func:`resumable`); a
baseline must have measured what this run measures (:func:`comparable_with_baseline`).
Both compare fingerprints (results/fingerprint.py) and raise
:class:`~pytest_agentgym.results.ledger.LedgerError` naming each difference and the
fix. A shard records what it is a slice of (:func:`shard_record`), so that merge
can check the slices. No pytest.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.ledger import LedgerError, ResumeNotPlayable, RunLedger

Key = tuple[str, int, int]


def resumable(ledger: RunLedger, fp: Mapping[str, Any], run_id: str, started: Sequence[str] | None = None) -> None:
    """Refuse to resume a run whose fingerprint (the one its first start wrote: a resume never
    rewrites it) differs from ``fp``, for every environment of ``fp``: those the resume plays and
    those whose episodes it keeps. ``started``: the environments whose servers this resume
    started; another's server identity cannot be known here and is not compared."""
    if not ledger.resuming:
        return
    then = ledger.previous.fingerprint
    if started is not None:
        then_envs = then.get("envs") or {}
        fp = {**fp, "envs": {env: (values if env in started or env not in then_envs
                                   else {**values, "server": then_envs[env].get("server")})
                             for env, values in (fp.get("envs") or {}).items()}}
    diffs = fingerprint.differences(then, fp)
    if diffs:
        raise LedgerError(
            f"cannot resume run {run_id} ({ledger.run_dir.path}): these settings change what an "
            f"episode means and differ from the run's:\n  - " + "\n  - ".join(diffs)
            + "\nrestore them (see the run's run.json, 'command' and 'fingerprint'), or start a "
              "new run without --agentgym-resume")


def resumable_without_model(ledger: RunLedger, run_id: str, why: str, command: str) -> None:
    """A resume when no model endpoint answers: its episodes could only be recorded as errors of
    no model, beside the run's model's; refuse (:class:`ResumeNotPlayable`, nothing written)
    saying so, where the run had a model. A run that never had one goes on as it began."""
    if not ledger.resuming:
        return
    then = ledger.previous.fingerprint or {}
    if "none" in (then.get("model"), then.get("endpoint_kind")):
        return
    raise ResumeNotPlayable(
        f"cannot resume run {run_id} ({ledger.run_dir.path}) now: {why.rstrip('. ')}. Its episodes were "
        f"played by model {then.get('model')!r} ({then.get('endpoint_kind')}); nothing was played or recorded. "
        f"Once that endpoint answers, resume again: {command}")


def baseline_usable(settings: Any) -> None:
    """--agentgym-baseline names a run directory whose results can be read (a usage
    error at configure otherwise, before anything is started)."""
    if not settings.baseline:
        return
    from pytest_agentgym.compare import CompareError
    from pytest_agentgym.compare.runs import load_run
    from pytest_agentgym.config.settings import baseline_as_named

    try:
        load_run(baseline_as_named(settings.baseline_given, settings.reports), "baseline")
    except CompareError as exc:
        raise LedgerError(f"--agentgym-baseline={settings.baseline_given}: {exc}") from None


def comparable_with_baseline(settings: Any, fp: Mapping[str, Any], env_names: Sequence[str],
                             planned: set[Key]) -> tuple[str, ...]:
    """Before any episode: refuse a baseline run whose settings make its episodes
    incomparable with this run's (task sets, rounds, sampling, prompts, servers,
    harness version), unless --agentgym-allow-mismatch; then a note lists them."""
    s = settings
    if not s.baseline or not planned:
        return ()
    from pytest_agentgym import __version__
    from pytest_agentgym.compare import CompareError, settings_differences
    from pytest_agentgym.compare.runs import load_run

    try:
        base = load_run(s.baseline, "baseline")
    except CompareError as exc:
        raise LedgerError(f"--agentgym-baseline: {exc}") from None
    names = set(env_names) & {key[0] for key in base.keys}
    base_fp = {**base.info.fingerprint,
               "envs": {n: v for n, v in (base.info.fingerprint.get("envs") or {}).items() if n in names}}
    diffs = settings_differences(
        dataclasses.replace(base.info, fingerprint=base_fp), {k for k in base.keys if k[0] in names},
        {**fp, "envs": {n: v for n, v in fp["envs"].items() if n in names}},
        {k for k in planned if k[0] in names}, __version__,
        plays=sorted(set(env_names) - {key[0] for key in base.keys}))
    if diffs and not s.allow_mismatch:
        raise LedgerError(
            f"--agentgym-baseline={s.baseline}: this run would not measure what the baseline measured:\n  - "
            + "\n  - ".join(diffs) + "\nrun with the baseline's settings (its run.json has them), or "
            "compare anyway with --agentgym-allow-mismatch (the verdicts then list these differences)")
    return (f"compared with baseline {s.baseline} despite: " + "; ".join(diffs),) if diffs else ()


def shard_record(settings: Any, plans: Mapping[str, Any], selection: Mapping[Key, float] | None,
                 planned: set[Key]) -> dict[str, Any]:
    """run.json's ``shard``: this slice, the whole selection and the suites' plans."""
    from pytest_agentgym.run import shards
    from pytest_agentgym.run.plans import plan_record, reward_ranges

    costs = selection if selection is not None else {key: plans[key[0]].max_rounds for key in planned}
    ranges = reward_ranges(settings)
    return shards.shard_record(settings.shard, costs,
                               {env: plan_record(plan, ranges.get(env)) for env, plan in plans.items()})
