"""Whether two runs measured the same thing: the settings that change what an
episode means, compared before any verdict.

Compared: the task keys of each environment, and per environment the rounds
allowed, the sampling sent, the prompt's hash and the environment server's
identity (run.json ``fingerprint``), and the pytest-agentgym version. Not the
model, the endpoint or the checkpoint: those differ on purpose.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from pytest_agentgym.config.tasks import describe_keys
from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.records import RunInfo

Key = tuple[str, int, int]
_LABELS = ("in the baseline", "in the candidate")
_NO_FINGERPRINT = ("{role} has no fingerprint (a run from an older pytest-agentgym): its max rounds, "
                   "sampling, prompts and servers cannot be checked")


def _no_envs(role: str, info_envs: Any, plays: Iterable[str] | None) -> str:
    """The line for a run with a fingerprint that holds none of the environments compared: it
    did not play them (not a run from an older pytest-agentgym)."""
    wanted = sorted(set(plays or ()))
    which = f"environment(s) {', '.join(wanted)} that this run plays" if wanted else "the environments this run plays"
    played = ", ".join(info_envs) if info_envs else "no environment"
    return (f"the {role} has no episodes and no fingerprint of {which} (it played {played}); pick a {role} "
            f"that played them, or leave them out of this run (--agentgym-envs, -k)")


def _task_set_lines(base_keys: set[Key], cand_keys: set[Key]) -> list[str]:
    if base_keys == cand_keys:  # the usual comparison: one set comparison, nothing to say
        return []
    lines = []
    base_of, cand_of = _by_env(base_keys), _by_env(cand_keys)
    for env in sorted(base_of.keys() | cand_of.keys()):
        base, cand = base_of.get(env, set()), cand_of.get(env, set())
        if not cand:
            lines.append(f"{env}: only in the baseline ({len(base)} episode(s)), not in the candidate")
        elif not base:
            lines.append(f"{env}: only in the candidate ({len(cand)} episode(s)), not in the baseline")
        elif base != cand:
            sides = [f"only in the {role}: {describe_keys(keys)}"
                     for role, keys in (("baseline", base - cand), ("candidate", cand - base)) if keys]
            lines.append(f"{env} tasks: " + "; ".join(sides))
    return lines


def _by_env(keys: set[Key]) -> dict[str, set[tuple[int, int]]]:
    """(task, repeat) of the keys, by environment, in one pass."""
    found: dict[str, set[tuple[int, int]]] = {}
    for env, task, repeat in keys:
        found.setdefault(env, set()).add((task, repeat))
    return found


def settings_differences(base_info: RunInfo, base_keys: set[Key], cand_fingerprint: Mapping[str, Any],
                         cand_keys: set[Key], cand_version: str | None, *,
                         plays: Iterable[str] | None = None) -> list[str]:
    """One readable line per difference between a baseline run and a candidate that
    makes their episodes incomparable (empty when they measure the same thing).

    ``base_keys`` / ``cand_keys``: the (env, task, repeat) keys of each run (for a run
    about to start, the collected ones); ``cand_fingerprint``: the candidate's run.json
    ``fingerprint`` (:func:`pytest_agentgym.results.fingerprint.build`); ``cand_version``: its
    pytest-agentgym version. A run without a fingerprint (older runs) gets a line
    saying its settings cannot be checked; a run whose fingerprint holds none of the
    environments compared did not play them, and its line says so (``plays``: the
    environments the candidate plays, named in it).
    """
    lines = _task_set_lines(set(base_keys), set(cand_keys))
    base_fp = base_info.fingerprint or {}
    for role, fp in (("baseline", base_fp), ("candidate", cand_fingerprint or {})):
        if fp.get("envs"):
            continue
        if "envs" not in fp:  # written before runs had fingerprints
            lines.append(_NO_FINGERPRINT.format(role=role))
        elif role == "baseline":
            lines.append(_no_envs(role, base_info.environments, plays))
        elif base_fp.get("envs"):  # (narrowed to the environments both hold: said once, above)
            lines.append("the candidate has no episodes and no fingerprint of the environments compared; "
                         "compare runs that played the same environments")
    if base_fp.get("envs") and (cand_fingerprint or {}).get("envs"):
        lines += fingerprint.differences({"envs": base_fp["envs"]}, {"envs": cand_fingerprint["envs"]},
                                         labels=_LABELS)
    base_version = base_info.versions.get("pytest-agentgym")
    if base_version != cand_version:
        lines.append(f"pytest-agentgym version: {base_version or 'unknown'} {_LABELS[0]}, "
                     f"{cand_version or 'unknown'} {_LABELS[1]}")
    return lines
