"""``export --format hf-dataset``: a directory that both of the ``datasets`` loaders read.

    DIR/README.md                 dataset card; its YAML header names data/train.jsonl
    DIR/data/train.jsonl          the chat-jsonl rows
    DIR/dataset_dict.json         ``DatasetDict.save_to_disk``'s layout: one split, train
    DIR/train/*.arrow, *.json

``datasets.load_dataset(DIR, split="train")`` reads the JSON Lines through the card (and
``huggingface-cli upload --repo-type dataset`` pushes the directory as it is);
``datasets.load_from_disk(DIR)["train"]`` maps the Arrow copy. The Arrow copy is written
by the ``datasets`` package in a child process (importing it changes the importing
process's HTTP client; the package is no dependency of this one), offline, its cache in a
scratch folder of DIR that is removed after; without the package the directory holds the
card and the JSON Lines only, and :func:`write_dataset_files` says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_agentgym.results.jsonl import ResultsWriteError, describe_write_error

__all__ = ["ARROW_NOTE", "dataset_card", "write_dataset_files"]

#: What the summary says when no Arrow copy could be written for want of ``datasets``.
ARROW_NOTE = ("no Arrow copy for datasets.load_from_disk: the datasets package is not installed "
              "(pip install datasets); datasets.load_dataset(DIR, split='train') reads it as it is")

#: The child's exit status when ``datasets`` cannot be imported.
_NO_DATASETS = 3

_SAVE = f"""\
import sys
try:
    import datasets
except ImportError:
    sys.exit({_NO_DATASETS})
datasets.disable_progress_bars()
target, scratch = sys.argv[1], sys.argv[2]
rows = datasets.Dataset.from_json(target + "/data/train.jsonl", cache_dir=scratch)
datasets.DatasetDict({{"train": rows}}).save_to_disk(target)
"""


def write_dataset_files(target: Path, run_dir: Path, rows: int) -> str | None:
    """The card and the Arrow copy beside ``target/data/train.jsonl`` (``rows`` rows; none: no
    Arrow copy); returns a note for the summary when the Arrow copy was left out for want of
    ``datasets``, else None.
    :class:`ResultsWriteError` when either cannot be written."""
    card = target / "README.md"
    try:
        card.write_text(dataset_card(run_dir, rows), encoding="utf-8")
    except OSError as exc:
        raise ResultsWriteError(describe_write_error(card, exc, "free space or give --output elsewhere",
                                                     "the dataset card was not written"),
                                exc.errno, str(card)) from exc
    for old in (target / "train", target / "dataset_dict.json"):  # an earlier export's Arrow copy
        shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)
    if rows == 0:  # nothing for datasets to read (the export says so and exits 1)
        return None
    return ARROW_NOTE if not _save_arrow(target) else None


def _save_arrow(target: Path) -> bool:
    """``DatasetDict({"train": rows}).save_to_disk(target)`` in a child; False when it has no
    ``datasets`` to import."""
    scratch = target / ".arrow-scratch"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(scratch), "HF_HOME": str(scratch / "home")}
    try:
        done = subprocess.run([sys.executable, "-c", _SAVE, str(target), str(scratch)], env=env,
                              capture_output=True, text=True, timeout=3600)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode == _NO_DATASETS:
        return False
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        raise ResultsWriteError(
            f"the Arrow copy of {target} for datasets.load_from_disk was not written ({why}); "
            f"data/train.jsonl and README.md are, and datasets.load_dataset(DIR, split='train') reads "
            f"them: mend the datasets package (python -c 'import datasets') or uninstall it, and export again",
            None, str(target))
    return True


def dataset_card(run_dir: Path, rows: int) -> str:
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
        f"{rows} episode{'s' if rows != 1 else ''} exported by `pytest-agentgym export --format hf-dataset`.\n"
        "Load with `datasets.load_dataset(DIR, split=\"train\")` or `datasets.load_from_disk(DIR)[\"train\"]`.\n\n"
        "Per row: the conversation the model saw at its last turn and its last reply (`messages`, each\n"
        "with `weight`: 1 on a reply the model sampled, 0 on the environment's instructions, its\n"
        "messages and a scripted acknowledgement in the opening), the same split before the model's\n"
        "first reply (`prompt`, `completion`: TRL's prompt-completion form), the environment, task,\n"
        "repeat, reward, success, per-turn rewards, model and checkpoint, and, when the endpoint sent\n"
        "token ids, the token view (`tokens`) and a pre-tokenized sample (`input_ids`,\n"
        "`assistant_masks`: 1 exactly on the sampled tokens).\n\n"
        "TRL's SFTTrainer trains on the sampled tokens only as it is when the rows have `input_ids`;\n"
        "without them, give it `SFTConfig(assistant_only_loss=True)` so that the environment's\n"
        "messages between the model's replies stay out of the loss.\n"
    )
