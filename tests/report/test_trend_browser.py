"""The trend page in a real browser: every x label of its charts is drawn whole inside
its chart (none cut at the edge), for checkpoint steps and for long run ids alike.
Headless Chromium opens the page from disk; skips without Chromium as the report's
browser tests do."""

from __future__ import annotations

import pytest

from pytest_agentgym.report.trend import build_trend
from pytest_agentgym.report.trend_page import write_trend_html

from helpers.compare_fixtures import paired_run
from helpers.report_fixtures import NO_BROWSER, REQUIRE_BROWSER, HeadlessChromium, find_chromium

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)

ALL = "P" * 30

#: Per chart, each x label's box and the chart's, and the label's text.
LABEL_BOXES = """[...document.querySelectorAll('svg.trend-chart')].flatMap(svg => {
    const c = svg.getBoundingClientRect();
    return [...svg.querySelectorAll('text[transform]:not(.axis-label)')].map(t => {
        const b = t.getBoundingClientRect();
        return {text: t.textContent, left: b.left - c.left, right: c.right - b.right,
                top: b.top - c.top, bottom: c.bottom - b.bottom, width: b.width};
    });
})"""


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    if CHROMIUM is None:
        pytest.fail(f"AGENTGYM_REQUIRE_BROWSER=1 and no browser: {NO_BROWSER}")


@pytest.mark.parametrize("ids, checkpoints", [
    (["20261121-120000-eval-qwen3-0.6b-a1b2", "20261121-130000-eval-qwen3-0.6b-c3d4",
      "20261121-140000-eval-qwen3-0.6b-e5f6"], ["Qwen/Qwen3-0.6B"] * 3),  # ordered by start time: run ids
    (["r1", "r2", "r3"], ["ckpt/step-100000", "ckpt/step-1200000", "ckpt/step-12000000"]),  # by step
    ([f"nightly-run-of-the-lightweight-battery-{n:02d}" for n in range(24)], ["final"] * 24),  # many, long
], ids=["run-ids", "steps", "many-long"])
def test_no_x_label_is_cut_at_the_charts_edge(tmp_path, ids, checkpoints):
    paths = [paired_run(tmp_path, run_id, {"BabyAI": ALL}, checkpoint=checkpoint,
                        started_at=f"2026-11-{1 + n // 24:02d}T{n % 24:02d}:00:00+00:00").path
             for n, (run_id, checkpoint) in enumerate(zip(ids, checkpoints))]
    page = write_trend_html(build_trend(paths), tmp_path / "trend.html")
    with HeadlessChromium(CHROMIUM, tmp_path / "profile") as browser:
        session = browser.open(page.as_uri())
        boxes = browser.evaluate(session, LABEL_BOXES)
        assert browser.exceptions == []
    assert len(boxes) == 2 * len(ids)  # success and reward charts, a label per run
    for box in boxes:
        assert box["width"] > 0 and box["text"]
        cut = {side: round(box[side], 1) for side in ("left", "right", "top", "bottom") if box[side] < 0}
        assert not cut, f"x label {box['text']!r} runs past the chart's edge by {cut} px"
