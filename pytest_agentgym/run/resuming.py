"""A resume continues its run, the whole of it: what the run selected at its start, what a
resume must select to be let through, and what it must keep of run.json.

A run records its selection (every (environment, task, repeat) it set out to play) and the
command that started it in run.json's ``settings.selection`` when it is first opened
(:func:`selection_record`); a resume never rewrites that, nor the run's ``fingerprint``.

A resume plays the run's whole selection. The command line may narrow what pytest collects
(paths, ``-k``, ``-m``, ``--deselect``, ``--lf``, ``--agentgym-envs``, ``--agentgym-tasks``),
but a resume is refused before its first episode (:func:`check_whole`, exit status 4 like a
settings mismatch) when the narrowing leaves out an episode it still has to play (one with no
scored record), or when it would add episodes the run never selected. A narrowing that keeps
every episode left to play is let through: what it leaves out is kept, and the run is judged
on all of it, so the environments it left out are planned from their suites
(:func:`plan_left_out`). No pytest.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Iterable, Mapping

from pytest_agentgym.results.ledger import LedgerError
# run/resuming's names for them (opening.py, the tests): one implementation, in results/
from pytest_agentgym.results.resumption import SELECTION  # noqa: F401
from pytest_agentgym.results.resumption import recorded_selection as recorded
from pytest_agentgym.results.resumption import resume_command as whole_command

Key = tuple[str, int, int]


def selection_record(keys: Iterable[Key], command: str) -> dict[str, Any]:
    """``settings.selection``: the episodes (environment -> repeat -> task ranges), how many,
    and the command that started the run."""
    from pytest_agentgym.run.shards import encode_selection

    keys = set(keys)
    return {"episodes": encode_selection(keys), "count": len(keys), "command": command}


def recorded_keys(info: Any) -> set[Key] | None:
    entry = recorded(info)
    if entry is None:
        return None
    from pytest_agentgym.run.shards import decode_selection

    return decode_selection(entry["episodes"])


def _by_env(keys: Iterable[Key]) -> list[str]:
    from pytest_agentgym.config.tasks import task_ranges

    keys = sorted(set(keys))
    counts = Counter(env for env, _task, _repeat in keys)
    return [f"{env}: {n} episode(s) (tasks {task_ranges(t for e, t, _r in keys if e == env)})"
            for env, n in counts.items()]


def check_whole(info: Any, run_dir: Any, selection: set[Key], kept: Iterable[Key], planned: set[Key]) -> None:
    """Refuse (:class:`LedgerError`) a resume whose ``planned`` episodes leave out one of the
    run's ``selection`` that is not ``kept`` (scored before), or add one the run did not select."""
    kept = set(kept)
    missing = (selection - kept) - planned
    extra = planned - selection
    if not missing and not extra:
        return
    lines = [f"cannot resume run {info.run_id} ({run_dir}): a resume plays the run's whole selection "
             f"({len(selection)} episodes, {len(selection & kept)} of them scored and kept)"]
    if missing:
        lines.append(f"this resume would leave out {len(missing)} episode(s) it has to play:")
        lines += [f"  - {line}" for line in _by_env(missing)]
    if extra:
        lines.append(f"this resume would add {len(extra)} episode(s) the run did not select (start a new run "
                     f"for them):")
        lines += [f"  - {line}" for line in _by_env(extra)]
    lines.append(f"resume the whole run with: {whole_command(info, run_dir)}")
    lines.append("(paths, -k, -m, --deselect, --lf, --agentgym-envs and --agentgym-tasks may narrow a resume "
                 "only to a set that holds every episode it has left to play)")
    raise LedgerError("\n".join(lines))


def plan_left_out(run: Any, selection: set[Key]) -> list[str]:
    """Plan the environments of ``selection`` that this resume collected no item of (all of
    their episodes are kept): from their suites under the command line's paths, whatever
    --agentgym-envs says. Returns the environments no suite was found for."""
    wanted = {env for env, _task, _repeat in selection} - set(run.plans)
    if not wanted:
        return []
    from pytest_agentgym.config.suites import suites_under
    from pytest_agentgym.run.selection import node_path

    paths = [str(a) for a in run.config.args] if run.config is not None else []
    settings = run.settings
    if dataclasses.is_dataclass(settings) and getattr(settings, "envs", None):
        settings = dataclasses.replace(settings, envs=None)
    try:
        found = suites_under(paths, settings)
    except OSError:
        found = []
    root = getattr(run.config, "rootpath", None)
    for suite in found:
        if suite.environment in wanted:
            run._plan_suite(suite, node_path(suite.path, root))
    return sorted(wanted - set(run.plans))


def begin_resume(run: Any) -> tuple[set[Key] | None, list[str]]:
    """Before a resume starts anything more: check the command line selects the whole run
    (else :class:`LedgerError`), plan the environments it left out, and return the run's
    selection (None for a run of an older version, which recorded none) and the environments
    to fingerprint besides those it plays."""
    ledger = run.ledger
    if not ledger.resuming or run.worker is not None:
        return None, []
    selection = recorded_keys(ledger.previous)
    if selection is None:
        return None, []
    check_whole(ledger.previous, ledger.run_dir.path, selection, ledger.kept, run.planned_keys)
    unplanned = plan_left_out(run, selection)
    if unplanned:
        raise LedgerError(
            f"cannot resume run {ledger.previous.run_id} ({ledger.run_dir.path}): no suite of "
            f"{', '.join(unplanned)} (the run's) is under the paths given, so its gates cannot be judged; "
            f"resume the whole run with: {whole_command(ledger.previous, ledger.run_dir.path)}")
    return selection, [env for env in run.plans]


