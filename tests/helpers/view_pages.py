"""What the browser tests of ``pytest-agentgym view`` share: the server over a reports
directory for the length of a ``with`` block, and one headless Chromium whose pages
must throw nothing."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from helpers.report_fixtures import NO_BROWSER, HeadlessChromium, find_chromium
from helpers.runs_index import start_view, stop_view


@contextmanager
def serving(reports: Path) -> Iterator[str]:
    """``pytest-agentgym view REPORTS`` as a subprocess; yields its URL, then stops it with
    Ctrl-C and checks that it ended cleanly."""
    proc, url = start_view(reports)
    yield url
    code, out = stop_view(proc)
    assert code == 0, out


@contextmanager
def chromium(profile: Path, **window: int) -> Iterator[HeadlessChromium]:
    """One headless Chromium (``width``, ``height``: its window); no page may throw in it."""
    executable = find_chromium()
    if executable is None:
        pytest.fail(f"AGENTGYM_REQUIRE_BROWSER=1 and no browser: {NO_BROWSER}")
    with HeadlessChromium(executable, profile, **window) as browser:
        yield browser
        assert browser.exceptions == [], "a page of pytest-agentgym view threw in the browser"
