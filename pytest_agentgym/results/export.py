"""A run's episodes as training data: ``pytest-agentgym export RUN --format ...``.

Formats (one row per episode, or per policy turn):

* ``chat-jsonl``: one JSON line per episode, ``{"messages": [...], ...}``: the
  conversation the model saw at its last turn and its last reply (what SFT on
  chat messages takes), with the episode's facts (env, task, repeat, reward,
  success, the per-turn rewards, model, checkpoint) and, when the endpoint sent
  token ids, its token view (``tokens``, see results/tokens.py).
* ``turns-jsonl``: one line per policy turn (the branching form): ``messages`` is
  the conversation sent for that turn plus its reply, ``turn`` its index,
  ``turn_reward`` the environment's reward for its step; with token ids, the
  turn's ``prompt_ids``, ``completion_ids`` and ``logprobs``.
* ``hf-dataset``: the ``chat-jsonl`` rows as a Hugging Face dataset directory that
  ``datasets.load_dataset(DIR, split="train")`` and ``datasets.load_from_disk(DIR)``
  both load (results/hf_dataset.py).

Every training row says what the model sampled, so that a trainer learns from that
only, never from the environment's instructions, its messages or a scripted
acknowledgement: a ``weight`` per message, a ``prompt``/``completion`` split and,
with token ids, ``input_ids`` with ``assistant_masks`` (results/training.py).
* ``csv``: one row per episode of the run's facts (:data:`CSV_COLUMNS`: outcome,
  reward, rounds, time, error, model, tokens, ...), no conversation, for a
  spreadsheet or a data frame (:func:`csv_row`).

The conversation is rebuilt from the record and the run's prompts.jsonl
(results/conversation.py), exactly as it was sent. Episodes that ended in an
infrastructure error are left out (their conversation is cut short by a
failure, not by the policy); ``only="rewarded"`` keeps those with a reward above
0, ``only="success"`` the successful ones. An
episode whose opening is not on disk (a run written before openings were kept)
is left out and counted.

A spreadsheet is there to count what happened, errors included, so ``csv`` keeps
every episode by default (``only="all"``: an errored episode is a row whose
outcome is ``error``); ``only="scored"`` leaves the errors out, ``"success"`` keeps
the successful episodes. Its rows are in task order (environment as run.json lists
them, task index, repeat), one per episode (the newest generation of a resumed run).
"""

from __future__ import annotations

import csv
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Literal, Sequence

from pytest_agentgym.results.conversation import Sidecars, opening_of, read_sidecars
from pytest_agentgym.results.current import current_records
from pytest_agentgym.results.hf_dataset import write_dataset_files
from pytest_agentgym.results.jsonl import ResultsWriteError, describe_write_error, encode_line
from pytest_agentgym.results.records import EpisodeRecord, outcome_of, task_order
from pytest_agentgym.results.redact import redact_text
from pytest_agentgym.results.store import RunDir
from pytest_agentgym.results.training import chat_rows, turn_rows

Format = Literal["chat-jsonl", "turns-jsonl", "hf-dataset", "csv"]
FORMATS: tuple[str, ...] = ("chat-jsonl", "turns-jsonl", "hf-dataset", "csv")
ONLY: tuple[str, ...] = ("all", "scored", "rewarded", "success")
#: ``output`` that means standard output (csv, chat-jsonl, turns-jsonl)
STDOUT = "-"
#: The columns of ``--format csv``, in order (docs/results.md says what each holds).
CSV_COLUMNS: tuple[str, ...] = (
    "run_id", "episode_id", "env", "task_index", "repeat", "generation", "outcome", "success", "reward",
    "score", "min_reward", "rounds", "max_rounds", "stop_reason", "duration_s", "attempts", "error_type",
    "error_where", "error_message", "model", "checkpoint", "node", "worker", "started_at", "prompt_tokens",
    "completion_tokens", "nodeid")
#: What a spreadsheet reads as a formula when a cell starts with it (CSV injection): such a
#: text cell is written with a leading apostrophe, which spreadsheets show as text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class ExportError(ValueError):
    """Options that do not make an export (a format or ``only`` unknown, or not one that goes
    with the format); the message names the option and what to give instead."""


