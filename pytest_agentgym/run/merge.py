"""Join the shards of one run into one run directory: ``pytest-agentgym merge``.

    pytest-agentgym merge reports/R/shard-*-of-3 --out reports/R
    pytest-agentgym merge reports/R --out reports/R      (the shard-I-of-N directories in it)

Before anything is written, the shards are checked (:func:`~pytest_agentgym.run.merge_checks.check`): they are shards
(run.json ``shard``, see :mod:`pytest_agentgym.run.shards`) of the same run id, count and
selection, none still running, with the same fingerprint, pytest-agentgym version,
gating settings and suite plans; every shard is given once, and together they hold
every episode of the selection exactly once; no shard's episodes.jsonl records an episode
twice in one generation with lines that differ (a line repeated byte for byte is kept once,
and said so: :func:`~pytest_agentgym.run.merge_checks.reading_notes`). Each problem is named (a missing shard with its
episodes and the command that runs it, overlapping shards with the episodes both hold, a
setting with each shard's value, a repeated episode with both line numbers) in one
:class:`~pytest_agentgym.run.merge_checks.MergeError`. The shards are read as every reader reads a run
(:func:`pytest_agentgym.results.reading.read_episodes_file`), each record without its turns
(the merge judges records' own fields; each line is copied from its shard byte for byte).

Then ``--out`` gets an ordinary run directory: episodes.jsonl (every shard's lines once,
superseded generations included), run.json (``merged_from`` lists the shards) and
report.html. The gates of the suites (recorded by each shard) and the baseline
comparison are judged here, on the whole run, and written to run.json like a
single run's. The shards are only read. Plain code: no pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

from pytest_agentgym.results.aggregate import summaries_record
from pytest_agentgym.results.current import Records, current_records
from pytest_agentgym.results.gates import GateVerdict
from pytest_agentgym.results.records import EpisodeRecord, RunInfo
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.run.merge_checks import MergeError, ShardRun, check, expand, load, reading_notes


def _without_shard(command: str) -> str:
    """The shard's rerun command with --agentgym-shard taken out: the run as one process."""
    words, out, skip = shlex.split(command), [], False
    for word in words:
        if skip:
            skip = False
        elif word == "--agentgym-shard":
            skip = True
        elif not word.startswith("--agentgym-shard="):
            out.append(word)
    return shlex.join(out)


def _check_out(out: Path, run_id: str, runs: Sequence[ShardRun]) -> None:
    if any(out.resolve() == r.path.resolve() for r in runs):
        raise MergeError(f"--out {out} is one of the shards; give another directory (e.g. reports/{run_id})")
    run_dir = RunDir(out)
    if run_dir.run_file.is_file():
        try:
            info = run_dir.read_info()
        except (OSError, ValueError, TypeError) as exc:
            raise MergeError(f"--out {out} holds a run.json that cannot be read ({exc}); give another directory") \
                from None
        if not info.merged_from or info.run_id != run_id:
            raise MergeError(f"--out {out} holds run {info.run_id}, not an earlier merge of run {run_id}; "
                             f"give another directory (a merge replaces only an earlier merge of the same run)")
    elif run_dir.episodes_file.is_file():
        raise MergeError(f"--out {out} holds episodes.jsonl but no run.json; give another directory")


def _merged_info(runs: Sequence[ShardRun], current: Sequence[EpisodeRecord], baseline: str | None) -> RunInfo:
    from pytest_agentgym.results.ledger import final_status

    first = runs[0]
    ended = [r.info.ended_at or r.info.started_at for r in runs]
    envs: dict[str, Any] = {}
    for run in runs:
        envs.update(run.info.fingerprint.get("envs") or {})
    notes = list(dict.fromkeys(n for r in runs for n in r.info.notes))
    notes += reading_notes(runs)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    notes.append(f"merged from {len(runs)} shards by pytest-agentgym merge at {stamp}")
    return dataclasses.replace(
        first.info, started_at=min(r.info.started_at for r in runs), ended_at=max(ended),
        node=", ".join(dict.fromkeys(r.info.node for r in runs)),
        endpoint=", ".join(dict.fromkeys(r.info.endpoint for r in runs)),
        environments=tuple(first.info.shard["plans"]), command=_without_shard(first.info.command),
        notes=tuple(notes), status=final_status(current), baseline=baseline,
        fingerprint={**first.info.fingerprint, "envs": envs}, process={},
        generation=max(r.info.generation for r in runs),
        resumed_at=tuple(sorted(t for r in runs for t in r.info.resumed_at)), shard=None,
        merged_from=tuple({"index": r.info.shard["index"], "count": r.info.shard["count"], "path": str(r.path.resolve()),
                           "node": r.info.node, "host": r.info.process.get("host"), "status": r.info.status,
                           "started_at": r.info.started_at, "ended_at": r.info.ended_at,
                           "episodes": len(r.current), "generation": r.info.generation}
                          for r in runs))


