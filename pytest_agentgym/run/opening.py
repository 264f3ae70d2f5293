"""What a run writes as it starts: its fingerprint (what its episodes mean), the
first :class:`~pytest_agentgym.results.records.RunInfo` of run.json, and
:func:`open_records`, which checks the run can go on (resume, baseline) and opens
its records and events. No pytest."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.ledger import LedgerError, git_commit, settings_snapshot
from pytest_agentgym.results.records import RunInfo
from pytest_agentgym.results.redact import redact_url
from pytest_agentgym.results.store import point_latest
from pytest_agentgym.run import checks


def run_fingerprint(settings: Any, chosen: Any, env_names: Sequence[str], plans: Mapping[str, Any], rules: Any,
                    adapters: Mapping[str, Any], identities: Mapping[str, str]) -> dict[str, Any]:
    """The model, endpoint kind and checkpoint, and per environment the rounds, the
    sampling sent, the prompt's hash and the server's identity."""
    from pytest_agentgym.run.plans import EnvPlan

    envs = {}
    for name in env_names:
        plan = plans.get(name) or EnvPlan(max_rounds=settings.spec(name).max_rounds)
        envs[name] = {"max_rounds": plan.max_rounds, "sampling": rules.effective_sampling(plan.sampling),
                      "prompt_sha256": adapters[name].prompt_sha256, "server": identities.get(name)}
    return fingerprint.build(model=chosen.model if chosen else "none", endpoint_kind=chosen.kind if chosen else "none",
                             checkpoint=settings.checkpoint, envs=envs)


def run_info(settings: Any, chosen: Any, env_names: Sequence[str], fp: Mapping[str, Any],
             versions: Mapping[str, str], notes: Sequence[str]) -> RunInfo:
    s = settings
    return RunInfo(
        run_id=s.run_id, started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), node=s.node,
        model=chosen.model if chosen else "none", endpoint=redact_url(chosen.base_url) if chosen else "none",
        endpoint_kind=chosen.kind if chosen else "none", environments=tuple(env_names), command=s.command,
        seed=s.seed, checkpoint=s.checkpoint, settings=settings_snapshot(s) | {
            "endpoint_overrides": [o.record() for o in getattr(s, "endpoint_overrides", ())]},
        versions=dict(versions),
        git_commit=git_commit(), baseline=s.baseline, fingerprint=dict(fp), notes=tuple(notes))


def whole_run(run: Any) -> tuple[set | None, list[str]]:
    """A resume's check that it selects its run's whole selection (run/resuming.py): the
    selection (None when not resuming, or for a run that recorded none) and the environments
    to fingerprint besides those it plays. A :class:`LedgerError` stops what was started."""
    from pytest_agentgym.run import resuming

    try:
        return resuming.begin_resume(run)
    except LedgerError:
        run.resources.stop()
        raise


def open_records(settings: Any, resources: Any, ledger: Any, chosen: Any, env_names: Sequence[str], *,
                 plans: Mapping[str, Any], rules: Any, adapters: Mapping[str, Any], planned_keys: set,
                 selection: Mapping[tuple[str, int, int], float] | None, judged: Sequence[str] = ()) -> list:
    """The controller's start of the records: check that the run may resume (every environment
    of the run: those it plays and the ``judged`` ones it keeps) and compare with its baseline
    (a :class:`LedgerError` stops the servers ``resources`` started), begin run.json (its notes:
    the endpoint's, the baseline's, the environments' data; a resume keeps the run's fingerprint,
    environments and selection), point ``latest`` at it (not for a shard), start the publisher
    and send ``started``. Returns the start's notices (data notes, NATS/JetStream), for the
    plugin to show once."""
    from pytest_agentgym.run import resuming

    s = settings
    every = list(dict.fromkeys([*env_names, *judged]))
    fp = run_fingerprint(s, chosen, every, plans, rules, adapters, resources.server_identities)
    if resources.fleet is not None:  # a queue run: the workers' endpoint kind; every work item carries fp
        fp = resources.fleet.adopt_fingerprint(fp)
    planned = set(selection) if selection is not None else planned_keys  # a shard: all of it
    try:
        if chosen is None:
            checks.resumable_without_model(ledger, s.run_id, resources.setup_error.message, s.command)
        checks.resumable(ledger, fp, s.run_id, started=env_names)
        baseline_note = checks.comparable_with_baseline(s, fp, env_names, planned)
    except LedgerError:
        resources.stop()
        raise
    setup_note = (f"no model endpoint: {resources.setup_error.message}",) if chosen is None else ()
    data_notes = tuple(resources.data_notes.values())
    info = run_info(s, chosen, env_names, fp, resources.versions(),
                    (tuple(chosen.notes) if chosen else setup_note) + baseline_note + data_notes)
    kept = resuming.kept_of_run(ledger.previous, fp, env_names, planned_keys | set(ledger.kept), s.command)
    info = dataclasses.replace(info, settings={**info.settings, resuming.SELECTION: kept.pop("selection")}, **kept)
    if s.shard is not None:
        info = dataclasses.replace(info, shard=checks.shard_record(s, plans, selection, planned_keys))
    info = ledger.begin(info)
    if s.shard is None:  # a shard is not the run; its merge is
        point_latest(ledger.run_dir.path.parent, s.run_id)
    notes = resources.start_publisher(ledger.run_dir.path)
    from pytest_agentgym.publish.notices import Notice

    start_notices = [Notice(f"data {env}", note, advisory=False) for env, note in resources.data_notes.items()]
    if resources.publisher is not None:
        start_notices += list(resources.publisher.notices)
    if notes:
        info = dataclasses.replace(info, notes=info.notes + tuple(notes))
        ledger.write(info)
    if resources.publisher is not None:
        from pytest_agentgym.results.events import field_status

        resources.publisher.publish(field_status(info, "started", {}))
    return start_notices
