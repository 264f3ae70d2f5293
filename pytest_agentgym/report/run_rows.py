"""One row of the runs index (:mod:`~pytest_agentgym.report.index`): a run directory's
model, checkpoint, node, status, per-environment figures, gates and counts
(:class:`RunRow`), read from its files alone and kept between reads (:class:`RowCache`).

Why it stays fast with hundreds of runs: a finished run is read from run.json
alone (its ``summaries`` hold the figures of each environment), never from
episodes.jsonl. Only a run whose run.json still says ``running`` has no figures
there; its episodes.jsonl is followed by an :class:`EpisodeTally`, which reads only
the lines added since it last looked, and a :class:`RowCache` looks only when the
run's files changed.

How a running run is told from a dead one: the process that writes a run holds
its directory's lock (:mod:`pytest_agentgym.results.lock`) and records itself in
run.json (``process``: pid, host, start time). Taking the lock to test it would
refuse a run starting at that instant, so the row asks, as
:func:`~pytest_agentgym.results.ledger.settle_crashed` does, whether that
process still lives (:func:`~pytest_agentgym.results.ledger.process_alive`): gone
means ``crashed`` (shown, never written back: readers do not write), another
host means it cannot be told from here (shown as running, with a note).

A directory that cannot be read (run.json that is not JSON, episodes without
run.json) is a row of status ``broken`` that says what is wrong: the index
never stops at one bad run.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any, Iterable

from pytest_agentgym.results.records import RunInfo, parse_time
from pytest_agentgym.results.store import EPISODES_FILE, RUN_FILE

__all__ = ["BROKEN", "EnvFigures", "EpisodeTally", "RowCache", "RunRow"]

REPORT_FILE = "report.html"
#: A shard's directory under its run: ``reports/<run_id>/shard-2-of-3``.
SHARD_DIR = re.compile(r"shard-(\d+)-of-(\d+)")
#: The status of a directory whose run cannot be read.
BROKEN = "broken"


@dataclass
class EnvFigures:
    """One environment's figures in a row (run.json's ``summaries`` entry, or counted)."""

    success_rate: float | None = None
    mean_reward: float | None = None
    episodes: int = 0
    errors: int = 0


@dataclass
class RunRow:
    """One run directory as the index shows it."""

    #: the directory under the reports directory, ``/``-separated: what URLs and the CLI name
    key: str
    path: str
    run_id: str = ""
    model: str = ""
    checkpoint: str = ""
    node: str = ""
    #: run.json's status; ``crashed`` for a running run whose process is gone; ``broken``
    status: str = BROKEN
    started_at: str = ""
    ended_at: str = ""
    #: environment -> its figures, in run.json's order
    envs: dict[str, EnvFigures] = field(default_factory=dict)
    #: where the figures came from: run.json, episodes.jsonl (a running run), or "" (none)
    figures_from: str = ""
    episodes: int = 0
    errors: int = 0
    planned: int | None = None
    #: gate outcome (passed, failed, error, inconclusive, not-judged) -> how many
    gates: dict[str, int] = field(default_factory=dict)
    #: ``env: gate`` of each gate that did not pass
    failed_gates: list[str] = field(default_factory=list)
    #: ``2/3`` for a shard; the number of shards a merged run joined
    shard: str = ""
    merged_from: int = 0
    #: reports/latest points here
    latest: bool = False
    #: report.html is there
    report: bool = False
    #: what is wrong with the directory (status broken), or a note on its status
    problem: str = ""

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def gates_passed(self) -> int:
        return self.gates.get("passed", 0)

    @property
    def gates_failed(self) -> int:
        return sum(n for outcome, n in self.gates.items() if outcome in ("failed", "error"))

    @property
    def date(self) -> str:
        """The start time as ``2026-11-21 12:00`` (UTC), or what run.json holds."""
        moment = parse_time(self.started_at)
        return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M") if moment else self.started_at

    @property
    def duration_s(self) -> float | None:
        start, end = parse_time(self.started_at), parse_time(self.ended_at)
        return (end - start).total_seconds() if start and end else None

    def gates_text(self) -> str:
        """``3 passed, 1 failed`` (each outcome that occurs), or ``none``."""
        order = ("passed", "failed", "error", "inconclusive", "not-judged")
        found = [f"{self.gates[o]} {o.replace('-', ' ')}" for o in order if self.gates.get(o)]
        found += [f"{n} {o}" for o, n in self.gates.items() if o not in order]
        return ", ".join(found) or "none"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(date=self.date, duration_s=self.duration_s, gates_passed=self.gates_passed,
                    gates_failed=self.gates_failed)
        return data


def _signature(path: Path) -> tuple[Any, ...]:
    """What changes when the run's files change: run.json's and episodes.jsonl's
    (inode, size, mtime), and whether report.html is there."""
    parts: list[Any] = []
    for name in (RUN_FILE, EPISODES_FILE):
        try:
            stat = os.stat(path / name)
            parts.append((stat.st_ino, stat.st_size, stat.st_mtime_ns))
        except OSError:
            parts.append(None)
    parts.append((path / REPORT_FILE).is_file())
    return tuple(parts)


def _read_row(key: str, path: Path, tallies: dict[str, EpisodeTally]) -> RunRow:
    """The row of one run directory, from its files alone (status not yet checked for
    a live process: see :func:`_settle`). Never raises."""
    row = RunRow(key=key, path=str(path), report=(path / REPORT_FILE).is_file())
    shard = SHARD_DIR.fullmatch(path.name) if "/" in key else None
    if shard:
        row.shard = f"{shard.group(1)}/{shard.group(2)}"
    try:
        data = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
        info = RunInfo.from_dict(data)
    except FileNotFoundError:
        row.problem = (f"no {RUN_FILE}: the run stopped before writing it, or it was lost; its episodes are in "
                       f"{EPISODES_FILE}, but its settings are unknown")
        row.figures_from, row.envs, row.episodes, row.errors = _counted(path, tallies, key)
        row.status = BROKEN
        return row
    except Exception as exc:  # noqa: BLE001 - any unreadable run.json is a row that says so
        row.problem = f"{RUN_FILE} cannot be read ({type(exc).__name__}: {exc}); fix or remove {path}"
        return row
    try:
        _fill(row, info, tallies)
    except Exception as exc:  # noqa: BLE001 - a hand-edited field of the wrong type
        row.status = BROKEN
        row.problem = f"{RUN_FILE} holds a field of an unexpected type ({type(exc).__name__}: {exc})"
    return row


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _fill(row: RunRow, info: RunInfo, tallies: dict[str, EpisodeTally]) -> None:
    row.run_id, row.model, row.node = _text(info.run_id), _text(info.model), _text(info.node)
    row.checkpoint, row.status = _text(info.checkpoint), _text(info.status) or "running"
    row.started_at, row.ended_at = _text(info.started_at), _text(info.ended_at)
    if row.ended_at == "" and row.status not in ("running", "crashed"):
        row.status = "running"  # an end state without an end time: not written by a run's end
    if isinstance(info.shard, dict) and not row.shard:
        row.shard = f"{info.shard.get('index', '?')}/{info.shard.get('count', '?')}"
    row.merged_from = len(info.merged_from)
    for gate in info.gates:
        if not isinstance(gate, dict):
            continue
        outcome = str(gate.get("outcome") or ("passed" if gate.get("passed") else "failed"))
        row.gates[outcome] = row.gates.get(outcome, 0) + 1
        if outcome != "passed":
            row.failed_gates.append(f"{gate.get('env', '?')}: {gate.get('gate', '?')} ({outcome})")
    counts = info.counts if isinstance(info.counts, dict) else {}
    if row.status == "running" or not info.summaries:
        row.figures_from, row.envs, row.episodes, row.errors = _counted(Path(row.path), tallies, row.key)
        if row.status != "running" and row.figures_from:
            row.problem = (f"{RUN_FILE} has no figures (written by an older version, or the run ended "
                           f"before writing them): counted from {EPISODES_FILE}")
    else:
        row.figures_from = RUN_FILE
        tallies.pop(row.key, None)  # a run followed while it ran: its end wrote the figures
        for env in [*info.environments, *info.summaries]:
            summary = info.summaries.get(env)
            if summary is None or env in row.envs:
                continue
            row.envs[env] = EnvFigures(_number(summary.get("success_rate")), _number(summary.get("mean_reward")),
                                       int(summary.get("episodes") or 0), int(summary.get("errors") or 0))
        row.episodes = int(counts.get("episodes", sum(f.episodes for f in row.envs.values())))
        row.errors = int(counts.get("errors", sum(f.errors for f in row.envs.values())))
    planned = counts.get("planned")
    row.planned = int(planned) if isinstance(planned, (int, float)) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None  # a hand-edited run.json: NaN is no figure
    return float(value)


class EpisodeTally:
    """The figures of an episodes.jsonl that is still growing (a running run), read on from
    where the last read ended (:func:`~pytest_agentgym.results.jsonl.read_numbered_from`, the
    readers' one line loop; a line still being written is left for the next read), so
    following a run of 10,000 episodes costs the new lines only. Each line is read and checked
    as :func:`~pytest_agentgym.results.reading.read_episodes_file` reads it (strict JSON,
    :func:`~pytest_agentgym.results.record_checks.check_record_data`) and kept without its turns;
    of each (env, task, repeat) the first record of the newest generation counts, as
    :func:`~pytest_agentgym.results.current.current_records` says. A file replaced or cut
    shorter is read again from its start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._start = (0, 0)
        self._records: list[Any] = []  # every record read, without its turns
        #: lines left out so far (no record)
        self.skipped = 0

    def update(self) -> "EpisodeTally":
        from pytest_agentgym.results.jsonl import parse_fast, read_numbered_from
        # the readers' refusal of NaN and Infinity, and their record without turns, as they are
        from pytest_agentgym.results.reading import record_without_turns, strict

        try:
            stat = os.stat(self.path)
        except OSError:
            stat = None
        if stat is None or stat.st_ino != self._inode or stat.st_size < self._start[0]:
            self._inode, self._start, self._records, self.skipped = (stat.st_ino if stat else None), (0, 0), [], 0
        if stat is None:
            return self
        values, skipped, self._start = read_numbered_from(self.path, record_without_turns, parse=strict(parse_fast),
                                                          start=self._start, whole_lines=True)
        self.skipped += len(skipped)
        self._records.extend(record for _, _, record in values)
        return self

    def figures(self) -> tuple[str, dict[str, EnvFigures], int, int]:
        """``(source, envs, episodes, errors)`` of what was read so far."""
        from pytest_agentgym.results.aggregate import summarize
        from pytest_agentgym.results.current import current_records

        if self._inode is None:
            return "", {}, 0, 0
        current = current_records(self._records)  # the one rule of what a run counts
        summaries = summarize(current)
        envs = {env: EnvFigures(s.success_rate, s.mean_reward, s.episodes, s.errors) for env, s in summaries.items()}
        return EPISODES_FILE, envs, len(current), sum(s.errors for s in summaries.values())


def _counted(path: Path, tallies: dict[str, EpisodeTally], key: str) -> tuple[str, dict[str, EnvFigures], int, int]:
    """Figures from episodes.jsonl through the run's :class:`EpisodeTally` (made on first use)."""
    tally = tallies.get(key)
    if tally is None:
        tally = tallies[key] = EpisodeTally(path / EPISODES_FILE)
    return tally.update().figures()


def _settle(row: RunRow) -> RunRow:
    """A ``running`` row whose writer is gone becomes ``crashed`` (see the module docstring);
    run.json is left as it is."""
    if row.status != "running":
        return row
    from pytest_agentgym.results.ledger import process_alive

    try:
        data = json.loads((Path(row.path) / RUN_FILE).read_text(encoding="utf-8"))
        process = data.get("process") if isinstance(data, dict) else None
    except (OSError, ValueError):
        return row
    process = process if isinstance(process, dict) else {}
    alive = process_alive(process)
    if alive is False:
        row.status = "crashed"
        row.problem = (f"run.json says running, but its process {process.get('pid', '?')} is gone; "
                       f"resume it with --agentgym-resume={row.path}")
    elif alive is None:
        row.problem = (f"written on host {process.get('host', '?')}: whether it still runs cannot be told "
                       f"from here" if process else "run.json names no process: whether it still runs is unknown")
    return row


class RowCache:
    """Rows kept between reads of one reports directory (``pytest-agentgym view`` reads it
    every few seconds): a row is read again only when its run's files changed
    (:func:`_signature`); a running row's process is asked again every time."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[tuple[Any, ...], RunRow]] = {}
        self._tallies: dict[str, EpisodeTally] = {}

    def row(self, key: str, path: Path) -> RunRow:
        signature = _signature(path)
        kept = self._rows.get(key)
        if kept is None or kept[0] != signature:
            kept = (signature, _read_row(key, path, self._tallies))
            self._rows[key] = kept
        base = kept[1]
        return _settle(RunRow(**{**base.__dict__, "envs": dict(base.envs), "gates": dict(base.gates)}))

    def signature(self, key: str, path: Path) -> str:
        """A short text that changes whenever the run's files do (a running page polls it)."""
        run_json, episodes, report = _signature(path)
        return "-".join(["x" if part is None else f"{part[1]}.{part[2]}" for part in (run_json, episodes)]
                        + ["r" if report else "n"])

    def forget(self, keep: Iterable[str]) -> None:
        keep = set(keep)
        for key in [k for k in self._rows if k not in keep]:
            del self._rows[key]
            self._tallies.pop(key, None)
