"""Strings from run directories made safe to print on a terminal.

A run directory's name and the strings of its run.json (model, checkpoint, node, notes)
are whatever was written there: a name or a string that holds escape sequences would
clear the screen, set the window title or plant a hyperlink (OSC 8) when printed raw.
:func:`shown` is the one function every terminal line of such strings goes through
(``pytest-agentgym runs``): each control character (C0, DEL, C1; ESC among them) is
written as its escape, ``\\x1b``, so it is seen and does nothing.
"""

from __future__ import annotations

import re

__all__ = ["shown", "shown_lines"]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_TAB = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def shown(text: object, *, tab: bool = False) -> str:
    """``text`` (made a string) with each control character written as ``\\xNN``: C0 (newline
    and tab too, which would break a table's line; ``tab=True`` keeps tabs), DEL and C1."""
    value = text if isinstance(text, str) else str(text)
    return (_CONTROL_BUT_TAB if tab else _CONTROL).sub(_escape, value)


def shown_lines(text: object) -> str:
    """``text`` line by line through :func:`shown` (tabs kept): for a block of output whose
    line breaks are its own (compare's and trend's lines, a warning that quotes a run)."""
    return "\n".join(shown(line, tab=True) for line in str(text).split("\n"))
