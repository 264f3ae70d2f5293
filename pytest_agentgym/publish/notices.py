"""Advisory notices that the terminal shows once per machine, then only with ``-v``.

Some start notes say the same thing on every run of a machine ("JetStream has no
stream for ...; those events are not stored"): useful the first time, noise
after that. A :class:`Notice` is *advisory* when it describes a standing
configuration; other notices (NATS unreachable, a stream that could not be
created) describe this run and are shown every time. Either way the run's
``run.json`` keeps every note: only the terminal gets quieter.

    if notices.once(notice.key, notice.text, verbose=config.get_verbosity() > 0):
        terminal.write_line(notice.text)

What was shown is recorded in ``notices.json`` under the state directory:
``$AGENTGYM_STATE_DIR``, else ``$XDG_STATE_HOME/pytest-agentgym``, else
``~/.local/state/pytest-agentgym``. A notice is shown again when its text
changes (another URL, other subjects). A state file that cannot be read or
written never breaks a run: the notice is then shown.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from pytest_agentgym.process import variables

#: environment variable naming the state directory (tests point it at a temporary one)
STATE_DIR_ENV = "AGENTGYM_STATE_DIR"
STATE_FILE = "notices.json"


@dataclass(frozen=True)
class Notice:
    """One start note. ``key`` names what it is about (e.g. ``nats.no-stream nats://host:4222``)."""

    key: str
    text: str
    advisory: bool = True


def state_dir() -> Path:
    """Where this user's pytest-agentgym state lives on this machine."""
    explicit = variables.value(STATE_DIR_ENV)
    if explicit is not None:
        return Path(explicit).expanduser()
    xdg = variables.value("XDG_STATE_HOME") or ""
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "pytest-agentgym"


def _read(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    shown = data.get("shown") if isinstance(data, dict) else None
    return {k: v for k, v in shown.items() if isinstance(v, dict)} if isinstance(shown, dict) else {}


def _write(path: Path, shown: dict[str, dict[str, str]]) -> None:
    """Replace the state file atomically (a concurrent run loses at most its own entry)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".notices-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"version": 1, "shown": shown}, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def once(key: str, text: str, verbose: bool = False, directory: Path | None = None) -> bool:
    """True when ``text`` should be shown: the first time on this machine (or the
    first time with this text), and always when ``verbose``. Records it as shown."""
    path = (directory or state_dir()) / STATE_FILE
    shown = _read(path)
    seen = shown.get(key, {}).get("text") == text
    if seen and not verbose:
        return False
    if not seen:
        shown[key] = {"text": text, "first_shown": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:
            _write(path, shown)
        except OSError:
            pass  # cannot remember it: show it every time rather than fail the run
    return True


def to_show(notices: Iterable[Notice], verbose: bool = False, directory: Path | None = None) -> list[Notice]:
    """The notices a terminal should show now: every non-advisory one, advisory ones :func:`once`."""
    return [n for n in notices if not n.advisory or once(n.key, n.text, verbose, directory)]
