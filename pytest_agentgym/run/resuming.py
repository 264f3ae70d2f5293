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