#: Bytes read at once from a shard for one line (a longer line is read on until its newline).
LINE_READ = 64 * 1024
#: Lines gathered into one write: up to this many bytes, and this many lines (the system's
#: limit on one gathered write is 1,024 pieces).
WRITE_BYTES, WRITE_LINES = 1024 * 1024, 512


def _write_episodes(run_dir: RunDir, lines: Iterable[tuple[Path, int]]) -> None:
    """The shards' lines, each copied byte for byte from where it was read (``lines``: the
    file and the byte offset of each, in the merged run's order). A shard's harness wrote
    them as every line is written (strict JSON, redacted, half a surrogate pair as its
    ``\\ud83d`` escape): nothing is decoded and encoded again, so the merged line is the
    shard's, an integer beyond 64 bits included. A last line without its newline gets one.
    Each line is read with one positioned read and about a megabyte of lines is written at
    once (together a third of the time of seeking a buffered reader to each line and
    writing the lines one by one)."""
    tmp = run_dir.episodes_file.with_suffix(".jsonl.tmp")
    with contextlib.ExitStack() as stack:
        files: dict[Path, int] = {}
        out = stack.enter_context(open(tmp, "wb", buffering=0))
        batch: list[bytes] = []
        size = 0
        for source, offset in lines:
            fd = files.get(source)
            if fd is None:
                fd = files[source] = os.open(source, os.O_RDONLY)
                stack.callback(os.close, fd)
            batch.append(_line_at(fd, offset))
            size += len(batch[-1])
            if size >= WRITE_BYTES or len(batch) >= WRITE_LINES:
                _write_all(out, batch)
                batch, size = [], 0
        _write_all(out, batch)
    os.replace(tmp, run_dir.episodes_file)


def _write_all(out: Any, pieces: list[bytes]) -> None:
    """``pieces`` written one after another to the unbuffered file ``out`` (a short write is
    finished)."""
    written = os.writev(out.fileno(), pieces) if pieces else 0
    rest = b"".join(pieces)[written:] if written < sum(map(len, pieces)) else b""
    while rest:
        rest = rest[out.write(rest):]


def _line_at(fd: int, offset: int) -> bytes:
    """The line that starts at byte ``offset`` of the open file ``fd``, with its newline (one
    added to a last line that has none)."""
    chunk = os.pread(fd, LINE_READ, offset)
    end = chunk.find(b"\n")
    while end < 0:
        more = os.pread(fd, LINE_READ, offset + len(chunk))
        if not more:
            return chunk + b"\n"
        end = more.find(b"\n")
        if end >= 0:
            end += len(chunk)
        chunk += more
    return chunk[:end + 1]


@dataclass
class Merged:
    out: Path
    info: RunInfo
    summaries: dict[str, Any]
    verdicts: list[GateVerdict]
    report_path: Path | None = None
    #: the shards' lines left out (no record, or repeated byte for byte), as run.json's notes say
    left_out: list[str] = dataclasses.field(default_factory=list)
    #: the --notify URLs that did not take the merged run's summary (publish/webhook.py)
    notify_problems: list[str] = dataclasses.field(default_factory=list)

    def exit_code(self) -> int:
        """0 when every gate passed (an inconclusive comparison passes unless gates are strict), else 1."""
        return 0 if all(v.passed for v in self.verdicts) else 1


def _baseline_verdicts(baseline: str, out: Path, plans: dict, settings: dict, shards_baseline: str | None
                       ) -> tuple[list[GateVerdict], list[Any]]:
    from pytest_agentgym.compare import CompareError, compare_runs
    from pytest_agentgym.run.plans import baseline_verdicts

    if baseline != shards_baseline and not settings.get("allow_mismatch"):
        try:  # the shards checked theirs before the first episode; check this one now
            compare_runs(baseline, out, allow_mismatch=False)
        except CompareError as exc:
            return [GateVerdict(env, "baseline", None, False, f"cannot compare: {exc}", outcome="error")
                    for env in plans], []
    judging = SimpleNamespace(baseline_metric=settings.get("baseline_metric"), max_drop=settings.get("max_drop") or 0.05,
                              strict_gates=bool(settings.get("strict_gates")))
    return baseline_verdicts(baseline, out, list(plans), plans, judging)


def merge(paths: Sequence[str | Path], out: str | Path, *, baseline: str | None = None,
          report: bool = True, notify: Sequence[str] = ()) -> Merged:
    """Check the shards in ``paths`` and write the run they make to ``out``. ``baseline``:
    compare with this run directory instead of the shards' --agentgym-baseline. ``out`` is
    locked first (one writer per run directory: not while a run or another merge writes it).
    ``notify``: URLs that get the merged run's summary (a webhook, docs/notifications.md)."""
    from pytest_agentgym.results.lock import RunDirBusy, RunLock

    if not paths:
        raise MergeError("give the shards' run directories (or reports/<run_id> that holds them)")
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise MergeError(f"no such directory: {', '.join(missing)}")
    out = Path(out)
    try:
        lock = RunLock(out).acquire()
    except RunDirBusy as exc:
        raise MergeError(f"--out {exc}") from None
    try:
        runs = sorted((load(p) for p in expand(paths)), key=lambda r: (r.info.shard["index"], str(r.path)))
        check(runs, _without_shard(runs[0].info.command))
        merged = _merge_into(out, runs, baseline, report)
        if notify:  # under the lock: a failure is noted in run.json
            from pytest_agentgym.publish.webhook import notify_run

            merged.notify_problems = notify_run(notify, merged.info, run_dir=out, report_path=merged.report_path,
                                                write_info=RunDir(out).write_info, source="merge")
        return merged
    finally:
        lock.release()


