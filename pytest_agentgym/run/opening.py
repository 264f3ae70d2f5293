"""What a run writes as it starts: its fingerprint (what its episodes mean) and the
first :class:`~pytest_agentgym.results.records.RunInfo` of run.json. No pytest."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.ledger import git_commit, settings_snapshot
from pytest_agentgym.results.records import RunInfo
from pytest_agentgym.results.redact import redact_url


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
