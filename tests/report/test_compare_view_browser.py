"""The compare view in a real browser: headless Chromium opens it from disk (file://),
a click on a flipped task opens both trajectories side by side with the first
divergent turn marked. Skips without Chromium unless AGENTGYM_REQUIRE_BROWSER=1,
like test_report_browser.py. Set AGENTGYM_SCREENSHOTS=DIR to keep the screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_agentgym.compare import compare_runs
from pytest_agentgym.report.compare_view import write_compare_html
from pytest_agentgym.report.render import render_run_dir

from helpers.compare_fixtures import paired_run
from helpers.report_fixtures import NO_BROWSER, REQUIRE_BROWSER, HeadlessChromium, find_chromium, make_turn, text_of

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)
XSS_REPLY = 'Thought: <img src=x onerror="window.__xss = 1"></script><script>window.__xss = 2</script>\nAction:\nturn right'

#: Is the element on screen: inside the viewport, and its panel's box?
VISIBLE = """(selector => {{ const el = document.querySelector(selector); if (!el) return false;
    const r = el.getBoundingClientRect();
    return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth; }})({!r})"""


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    if CHROMIUM is None:
        pytest.fail(f"AGENTGYM_REQUIRE_BROWSER=1 and no browser: {NO_BROWSER}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with HeadlessChromium(CHROMIUM, tmp_path_factory.mktemp("chromium-profile")) as chromium:
        yield chromium
        assert chromium.exceptions == [], "the compare view threw in the browser"


def corridor(env, task, mark, *, swerve=False):
    """Five turns down a corridor; with ``swerve`` the model takes another way at turn 3
    (with markup in its reply). The last turn's reward says pass or fail."""
    turns = [make_turn(n, observation=f"{env} task {task}, step {n}: a corridor.", reply=f"Action:\nmove {n}",
                       action=f"move {n}", feedback=f"step {n + 1}") for n in range(4)]
    if swerve:
        turns[3] = make_turn(3, observation=turns[3].observation, reply=XSS_REPLY, action="turn right",
                             feedback="a wall")
    turns.append(make_turn(4, observation=f"{env} task {task}, step 4: a corridor.", reply="Action:\nmove 4",
                           action="move 4", reward=1.0 if mark == "P" else 0.0, done=mark == "P"))
    return turns


def baseline_turns(env, task, repeat, mark):
    return corridor(env, task, mark)


def candidate_turns(env, task, repeat, mark):
    return corridor(env, task, mark, swerve=(env, task) == ("BabyAI", 6))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    base = paired_run(root, "base", {"BabyAI": "PPPPPPPPFF", "Maze": "PPP"}, turns=baseline_turns)
    cand = paired_run(root, "cand", {"BabyAI": "PPPPPPFPPF", "Maze": "PPP"}, turns=candidate_turns,
                      baseline=str(root / "base"))
    return base, cand


def keep(shot: Path) -> None:
    where = os.environ.get("AGENTGYM_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(where) / shot.name)


def open_flip(browser, session, pair: str) -> None:
    """Click the flip list's link of ``pair`` as a reader would, and wait until it is drawn."""
    browser.evaluate(session, f"""document.querySelector('table.flip-list a[href="#pair=' +
        encodeURIComponent({pair!r}) + '"]').click()""")
    assert browser.wait_for(session, "document.body.dataset.pair") == pair


def test_a_flipped_task_opens_both_trajectories_with_the_divergence_marked(browser, runs, tmp_path):
    base, cand = runs
    page = write_compare_html(compare_runs(base.path, cand.path), tmp_path / "compare.html")
    session = browser.open(page.as_uri())
    assert browser.evaluate(session, "document.body.dataset.compareReady") == "1"
    assert "BabyAI success: 0.80 -> 0.80" in text_of(browser, session, "#compare")

    open_flip(browser, session, "BabyAI:6:r0")
    sides = text_of(browser, session, "#pair-sides")
    assert "Baseline · base" in sides and "Candidate · cand" in sides
    assert "success: reward 1.000" in sides and "no success: reward 0.000" in sides
    assert text_of(browser, session, "#pair-divergence") == "First divergence: turn 3: the reply and the action differ"
    rows = browser.evaluate(session, "document.querySelectorAll('#pair-body .pair-row').length")
    assert rows == 5 and browser.evaluate(session, "document.querySelectorAll('#pair-body .turn').length") == 10
    # Baseline left, candidate right, in the marked row; both columns and the mark are on screen.
    marked = browser.evaluate(session, """(() => { const row = document.querySelector('.pair-row.diverges');
        const [left, right] = row.querySelectorAll('.turn');
        return [row.id, left.getBoundingClientRect().right <= right.getBoundingClientRect().left,
                left.querySelector('.reply pre').textContent, right.querySelector('.reply pre').textContent,
                [...row.querySelectorAll('.differs')].map(b => b.className)]; })()""")
    assert marked == ["pair-turn-3", True, "Action:\nmove 3", XSS_REPLY,
                      ["block reply differs", "block action differs", "block reply differs", "block action differs"]]
    for selector in (".divergence-mark", ".pair-row.diverges .turn:first-of-type .reply",
                     ".pair-row.diverges .turn:last-of-type .reply", "#pair-sides", "#pair-divergence"):
        assert browser.evaluate(session, VISIBLE.format(selector)), f"{selector} is not on screen"
    assert browser.evaluate(session, "window.__xss === undefined && !document.querySelector('img')")
    shot = browser.screenshot(session, tmp_path / "compare-side-by-side.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    keep(shot)

    # The grid's square of a flipped task opens it too; Escape closes the panel.
    browser.evaluate(session, "location.hash = ''")
    browser.evaluate(session, """document.querySelector('svg.flip-grid rect[data-t="8"]')
        .dispatchEvent(new MouseEvent('click', {bubbles: true}))""")
    assert browser.wait_for(session, "document.body.dataset.pair") == "BabyAI:8:r0"
    assert text_of(browser, session, "#pair-divergence") == "No turn differs in its observation, reply or action."
    browser.evaluate(session, "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    browser.wait_for(session, "document.getElementById('pair').hidden")
    keep(browser.screenshot(session, tmp_path / "compare-page.png", full_page=True))


def test_the_reports_compare_section_opens_pairs_and_episodes(browser, runs, tmp_path):
    _, cand = runs
    report = render_run_dir(cand.path, output=tmp_path / "report.html")
    session = browser.open(report.as_uri())
    assert browser.evaluate(session, "document.body.dataset.ready") == "1"
    assert "INCONCLUSIVE" in text_of(browser, session, "#compare")
    open_flip(browser, session, "BabyAI:6:r0")
    assert browser.evaluate(session, VISIBLE.format(".divergence-mark"))
    assert browser.evaluate(session, "document.getElementById('trajectory').hidden")
    keep(browser.screenshot(session, tmp_path / "report-side-by-side.png"))

    # The report's own trajectory panel still opens from its table, and the pair panel closes.
    browser.evaluate(session, "location.hash = '#episode=' + encodeURIComponent('cand:BabyAI:6:r0')")
    assert browser.wait_for(session, "document.body.dataset.trajectory") == "cand:BabyAI:6:r0"
    assert browser.evaluate(session, "document.getElementById('pair').hidden")
    assert browser.evaluate(session, "document.querySelectorAll('#trajectory .turn').length") == 5
