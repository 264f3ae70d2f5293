"""The one error a comparison raises for bad input."""

from __future__ import annotations


class CompareError(ValueError):
    """Two runs that cannot be compared as asked (a path that is not a readable run
    directory with results, a bad metric, margin or alpha, settings that differ);
    the message says what was wrong and what to do."""