def kept_of_run(info: Any, fp: Mapping[str, Any], env_names: Iterable[str], selection_keys: set[Key],
                command: str) -> dict[str, Any]:
    """What a resumed run's run.json keeps of the run's first start: its fingerprint (envs
    this run adds for a run of an older version are added), its environments (the run's
    first, then any this one adds) and ``settings.selection``. For a new run: the selection."""
    if info is None:
        return {"selection": selection_record(selection_keys, command)}
    old_fp = info.fingerprint or {}
    fingerprint = {**fp, **old_fp, "envs": {**(fp.get("envs") or {}), **(old_fp.get("envs") or {})}} \
        if old_fp else dict(fp)
    environments = tuple(dict.fromkeys([*info.environments, *env_names]))
    entry = recorded(info) or selection_record(selection_keys, info.command)
    return {"fingerprint": fingerprint, "environments": environments, "selection": entry}


def served_as(endpoint: Any, model_settings: Any) -> tuple[str, str]:
    """(endpoint kind, model name) that the chain entry ``endpoint`` gives the fingerprint when
    it is chosen, known before anything is started: a launched vLLM serves its
    ``vllm.served_model_name``, else the entry's model, else the checkpoint (model/vllm.py); a
    launched reference agent its model, else its policy (model/launcher.py); an attached
    endpoint its ``model:``."""
    if endpoint.kind == "vllm" and endpoint.launched:
        return "vllm", model_settings.vllm.served_model_name or endpoint.model or endpoint.checkpoint or ""
    if endpoint.kind == "reference" and endpoint.launched:
        return "reference", endpoint.model or endpoint.policy
    return endpoint.kind, endpoint.model or ""


def refuse_another_model(settings: Any, paths: Iterable[str] = ()) -> None:
    """Before anything is started (no server, no model): refuse (:class:`LedgerError`, in the
    words of run/checks.resumable) a resume of ``settings.resume`` when no endpoint of the model
    chain gives the run's model, endpoint kind and checkpoint, or when the suites under
    ``paths`` give an environment other rounds or sampling. The prompts and the servers'
    identities are checked once the servers are up (run/opening.py)."""
    if settings.resume is None or getattr(settings, "queue", None) is not None:
        return
    from pytest_agentgym.model.endpoint_settings import EndpointConfigError
    from pytest_agentgym.results.ledger import RunLedger
    from pytest_agentgym.results.store import RunDir
    from pytest_agentgym.run.checks import resumable
    from pytest_agentgym.run.services import model_settings_of

    run_dir = RunDir(settings.resume)
    try:
        info = run_dir.read_info()
    except (OSError, ValueError, TypeError, AttributeError):
        return  # opening the run for the resume says what is wrong with it
    then = info.fingerprint or {}
    if not then or "none" in (then.get("model"), then.get("endpoint_kind")):
        return  # a run that had no endpoint: any endpoint plays it on (the check at the start says more)
    try:
        ms = model_settings_of(settings)
    except EndpointConfigError:
        return  # a usage error of its own, said where the run reads the model settings
    envs = _envs_now(settings, ms, paths, then.get("envs") or {})
    ledger = RunLedger(run_dir, generation=info.generation + 1, previous=info)
    refusals = []
    for endpoint in ms.endpoints:
        kind, model = served_as(endpoint, ms)
        try:
            resumable(ledger, {"model": model, "endpoint_kind": kind, "checkpoint": settings.checkpoint,
                               "envs": envs}, info.run_id, started=[])
            return  # this endpoint can play it on
        except LedgerError as exc:
            refusals.append(exc)
    raise refusals[0]


def _envs_now(settings: Any, model_settings: Any, paths: Iterable[str],
              then: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The rounds and sampling the suites under ``paths`` give each environment of the run
    (one whose suites disagree is left to the check at the start, which knows what was
    collected); its prompt and server as the run recorded them."""
    import json

    from pytest_agentgym.config.suites import suites_under
    from pytest_agentgym.run.plans import max_rounds_for
    from pytest_agentgym.run.requests import RequestRules
    from pytest_agentgym.run.services import node_sampling_of

    rules = RequestRules.of(settings, node_sampling_of(model_settings))
    try:
        found = suites_under(list(paths), settings)
    except OSError:
        found = []
    seen: dict[str, set[tuple[int, str]]] = {}
    for suite in found:
        sampling = json.dumps(rules.effective_sampling(suite.sampling), sort_keys=True)
        seen.setdefault(suite.environment, set()).add((max_rounds_for(suite, settings), sampling))
    envs = {}
    for env, values in seen.items():
        if len(values) == 1 and isinstance(then.get(env), Mapping):
            rounds, sampling = next(iter(values))
            envs[env] = {**then[env], "max_rounds": rounds, "sampling": json.loads(sampling)}
    return envs
