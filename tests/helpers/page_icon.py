"""The pages' icon as a test of a self-contained page sees it: the one ``<link>`` a page may
carry, ``rel="icon"`` with the icon as a data: URI (nothing is fetched for it)."""

from __future__ import annotations

from pytest_agentgym.report.page import FAVICON_HREF

Tag = tuple[str, dict[str, str | None]]


def without_the_icon(tags: list[Tag]) -> list[Tag]:
    """``tags`` less the page's icon link; fails unless the page links the icon exactly once."""
    icons = [(tag, attrs) for tag, attrs in tags if tag == "link" and attrs.get("rel") == "icon"]
    assert icons == [("link", {"rel": "icon", "href": FAVICON_HREF})], icons
    return [(tag, attrs) for tag, attrs in tags if (tag, attrs) not in icons]
