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
* ``hf-dataset``: the ``chat-jsonl`` rows as a Hugging Face dataset directory
  (``data/train.jsonl`` and a ``README.md`` dataset card naming it), which
  ``datasets.load_dataset(DIR, split="train")`` loads and ``huggingface-cli
  upload --repo-type dataset`` pushes as it is.

The conversation is rebuilt from the record and the run's prompts.jsonl
(results/conversation.py), exactly as it was sent. Episodes that ended in an
infrastructure error are left out (their conversation is cut short by a
failure, not by the policy); ``only="success"`` keeps the successful ones. An
episode whose opening is not on disk (a run written before openings were kept)
is left out and counted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from pytest_agentgym.results.conversation import Sidecars, conversation, messages_sent, opening_of, read_sidecars
from pytest_agentgym.results.jsonl import ResultsWriteError, describe_write_error, encode_line
from pytest_agentgym.results.records import EpisodeRecord, current_records
from pytest_agentgym.results.store import RunDir

Format = Literal["chat-jsonl", "turns-jsonl", "hf-dataset"]
FORMATS: tuple[str, ...] = ("chat-jsonl", "turns-jsonl", "hf-dataset")
ONLY: tuple[str, ...] = ("scored", "success")


@dataclass
class Exported:
    """What an export wrote and what it left out, and why."""

    path: Path
    rows: int = 0
    episodes: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    skipped_lines: list[str] = field(default_factory=list)

    def leave_out(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1

    def summary(self) -> str:
        unit = "episode" if self.rows == self.episodes else "row"
        text = f"{self.rows} {unit}{'s' if self.rows != 1 else ''} written to {self.path}"
        if self.rows != self.episodes:
            text += f" (from {self.episodes} episode{'s' if self.episodes != 1 else ''})"
        if self.left_out:
            text += "; left out: " + ", ".join(f"{count} {why}" for why, count in sorted(self.left_out.items()))
        return text


def episode_facts(record: EpisodeRecord) -> dict[str, Any]:
    return {"episode_id": record.episode_id, "env": record.env, "task_index": record.task_index,
            "repeat": record.repeat, "reward": record.reward, "success": record.success,
            "turn_rewards": [turn.reward for turn in record.turns], "stop_reason": record.stop_reason,
            "model": record.model, "checkpoint": record.checkpoint, "batch": record.batch,
            "sample": record.sample}


def chat_rows(record: EpisodeRecord, sidecars: Sidecars) -> Iterator[dict[str, Any]]:
    opening = opening_of(record, sidecars.openings)
    assert opening is not None
    row = {"messages": conversation(record, opening, final_feedback=False), **episode_facts(record)}
    tokens = sidecars.tokens_of(record)
    row["tokens"] = None if tokens is None else tokens.to_dict()
    yield row


def turn_rows(record: EpisodeRecord, sidecars: Sidecars) -> Iterator[dict[str, Any]]:
    opening = opening_of(record, sidecars.openings)
    assert opening is not None
    tokens = sidecars.tokens_of(record)
    facts = episode_facts(record)
    for index, (sent, turn) in enumerate(zip(messages_sent(record, opening), record.turns)):
        row = {"messages": sent + [{"role": "assistant", "content": turn.reply}], "turn": index,
               "turn_reward": turn.reward, **facts}
        if tokens is not None:
            own = tokens.turn(index)
            row.update(prompt_ids=list(own.prompt_ids), completion_ids=list(own.completion_ids),
                       logprobs=None if own.logprobs is None else list(own.logprobs))
        yield row


def export_run(run_dir: str | Path, *, format: Format = "chat-jsonl", only: str = "scored",
               output: str | Path | None = None) -> Exported:
    """Write ``run_dir``'s episodes as ``format`` (see the module's docstring) to ``output``
    (default: ``RUN_DIR/export/<format>.jsonl``, or ``RUN_DIR/export/hf-dataset/``).

    ``ValueError`` for an unknown format or ``only``; :class:`ResultsWriteError` when the
    output cannot be written (a partly written output is removed)."""
    if format not in FORMATS:
        raise ValueError(f"--format {format!r} is not one of {', '.join(FORMATS)}")
    if only not in ONLY:
        raise ValueError(f"--only {only!r} is not one of {', '.join(ONLY)}")
    run = RunDir(run_dir)
    found = run.read()
    sidecars = read_sidecars(run.path)
    default = run.path / "export" / (format if format == "hf-dataset" else f"{format}.jsonl")
    target = Path(output) if output is not None else default
    lines_file = target / "data" / "train.jsonl" if format == "hf-dataset" else target
    result = Exported(path=target, skipped_lines=list(sidecars.skipped))  # episodes.jsonl's: warned by read()
    rows = turn_rows if format == "turns-jsonl" else chat_rows
    lines_file.parent.mkdir(parents=True, exist_ok=True)
    partial = lines_file.with_name(lines_file.name + ".partial")
    try:
        with partial.open("wb") as handle:
            for record in current_records(found.records):
                if record.error is not None or not record.turns:
                    result.leave_out("with an infrastructure error or no turn")
                    continue
                if only == "success" and not record.success:
                    result.leave_out("not successful")
                    continue
                if opening_of(record, sidecars.openings) is None:
                    result.leave_out("without their opening messages on disk (written before they were kept)")
                    continue
                result.episodes += 1
                for row in rows(record, sidecars):
                    handle.write(encode_line(row))
                    result.rows += 1
        os.replace(partial, lines_file)
        if format == "hf-dataset":
            (target / "README.md").write_text(_dataset_card(run.path, result), encoding="utf-8")
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ResultsWriteError(describe_write_error(lines_file, exc, "free space or give --output elsewhere",
                                                     "nothing was exported"), exc.errno, str(lines_file)) from exc
    return result


def _dataset_card(run_dir: Path, result: Exported) -> str:
    """A dataset card whose YAML header tells ``datasets`` where the rows are."""
    return (
        "---\n"
        "configs:\n"
        "- config_name: default\n"
        "  data_files:\n"
        "  - split: train\n"
        "    path: data/train.jsonl\n"
        "---\n\n"
        f"# Episodes of the pytest-agentgym run {run_dir.name}\n\n"
        f"{result.rows} episodes exported by `pytest-agentgym export --format hf-dataset`: per row the\n"
        "conversation the model saw and its last reply (`messages`), the environment, task, repeat,\n"
        "reward, success, per-turn rewards, model and checkpoint, and the token view (`tokens`) when\n"
        "the endpoint sent token ids.\n"
    )