def _merge_into(out: Path, runs: Sequence[ShardRun], baseline: str | None, report: bool) -> Merged:
    from pytest_agentgym.run.plans import counts, judge_with_ranges, plan_from_record

    _check_out(out, runs[0].info.run_id, runs)
    shards_baseline = runs[0].info.settings.get("baseline")
    baseline = str(Path(baseline).resolve()) if baseline else shards_baseline
    if baseline and not (Path(baseline) / "run.json").is_file():
        raise MergeError(f"the baseline {baseline} is not here (no run.json); the shards were compared with it "
                         f"where they ran: give a copy with --baseline RUN_DIR")
    order = {env: i for i, env in enumerate(runs[0].info.shard["plans"])}  # as one run would list them
    files = {id(run): RunDir(run.path).episodes_file for run in runs}  # one path each, not one per line
    pairs = sorted(((r, (files[id(run)], offset)) for run in runs
                    for r, offset in zip(run.records, run.offsets)),
                   key=lambda p: (order.get(p[0].env, len(order)), p[0].env, p[0].task_index, p[0].repeat,
                                  p[0].generation))
    current = current_records(Records((p[0] for p in pairs), duplicates=[d for r in runs for d in r.duplicates]))
    run_dir = RunDir(out)
    run_dir.path.mkdir(parents=True, exist_ok=True)
    _write_episodes(run_dir, (p[1] for p in pairs))
    info = _merged_info(runs, current, baseline)
    run_dir.write_info(info)
    plan_data = runs[0].info.shard["plans"]
    plans = {env: plan_from_record(data) for env, data in plan_data.items()}
    ranges = {env: tuple(d["reward_range"]) for env, d in plan_data.items() if d.get("reward_range")}
    summaries, verdicts = judge_with_ranges(current, plans, ranges)
    comparisons: list[Any] = []
    if baseline:
        extra, comparisons = _baseline_verdicts(baseline, out, plans, info.settings, shards_baseline)
        verdicts += extra
    tallies = counts(current, verdicts, info.generation)
    tallies["kept"] = sum(int(r.info.counts.get("kept", 0)) for r in runs)
    info = dataclasses.replace(info, counts=tallies, gates=tuple(v.to_dict() for v in verdicts),
                               summaries=summaries_record(summaries))
    run_dir.write_info(info)
    if out.resolve().name == info.run_id:  # reports/<run_id>: the merged run is the run
        from pytest_agentgym.results.store import point_latest

        point_latest(out.resolve().parent, info.run_id)
    merged = Merged(out, info, summaries, verdicts, left_out=reading_notes(runs))
    if report:
        from pytest_agentgym.report.render import render_run_dir

        from pytest_agentgym.report.index import refresh_index

        merged.report_path = render_run_dir(out, comparison=comparisons[0] if len(comparisons) == 1 else None)
        refresh_index(out)  # the reports directory's index.html lists the merged run (never raises)
    return merged


def merge_command(paths: Sequence[str], out: str, *, baseline: str | None, report: bool,
                  notify: str | None = None) -> int:
    """``pytest-agentgym merge``: exit 0 all gates passed, 1 a gate did not, 2 the shards cannot be merged
    (or --notify is no http(s) URL); a webhook that fails changes none of these."""
    import sys

    from pytest_agentgym.config.options import parse_notify
    from pytest_agentgym.run.terminal import summary_table

    try:
        urls = parse_notify(notify) if notify is not None else ()
    except ValueError as exc:
        print(f"pytest-agentgym merge: --notify: {exc}", file=sys.stderr)
        return 2
    try:
        merged = merge(paths, out, baseline=baseline, report=report, notify=urls)
    except MergeError as exc:
        print(f"pytest-agentgym merge: {exc}", file=sys.stderr)
        return 2
    info = merged.info
    print(f"merged {len(info.merged_from)} shards of run {info.run_id}: {info.counts['episodes']} episodes, "
          f"status {info.status}")
    for note in merged.left_out:
        print(f"pytest-agentgym merge: {note}", file=sys.stderr)
    for line, _ in summary_table(merged.summaries):
        print(line)
    for v in merged.verdicts:
        print(f"{v.word}: {v.env} {v.gate}: {v.detail}")
    print(f"agentgym results: {RunDir(merged.out).episodes_file}")
    if merged.report_path is not None:
        print(f"agentgym report: {merged.report_path}")
    for problem in merged.notify_problems:
        print(f"pytest-agentgym merge: {problem}", file=sys.stderr)
    return merged.exit_code()
