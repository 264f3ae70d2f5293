"""The command that resumes a run (``--agentgym-resume``), from its run.json alone.

It is the command that started the run (``settings.selection.command``, recorded when the
run first opened, see run/resuming.py), else run.json's ``command`` (the last generation's:
a run of an older version recorded no selection), without an old ``--agentgym-resume``,
plus ``--agentgym-resume=<run dir>``. A refused resume says it (run/resuming.py), and so
does a comparison whose errored episodes a resume would play again (compare/error_rule.py).
"""

from __future__ import annotations

import shlex
from typing import Any

#: run.json's ``settings`` entry that holds the run's selection
SELECTION = "selection"


def recorded_selection(info: Any) -> dict[str, Any] | None:
    """The selection a run.json recorded at its start, or None (a run of an older version)."""
    entry = (info.settings or {}).get(SELECTION) if info is not None else None
    return entry if isinstance(entry, dict) and isinstance(entry.get("episodes"), dict) else None


def resume_command(info: Any, run_dir: Any) -> str:
    """The command that resumes the whole run of ``info`` (a RunInfo) in ``run_dir`` (see the module)."""
    entry = recorded_selection(info) or {}
    command = entry.get("command") or getattr(info, "command", "") or "pytest"
    try:
        words = [w for w in shlex.split(command) if not w.startswith("--agentgym-resume")]
    except ValueError:  # an unbalanced quote in a hand-written run.json: keep it as written
        words = [command]
    return shlex.join([*words, f"--agentgym-resume={run_dir}"])