@dataclass
class Exported:
    """What an export wrote and what it left out, and why."""

    path: Path
    rows: int = 0
    episodes: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    skipped_lines: list[str] = field(default_factory=list)
    #: episodes kept whose reward is not above 0 (said when ``--only scored`` kept them)
    unrewarded: int = 0
    #: episodes kept whose endpoint sent token ids (their rows have ``input_ids``)
    tokenized: int = 0
    only: str = "scored"
    notes: list[str] = field(default_factory=list)

    def leave_out(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1

    def summary(self) -> str:
        unit = "episode" if self.rows == self.episodes else "row"
        where = "standard output" if str(self.path) == STDOUT else self.path
        text = f"{self.rows} {unit}{'s' if self.rows != 1 else ''} written to {where}"
        if self.rows != self.episodes:
            text += f" (from {self.episodes} episode{'s' if self.episodes != 1 else ''})"
        if self.left_out:
            text += "; left out: " + ", ".join(f"{count} {why}" for why, count in sorted(self.left_out.items()))
        if self.unrewarded and self.only in ("all", "scored"):
            text += (f"; {self.unrewarded} of the episodes kept have no reward above 0 "
                     f"(--only rewarded or --only success leaves them out)")
        if 0 < self.tokenized < self.episodes:
            text += (f"; {self.episodes - self.tokenized} of the episodes kept have no token ids, so their rows "
                     f"have no input_ids (a trainer that reads input_ids wants the rows whose tokens is not null)")
        return "; ".join([text, *self.notes])


def left_out_by(record: EpisodeRecord, only: str) -> str | None:
    """Why ``--only ONLY`` leaves ``record`` out, or None when it keeps it."""
    if record.error is not None and only != "all":
        return "with an infrastructure error"
    if only == "rewarded" and not (record.reward is not None and record.reward > 0):
        return "without a reward above 0"
    if only == "success" and not record.success:
        return "not successful"
    return None


def default_only(format: str) -> str:
    """What ``--only`` is when not given: ``all`` for csv (errors are rows), else ``scored``."""
    return "all" if format == "csv" else "scored"


def _check_options(format: str, only: str, to_stdout: bool) -> None:
    if format not in FORMATS:
        raise ExportError(f"--format {format!r} is not one of {', '.join(FORMATS)}")
    if only not in ONLY:
        raise ExportError(f"--only {only!r} is not one of {', '.join(ONLY)}")
    if only == "all" and format != "csv":
        raise ExportError(f"--only all is for --format csv; --format {format} leaves out the episodes that "
                         f"ended in an infrastructure error (their conversation was cut short by the failure, "
                         f"not by the policy): give --only scored, rewarded or success")
    if to_stdout and format == "hf-dataset":
        raise ExportError("--output - (standard output) cannot take --format hf-dataset, which is a directory: "
                         "give a directory to write, or leave --output out (RUN_DIR/export/hf-dataset)")


def export_run(run_dir: str | Path, *, format: Format = "chat-jsonl", only: str | None = None,
               output: str | Path | None = None, stdout: IO[str] | None = None) -> Exported:
    """Write ``run_dir``'s episodes as ``format`` (see the module's docstring) to ``output``
    (default: ``RUN_DIR/export/<format>.jsonl``, ``RUN_DIR/export/episodes.csv``, or
    ``RUN_DIR/export/hf-dataset/``; ``"-"``: ``stdout``, default ``sys.stdout``).
    ``only``: ``all`` (csv only), ``scored``, ``rewarded`` or ``success`` (:func:`left_out_by`); None is
    :func:`default_only`.

    :class:`ExportError` for an unknown format or ``only``, or one that does not go with the format;
    :class:`ResultsWriteError` when the output cannot be written (a partly written file is
    removed)."""
    only = default_only(format) if only is None else only
    to_stdout = output is not None and str(output) == STDOUT
    _check_options(format, only, to_stdout)
    run = RunDir(run_dir)
    found = run.read()
    if format == "csv":
        default = run.path / "export" / "episodes.csv"
    else:
        default = run.path / "export" / (format if format == "hf-dataset" else f"{format}.jsonl")
    target = Path(output) if output is not None and not to_stdout else default
    lines_file = target / "data" / "train.jsonl" if format == "hf-dataset" else target
    if format == "csv":
        result = Exported(path=Path(STDOUT) if to_stdout else target, only=only)
        records = _task_order(current_records(found.records), run)

        def write(handle: IO[str]) -> None:
            _write_csv(handle, records, only, result)
    else:
        sidecars = read_sidecars(run.path)
        result = Exported(path=Path(STDOUT) if to_stdout else target, only=only,
                          skipped_lines=list(sidecars.skipped))  # episodes.jsonl's: warned by read()

        def write(handle: IO[str]) -> None:
            _write_lines(handle, current_records(found.records), sidecars, format, only, result)
    if to_stdout:
        write(stdout if stdout is not None else sys.stdout)
        return result
    _write_file(lines_file, write, newline="" if format == "csv" else "\n")
    if format == "hf-dataset":
        note = write_dataset_files(target, run.path, result.rows)
        if note is not None:
            result.notes.append(note)
    return result


def _write_file(path: Path, write: Callable[[IO[str]], None], newline: str) -> None:
    """``write`` into ``path`` through ``path.partial`` (renamed when whole, removed when not).
    Half a surrogate pair in a string is written as its escape, as jsonl.json_utf8 does."""
    partial = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("w", encoding="utf-8", errors="backslashreplace", newline=newline) as handle:
            write(handle)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ResultsWriteError(describe_write_error(path, exc, "free space or give --output elsewhere",
                                                     "nothing was exported"), exc.errno, str(path)) from exc


def _write_lines(handle: IO[str], records: Sequence[EpisodeRecord], sidecars: Sidecars, format: str, only: str,
                 result: Exported) -> None:
    """The JSON Lines formats: each kept episode's rows (see the module's docstring)."""
    rows = turn_rows if format == "turns-jsonl" else chat_rows
    for record in records:
        if record.error is not None or not record.turns:
            result.leave_out("with an infrastructure error or no turn")
            continue
        why = left_out_by(record, only)
        if why is not None:
            result.leave_out(why)
            continue
        if opening_of(record, sidecars.openings) is None:
            result.leave_out("without their opening messages on disk (written before they were kept)")
            continue
        result.episodes += 1
        result.unrewarded += not (record.reward is not None and record.reward > 0)
        result.tokenized += sidecars.tokens_of(record) is not None
        for row in rows(record, sidecars):
            handle.write(encode_line(row).decode("utf-8"))
            result.rows += 1


# --------------------------------------------------------------------------- csv


def _task_order(records: Sequence[EpisodeRecord], run: RunDir) -> list[EpisodeRecord]:
    """``records`` in task order (results/records.py ``task_order``), environments as run.json lists them."""
    try:
        listed = list(run.read_info().environments)
    except (OSError, ValueError):  # no run.json to read: the environments by name
        listed = []
    return sorted(records, key=task_order(listed))


def _write_csv(handle: IO[str], records: Sequence[EpisodeRecord], only: str, result: Exported) -> None:
    writer = csv.writer(handle)
    writer.writerow(CSV_COLUMNS)
    for record in records:
        why = left_out_by(record, only)
        if why is not None:
            result.leave_out(why)
            continue
        writer.writerow(csv_row(record))
        result.episodes += 1
        result.rows += 1


def csv_row(record: EpisodeRecord) -> list[str]:
    """One episode as the cells of :data:`CSV_COLUMNS`: numbers as Python writes them, booleans
    ``true``/``false``, an empty cell for none (no reward: an error; no tokens: the endpoint
    reported no usage), the error's first line only. Text is redacted (a run written before its
    files were) and kept from being read as a formula (a cell starting with ``=``, ``+``, ``-``
    or ``@`` gets a leading ``'``)."""
    error = record.error
    recorded = (record.prompt_tokens or record.completion_tokens
                or any(t.prompt_tokens is not None or t.completion_tokens is not None for t in record.turns))
    tokens = (record.prompt_tokens, record.completion_tokens) if recorded else (None, None)
    outcome = "error" if error is not None else record.outcome or outcome_of(
        None, record.reward, record.min_reward, record.success)
    message = error.message.strip().splitlines()[0] if error is not None and error.message.strip() else ""
    cells = {
        "run_id": _text(record.run_id), "episode_id": _text(record.episode_id), "env": _text(record.env),
        "task_index": record.task_index, "repeat": record.repeat, "generation": record.generation,
        "outcome": outcome, "success": "true" if record.success else "false", "reward": record.reward,
        "score": record.score, "min_reward": record.min_reward, "rounds": record.rounds,
        "max_rounds": record.max_rounds, "stop_reason": _text(record.stop_reason),
        "duration_s": record.duration_s, "attempts": record.attempts,
        "error_type": _text(error.type) if error else "", "error_where": _text(error.where) if error else "",
        "error_message": _text(message), "model": _text(record.model), "checkpoint": _text(record.checkpoint),
        "node": _text(record.node), "worker": _text(record.worker), "started_at": _text(record.started_at),
        "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "nodeid": _text(record.nodeid),
    }
    return ["" if cells[name] is None else str(cells[name]) for name in CSV_COLUMNS]


def _text(value: str | None) -> str | None:
    """A text cell: redacted, and never taken for a formula by a spreadsheet."""
    if value is None:
        return None
    value = redact_text(value)
    return "'" + value if value.startswith(_FORMULA_START) else value
