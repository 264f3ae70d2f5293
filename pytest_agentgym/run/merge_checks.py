"""The shards a merge is given, read and checked before anything is written.

:func:`expand` and :func:`load` read each shard (:class:`ShardRun`: its run.json and its
records, as every reader reads a run, each record without its turns); :func:`check` finds
every problem that stops them from making one run (:data:`MUST_MATCH` settings, versions,
fingerprints, plans and selections that differ, a shard still running, lines that record
an episode twice and differ; then the coverage: every episode of the selection exactly
once) and names each in one :class:`MergeError`. :func:`reading_notes` says what was left
out of the shards' lines. The merge itself is :mod:`pytest_agentgym.run.merge`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from pytest_agentgym.config.tasks import describe_keys
from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.current import Duplicate, Records, current_records
from pytest_agentgym.results.reading import read_episodes_file, record_without_turns
from pytest_agentgym.results.records import EpisodeRecord, RunInfo
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run import shards

#: run.json settings that every shard must share: they change what is measured or how it is gated.
MUST_MATCH = ("envs", "tasks", "repeat", "max_rounds", "episode_timeout", "seed", "retries", "sampling",
              "checkpoint", "max_error_rate", "baseline", "max_drop", "baseline_metric", "strict_gates",
              "allow_mismatch")


class MergeError(ValueError):
    """Shards that cannot be merged (or an --out that cannot take them); the message names each problem."""


@dataclass
class ShardRun:
    path: Path
    info: RunInfo
    #: every line of its episodes.jsonl, superseded generations included, duplicates left out
    records: list[EpisodeRecord]
    #: lines of its episodes.jsonl that could not be read (torn or corrupt), as messages
    skipped: list[str] = dataclasses.field(default_factory=list)
    #: second records of one episode and generation in its episodes.jsonl (left out of ``records``)
    duplicates: list[Duplicate] = dataclasses.field(default_factory=list)
    #: the byte offset of each of ``records``' line in its episodes.jsonl (copied from there)
    offsets: list[int] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        return f"shard {self.info.shard['index']}/{self.info.shard['count']}"

    @functools.cached_property
    def current(self) -> Records:
        """What the shard counts (:func:`~pytest_agentgym.results.current.current_records`)."""
        return current_records(self.records)

    @property
    def keys(self) -> set[shards.Key]:
        return {r.key for r in self.current}


def _describe(keys: Iterable[shards.Key], limit: int = 4) -> str:
    by_env: dict[str, list[tuple[int, int]]] = {}
    for env, task, repeat in keys:
        by_env.setdefault(env, []).append((task, repeat))
    parts = [f"{env} {describe_keys(found)}" for env, found in sorted(by_env.items())]
    return "; ".join(parts[:limit]) + (f"; ... ({len(parts) - limit} more environments)" if len(parts) > limit else "")


def expand(paths: Sequence[str | Path]) -> list[Path]:
    """The run directories given; a directory that holds shard-I-of-N directories (reports/<run_id>,
    also once a merge wrote its run there) stands for them."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        inner = sorted(p for p in path.iterdir() if p.is_dir() and shards.parse_dirname(p.name)) \
            if path.is_dir() else []
        out.extend(inner or [path])
    return out


def load(path: Path) -> ShardRun:
    run_dir = RunDir(path)
    if not run_dir.run_file.is_file():
        raise MergeError(f"{path} is not a run directory (no run.json); give the shards' run directories, "
                         f"e.g. reports/<run_id>/shard-1-of-3, or reports/<run_id> that holds them")
    try:
        info = run_dir.read_info()
    except (OSError, ValueError, TypeError) as exc:
        raise MergeError(f"{run_dir.run_file} cannot be read ({exc}); it is not a usable shard") from None
    if not info.shard:
        raise MergeError(f"{path} is not a shard: its run.json has no 'shard' (it was not run with "
                         f"--agentgym-shard); merge joins the shards of one sharded run")
    found = read_episodes_file(run_dir.episodes_file, record_without_turns)
    return ShardRun(path, info, found.records, [str(line) for line in found.skipped], found.duplicates,
                    found.offsets)


def _duplicates(runs: Sequence[ShardRun]) -> list[str]:
    """One problem per shard whose episodes.jsonl holds an episode twice in one generation
    with lines that differ (which one is right cannot be told); lines repeated byte for byte
    are kept once (see :func:`reading_notes`)."""
    problems = []
    for run in runs:
        differing = [d for d in run.duplicates if not d.identical]
        if differing:
            listed = "; ".join(f"{d.key[0]} task {d.key[1]} repeat {d.key[2]} generation {d.generation} "
                               f"at lines {d.kept_line} and {d.line}" for d in differing[:8])
            more = f"; ... ({len(differing) - 8} more)" if len(differing) > 8 else ""
            problems.append(f"{run.name} ({run.path}): {len(differing)} line(s) of its episodes.jsonl record an "
                            f"episode again in the same generation, and differ from the first record: {listed}{more}; "
                            f"delete the wrong line of each pair from {run.path / 'episodes.jsonl'} (or run the "
                            f"shard again), then merge again")
    return problems


