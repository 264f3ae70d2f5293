"""Reading a training mask back in tests: where the sampled runs are."""

from __future__ import annotations


def mask_spans(mask: list[int]) -> list[tuple[int, int]]:
    """The ``[start, end)`` runs of 1 in ``mask``."""
    found, start = [], None
    for index, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = index
        elif not bit and start is not None:
            found.append((start, index))
            start = None
    return found
