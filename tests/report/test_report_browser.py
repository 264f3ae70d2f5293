"""The HTML report in a real browser: headless Chromium opens it from disk (file://).

Skips when no Chromium is installed (Debian: ``apt-get install -y chromium``).
One browser serves the module; each test opens its pages in new tabs and the
browser records every JavaScript exception, which must stay empty.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.records import ErrorInfo

from helpers.report_fixtures import (NO_BROWSER, REQUIRE_BROWSER, HeadlessChromium, find_chromium, make_episode,
                                     make_info, make_turn, synthetic_run, text_of, write_run)

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    if CHROMIUM is None:
        pytest.fail(f"AGENTGYM_REQUIRE_BROWSER=1 and no browser: {NO_BROWSER}")

XSS_REPLY = 'Thought: <img src=x onerror="window.__xss = 1"></script><script>window.__xss = 2</script>\nAction:\nstop'


def url_of(path: Path, episode_id: str | None = None) -> str:
    fragment = "" if episode_id is None else "#episode=" + quote(episode_id, safe="")
    return path.as_uri() + fragment


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with HeadlessChromium(CHROMIUM, tmp_path_factory.mktemp("chromium-profile")) as chromium:
        yield chromium
        assert chromium.exceptions == [], "the report page threw in the browser"


@pytest.fixture(scope="module")
def known_run(tmp_path_factory):
    """Three BabyAI episodes with hand-written trajectories, one an error after a retry."""
    root = tmp_path_factory.mktemp("runs")
    turns = (
        make_turn(0, observation="You are in a room with a red ball 2 steps ahead.",
                  reply="Thought:\nThe ball is ahead.\n\nAction:\nmove forward", action="move forward",
                  feedback="The red ball is 1 step ahead."),
        make_turn(1, observation="The red ball is 1 step ahead.",
                  reply="Action:\nmove forward\nAction:\npickup", action=None,
                  feedback="Your reply had two Action lines; send exactly one."),
        make_turn(2, observation="Your reply had two Action lines; send exactly one.",
                  reply=XSS_REPLY, action="pickup red ball 1", feedback="You picked up the red ball.",
                  reward=0.82, done=True),
    )
    episodes = [
        make_episode("BabyAI", 7, turns=turns, reward=0.82),
        make_episode("BabyAI", 8, outcome="failed"),
        make_episode("BabyAI", 9, outcome="error",
                     error=ErrorInfo("EnvServerError", "POST /step answered 502 Bad Gateway", "env"),
                     retried=(ErrorInfo("ReadTimeout", "model endpoint silent for 60 s", "model"),)),
    ]
    return write_run(root, make_info(environments=("BabyAI",)), episodes)


@pytest.mark.parametrize("compress", [False, True], ids=["plain-json", "gzip"])
def test_summary_and_a_trajectory_render(browser, known_run, tmp_path, compress):
    report = render_run_dir(known_run.path, output=tmp_path / "report.html", compress=compress)
    episode = f"{known_run.read_info().run_id}:BabyAI:7:r0"
    session = browser.open(url_of(report, episode))
    assert browser.wait_for(session, "document.body.dataset.trajectory") == episode

    summary = text_of(browser, session, "#summary table")
    assert "BabyAI" in summary and "3 (2 scored)" in summary and "0.410" in summary  # (0.82 + 0) / 2
    panel = text_of(browser, session, "#trajectory")
    assert "PASSED: reward 0.820" in panel
    assert "The ball is ahead." in panel and "move forward" in panel
    assert "none: the reply was rejected on the client side" in panel  # turn 1 had no action
    assert "Observation: the feedback of turn 0 (above)." in panel
    assert "model 1.00 s" in panel and "env 0.05 s" in panel and "tokens 380 in / 45 out" in panel
    assert browser.evaluate(session, "document.querySelectorAll('#trajectory .turn').length") == 3

    # The reply with markup is text in the page, and nothing in it ran.
    replies = browser.evaluate(session, "[...document.querySelectorAll('.reply pre')].map(p => p.textContent)")
    assert replies[2] == XSS_REPLY
    assert browser.evaluate(session, "window.__xss === undefined && !document.querySelector('img')")

    shot = browser.screenshot(session, tmp_path / "trajectory.png")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_errors_and_retries_are_plain(browser, known_run, tmp_path):
    report = render_run_dir(known_run.path, output=tmp_path / "report.html")
    episode = f"{known_run.read_info().run_id}:BabyAI:9:r0"
    session = browser.open(url_of(report, episode))
    browser.wait_for(session, "document.body.dataset.trajectory")
    panel = text_of(browser, session, "#trajectory")
    assert "ERROR: reward —" in panel
    assert "Error: EnvServerError (from the env)" in panel and "POST /step answered 502 Bad Gateway" in panel
    assert "Attempt 1 of 2 failed and was retried: ReadTimeout (from the model)" in panel
    assert "model endpoint silent for 60 s" in panel


def test_table_filters_sorts_and_pages(browser, tmp_path):
    run = synthetic_run(tmp_path, 250, seed=3, turns=(2, 3))
    episodes = run.read_episodes()
    report = render_run_dir(run.path)
    session = browser.open(url_of(report))
    assert text_of(browser, session, "#page-info") == "page 1 of 3 (episodes 1–100)"
    assert browser.evaluate(session, "document.querySelectorAll('#episode-table tbody tr').length") == 100

    browser.evaluate(session, """(() => { const s = document.getElementById('f-outcome');
        s.value = 'error'; s.dispatchEvent(new Event('input')); })()""")
    errors = sum(1 for e in episodes if e.error is not None)
    assert text_of(browser, session, "#f-count") == f"{errors} of 250 episodes"
    outcomes = browser.evaluate(session, "[...document.querySelectorAll('#episode-table tbody tr')]"
                                         ".map(tr => tr.cells[3].textContent)")
    assert outcomes == ["error"] * errors

    browser.evaluate(session, """(() => { const s = document.getElementById('f-outcome');
        s.value = ''; s.dispatchEvent(new Event('input'));
        const th = document.querySelector('#episode-table th[data-key="n"]'); th.click(); th.click(); })()""")
    first_rounds = browser.evaluate(session, "document.querySelector('#episode-table tbody tr').cells[5].textContent")
    assert int(first_rounds) == max(e.rounds for e in episodes)

    browser.evaluate(session, "document.getElementById('page-next').click()")
    assert text_of(browser, session, "#page-info") == "page 2 of 3 (episodes 101–200)"


def test_grid_square_opens_the_worst_repeat(browser, tmp_path):
    episodes = [make_episode("Maze", 4, repeat=0, outcome="passed"),
                make_episode("Maze", 4, repeat=1, outcome="failed"),
                make_episode("Maze", 5, repeat=0, outcome="passed")]
    report = render_run_dir(write_run(tmp_path, make_info(environments=("Maze",)), episodes).path)
    session = browser.open(url_of(report))
    browser.evaluate(session, """document.querySelector('svg.outcome-grid rect[data-t="4"]')
        .dispatchEvent(new MouseEvent('click', {bubbles: true}))""")
    assert browser.wait_for(session, "document.body.dataset.trajectory") == "20261121-120000-abcd:Maze:4:r1"


@pytest.mark.parametrize("kind", ["no-episodes", "only-errors", "still-running"])
def test_edge_runs_render_without_errors(browser, tmp_path, kind):
    if kind == "no-episodes":
        run = write_run(tmp_path, make_info(), [])
        expected = "No episode has been recorded."
    elif kind == "only-errors":
        run = write_run(tmp_path, make_info(environments=("Maze",)),
                        [make_episode("Maze", n, outcome="error") for n in range(3)])
        expected = "3 of 3 episodes"
    else:
        run = write_run(tmp_path, make_info(ended_at=None, status="running"), [make_episode("Wordle", 0)])
        expected = "unfinished (no end time recorded yet)"
    before = len(browser.exceptions)
    session = browser.open(url_of(render_run_dir(run.path)))
    assert browser.evaluate(session, "document.body.dataset.ready") == "1"
    assert expected in browser.evaluate(session, "document.body.innerText")
    assert browser.exceptions[before:] == []


def test_basics_are_readable_with_scripts_off(known_run, tmp_path):
    report = render_run_dir(known_run.path, output=tmp_path / "report.html")
    with HeadlessChromium(CHROMIUM, tmp_path / "profile", scripts=False) as browser:
        session = browser.open(url_of(report))
        assert browser.evaluate(session, "document.body.dataset.ready") is None  # our script did not run
        visible = browser.evaluate(session, """[...document.querySelectorAll('#episode-list tbody tr')]
            .filter(tr => tr.getBoundingClientRect().height > 0).map(tr => tr.cells[3].textContent)""")
        assert visible == ["passed", "failed", "error"]
        body = browser.evaluate(session, "document.body.innerText")
        assert "Per environment" in body and "Gate verdicts" in body and "Rerun this run" in body
        assert browser.evaluate(session, "document.getElementById('episode-app').hidden") is True


def test_a_long_error_message_wraps_inside_the_panel(browser, tmp_path):
    # a server's message as a harness records it: one paragraph, with a long unbroken URL in it
    message = ("POST /step answered 500: " + "the environment server raised while loading the task, " * 40 +
               "see http://127.0.0.1:36001/logs/" + "x" * 300 + " for its traceback (the end of the message)")
    episodes = [make_episode("BabyAI", 0, outcome="error", error=ErrorInfo("EnvHTTPError", message, "env"))]
    report = render_run_dir(write_run(tmp_path, make_info(environments=("BabyAI",)), episodes).path)
    episode = "20261121-120000-abcd:BabyAI:0:r0"
    session = browser.open(url_of(report, episode))
    browser.wait_for(session, "document.body.dataset.trajectory")
    box = browser.evaluate(session, """(() => {
        const pre = document.querySelector('#trajectory .error-box pre'), panel = document.getElementById('trajectory');
        const p = pre.getBoundingClientRect(), q = panel.getBoundingClientRect();
        return {text: pre.textContent, scroll: pre.scrollWidth, client: pre.clientWidth, right: p.right,
                panelRight: q.right, panelScroll: panel.scrollWidth, panelClient: panel.clientWidth,
                lines: Math.round(p.height / parseFloat(getComputedStyle(pre).lineHeight))}; })()""")
    assert box["text"] == message  # all of it is on the page
    assert box["scroll"] <= box["client"], "the message runs past its box: it is cut off at the panel's edge"
    assert box["panelScroll"] <= box["panelClient"] and box["right"] <= box["panelRight"]
    assert box["lines"] > 5  # wrapped onto lines of its own, not one line scrolled sideways


def test_the_table_starts_in_task_order_and_still_sorts(browser, tmp_path):
    finished = [("Maze", 1, 0), ("BabyAI", 12, 0), ("BabyAI", 3, 1), ("BabyAI", 3, 0), ("Maze", 0, 0)]
    episodes = [make_episode(env, task, repeat=repeat) for env, task, repeat in finished]
    report = render_run_dir(write_run(tmp_path, make_info(environments=("BabyAI", "Maze")), episodes).path)
    session = browser.open(url_of(report))
    rows = """[...document.querySelectorAll('#episode-table tbody tr')].map(tr =>
        [tr.cells[0].textContent, Number(tr.cells[1].textContent), Number(tr.cells[2].textContent)])"""
    assert browser.evaluate(session, rows) == [["BabyAI", 3, 0], ["BabyAI", 3, 1], ["BabyAI", 12, 0],
                                               ["Maze", 0, 0], ["Maze", 1, 0]]
    browser.evaluate(session, "document.querySelector('#episode-table th[data-key=\"t\"]').click()")
    assert [row[1] for row in browser.evaluate(session, rows)] == [0, 1, 3, 3, 12]