def reading_notes(runs: Sequence[ShardRun]) -> list[str]:
    """What the merge says (and run.json keeps) of the shards' lines it left out: lines that are
    no record, and lines repeated byte for byte (kept once)."""
    notes = [f"{r.name}: {len(r.skipped)} line(s) of its episodes.jsonl that are no record left out, e.g. {r.skipped[0]}"
             for r in runs if r.skipped]
    for run in runs:
        same = [d for d in run.duplicates if d.identical]
        if same:
            listed = ", ".join(f"line {d.line} (= line {d.kept_line}: {d.key[0]} task {d.key[1]} repeat {d.key[2]})"
                               for d in same[:8])
            more = f", ... ({len(same) - 8} more)" if len(same) > 8 else ""
            notes.append(f"{run.name}: {len(same)} line(s) of its episodes.jsonl repeat an earlier line byte for "
                         f"byte and were kept once: {listed}{more}")
    return notes


def _differing(runs: Sequence[ShardRun], what: str, value: Any) -> list[str]:
    """One line when ``value(run)`` is not the same for every shard."""
    seen = {}
    for run in runs:
        seen.setdefault(repr(value(run)), []).append(run)
    if len(seen) < 2:
        return []
    return [f"{what} differ: " + "; ".join(f"{value(group[0])!r} in {', '.join(r.name for r in group)}"
                                           for group in seen.values())]


def check(runs: Sequence[ShardRun], rerun: str) -> dict[shards.Key, int]:
    """Every problem that stops ``runs`` from making one run, in one :class:`MergeError`;
    else the split (episode key -> shard index)."""
    runs = sorted(runs, key=lambda r: (r.info.shard["index"], str(r.path)))
    problems = [f"{r.name} ({r.path}) says running: it still runs, or its process died (then resume it: "
                f"pytest ... --agentgym-resume={r.path})" for r in runs if r.info.status == "running"]
    problems += _differing(runs, "run ids", lambda r: r.info.run_id)
    problems += _differing(runs, "shard counts", lambda r: r.info.shard["count"])
    problems += _differing(runs, "pytest-agentgym versions", lambda r: r.info.versions.get("pytest-agentgym"))
    for key in MUST_MATCH:
        problems += _differing(runs, f"settings '{key}'", lambda r, k=key: r.info.settings.get(k))
    problems += _duplicates(runs)
    first = runs[0]
    for other in runs[1:]:
        problems += [f"settings differ: {line}" for line in fingerprint.differences(
            first.info.fingerprint, other.info.fingerprint, labels=(f"in {first.name}", f"in {other.name}"))]
        if other.info.shard["plans"] != first.info.shard["plans"]:
            problems.append(f"the suites' plans (gates, error budget, rounds) differ between {first.name} "
                            f"and {other.name}: run every shard from the same suite files")
    selections = {r.info.shard["selection_sha256"] for r in runs}
    if len(selections) > 1:
        for other in runs[1:]:
            a, b = shards.decode_selection(first.info.shard["selection"]), \
                shards.decode_selection(other.info.shard["selection"])
            if a != b:
                sides = [f"only {name}: {_describe(keys)}" for name, keys in
                         ((f"{first.name} selected", a - b), (f"{other.name} selected", b - a)) if keys]
                problems.append(f"the selections differ ({'; '.join(sides) or 'the same episodes, other rounds'}); "
                                f"run every shard with the same suites, --agentgym-envs/-tasks/-repeat and -k")
    if problems:  # without one run id, count and selection, coverage means nothing
        raise MergeError("cannot merge these shards:\n  - " + "\n  - ".join(problems))
    return _coverage(runs, rerun)


def _coverage(runs: Sequence[ShardRun], rerun: str) -> dict[shards.Key, int]:
    record = runs[0].info.shard
    count, run_id = int(record["count"]), runs[0].info.run_id
    split = shards.expected_split(record)
    problems = []
    by_index: dict[int, list[ShardRun]] = {}
    for run in runs:
        by_index.setdefault(int(run.info.shard["index"]), []).append(run)
    for index in range(1, count + 1):
        mine = {k for k, i in split.items() if i == index}
        given = by_index.get(index, [])
        if not given:
            problems.append(f"shard {index}/{count} is missing: no directory given is shard {index}/{count} of run "
                            f"{run_id}, so its {len(mine)} episode(s) ({_describe(mine)}) are not here; give its run "
                            f"directory (reports/{run_id}/{shards.Shard(index, count).dirname}) or run it: "
                            f"{rerun} --agentgym-shard={index}/{count} --agentgym-run-id={run_id}")
        elif len(given) > 1:
            problems.append(f"shard {index}/{count} is given {len(given)} times ({', '.join(str(r.path) for r in given)}): "
                            f"they overlap; give each shard once")
        for run in given[:1]:
            held = run.keys
            lacking, foreign = mine - held, held - mine
            if lacking:
                problems.append(f"{run.name} ({run.path}, status {run.info.status}) lacks {len(lacking)} of its "
                                f"{len(mine)} episode(s): {_describe(lacking)}; resume it: {rerun} "
                                f"--agentgym-resume={run.path}")
            for other in sorted({split.get(k, 0) for k in foreign}):
                keys = {k for k in foreign if split.get(k, 0) == other}
                whose = f"shard {other}/{count}'s" if other else "no shard's (outside the selection)"
                problems.append(f"{run.name} ({run.path}) overlaps: it holds {len(keys)} of {whose} episodes: "
                                f"{_describe(keys)}")
    if problems:
        raise MergeError("these shards do not cover the selection exactly once:\n  - " + "\n  - ".join(problems))
    return split
