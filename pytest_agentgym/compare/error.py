"""The one error a comparison raises for bad input, and how an unexpected one is told."""

from __future__ import annotations

from pathlib import Path


class CompareError(ValueError):
    """Two runs that cannot be compared as asked (a path that is not a readable run
    directory with results, a bad metric, margin or alpha, settings that differ);
    the message says what was wrong and what to do."""


def describe_internal_error(exc: BaseException) -> str:
    """``ZeroDivisionError at statistics.py:170: float division by zero``: an exception
    no rule expected, in one line, where it was raised (the innermost frame)."""
    tb, where = exc.__traceback__, ""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}{where}: {text}"
