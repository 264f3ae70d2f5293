"""``pytest-agentgym view`` as users meet it: the server is a real subprocess on a free
loopback port and headless Chromium drives its pages. The index lists the runs with
their figures, filters and sorts them, refreshes a running row; a running run's page
follows its episodes.jsonl by itself; picking runs opens the compare view and the
trend page. Also what it refuses (URLs outside the runs, a host others can reach, a
comparison of runs that differ) and that Ctrl-C stops it. Skips without Chromium
unless AGENTGYM_REQUIRE_BROWSER=1, like test_report_browser.py. Set
AGENTGYM_SCREENSHOTS=DIR to keep the screenshots."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentgym.results.store import RunDir, point_latest

from helpers import REPO
from helpers.report_fixtures import (
    NO_BROWSER,
    REQUIRE_BROWSER,
    BrowserError,
    HeadlessChromium,
    find_chromium,
    make_episode,
)
from helpers.runs_index import finished_run, get, running_run, start_view, stop_view
from helpers.view_pages import chromium, serving
from helpers.waiting import wait_until

CHROMIUM = find_chromium()
browser_only = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)

#: The keys of the rows shown (not filtered out), top to bottom.
SHOWN = "[...document.querySelectorAll('#runs-table tbody tr.run')].filter(r => !r.hidden).map(r => r.dataset.key)"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("view") / "reports"
    finished_run(root, "step-1000", {"BabyAI": "PFFF", "Maze": "PPFF"}, checkpoint="ckpt/step-1000",
                 started_at="2026-11-20T10:00:00+00:00")
    finished_run(root, "step-1200", {"BabyAI": "PPPF", "Maze": "PPPE"}, checkpoint="ckpt/step-1200",
                 started_at="2026-11-21T10:00:00+00:00")
    finished_run(root, "step-1300", {"BabyAI": "PPPP", "Maze": "PPPP"}, checkpoint="ckpt/step-1300",
                 started_at="2026-11-21T18:00:00+00:00")
    other = finished_run(root, "other", {"BabyAI": "PPFF", "Maze": "FFFF"}, model="other-model", node="a100",
                         started_at="2026-11-19T10:00:00+00:00")
    info = other.read_info()  # played with other rules: its episodes mean something else
    info.fingerprint["envs"]["BabyAI"]["max_rounds"] = 30
    other.write_info(info)
    point_latest(root, "step-1300")
    running_run(root, "step-1400", {"BabyAI": "PP"}, checkpoint="ckpt/step-1400",
                started_at="2026-11-22T10:00:00+00:00")
    (root / "broken").mkdir()
    (root / "broken" / "run.json").write_text("{")
    return root


@pytest.fixture(scope="module")
def view(reports):
    with serving(reports) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as opened:
        yield opened


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("AGENTGYM_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def value(browser: HeadlessChromium, session: str, expression: str):
    """``expression`` in the page, or None while the page is being loaded again."""
    try:
        return browser.evaluate(session, expression)
    except BrowserError:
        return None


def until(browser: HeadlessChromium, session: str, expression: str, what: str, timeout: float = 30.0):
    wait_until(lambda: value(browser, session, expression), timeout,
               lambda: f"{what} ({expression} = {value(browser, session, expression)!r})")
    return value(browser, session, expression)


def click(browser: HeadlessChromium, session: str, selector: str) -> None:
    browser.evaluate(session, f"document.querySelector({json.dumps(selector)}).click()")


def choose(browser: HeadlessChromium, session: str, name: str, value_: str) -> None:
    browser.evaluate(session, f"(s => {{ s.value = {json.dumps(value_)}; s.dispatchEvent(new Event('change')); }})"
                              f"(document.getElementById('f-{name}'))")


def cell(key: str, env: str) -> str:
    return (f"document.querySelector('tr[data-key=\"{key}\"] td[data-env=\"{env}\"]').innerText.replace(/\\s+/g, ' ')"
            f".trim()")


# --------------------------------------------------------------------------- in the browser


@browser_only
def test_the_index_lists_the_runs_with_their_figures(view, browser, shots):
    session = browser.open(view)
    assert browser.evaluate(session, SHOWN) == ["step-1400", "step-1300", "step-1200", "step-1000", "other",
                                                "broken"]
    assert browser.evaluate(session, cell("step-1200", "BabyAI")) == "75.0% 0.750"
    assert browser.evaluate(session, cell("step-1200", "Maze")) == "100.0% 1.000"
    assert browser.evaluate(session, cell("step-1400", "Maze")) == "—"
    row = "document.querySelector('tr[data-key=\"{}\"]').innerText"
    assert "running" in browser.evaluate(session, row.format("step-1400"))
    assert "1 passed, 1 failed" in browser.evaluate(session, row.format("step-1000"))
    assert "latest" in browser.evaluate(session, row.format("step-1300"))
    assert "run.json cannot be read" in browser.evaluate(session, row.format("broken"))
    assert browser.evaluate(session, "document.querySelector('tr[data-key=\"step-1000\"] a.run-link')"
                                     ".getAttribute('href')") == "/runs/step-1000/"
    browser.screenshot(session, shots / "view-index.png")


@browser_only
def test_filters_and_sorting(view, browser):
    session = browser.open(view)
    choose(browser, session, "model", "other-model")
    assert browser.evaluate(session, SHOWN) == ["other"]
    assert browser.evaluate(session, "document.getElementById('shown-count').textContent") == "1 of 6 shown"
    choose(browser, session, "model", "")
    choose(browser, session, "node", "4090")
    assert "other" not in browser.evaluate(session, SHOWN)
    choose(browser, session, "node", "")
    choose(browser, session, "status", "running")
    assert browser.evaluate(session, SHOWN) == ["step-1400"]
    choose(browser, session, "status", "")
    browser.evaluate(session, "(i => { i.value = 'CKPT/STEP-13'; i.dispatchEvent(new Event('input')); })"
                              "(document.getElementById('f-text'))")
    assert browser.evaluate(session, SHOWN) == ["step-1300"]
    browser.evaluate(session, "(i => { i.value = ''; i.dispatchEvent(new Event('input')); })"
                              "(document.getElementById('f-text'))")

    header = "document.querySelectorAll('#runs-table thead th')[{}]"
    browser.evaluate(session, header.format(1) + ".click()")  # Run: a to z
    assert browser.evaluate(session, SHOWN) == ["broken", "other", "step-1000", "step-1200", "step-1300",
                                                "step-1400"]
    browser.evaluate(session, header.format(1) + ".click()")  # again: z to a
    assert browser.evaluate(session, SHOWN)[0] == "step-1400"
    browser.evaluate(session, header.format(9) + ".click()")  # BabyAI's success rate, highest first
    assert sorted(browser.evaluate(session, SHOWN)[:2]) == ["step-1300", "step-1400"]  # both 100%
    assert browser.evaluate(session, SHOWN)[-2:] == ["step-1000", "broken"]


@browser_only
def test_a_running_runs_page_follows_its_episodes(view, reports, browser, shots):
    session = browser.open(view + "runs/step-1400/")
    shown = "document.querySelector('header').innerText"
    assert "shows the 2 episode(s) recorded so far" in browser.evaluate(session, shown)
    browser.screenshot(session, shots / "view-running-before.png")
    episode = "step-1400:BabyAI:1:r0"
    browser.evaluate(session, f"location.hash = '#episode=' + encodeURIComponent('{episode}')")
    until(browser, session, f"document.body.dataset.trajectory === '{episode}'", "the episode opened")
    browser.evaluate(session, "window.scrollTo(0, 400)")
    before = browser.evaluate(session, "window.scrollY")
    assert before > 0
    run = RunDir(reports / "step-1400")
    run.append_episode(make_episode("BabyAI", 2, run_id="step-1400", outcome="failed"))
    run.append_episode(make_episode("Maze", 0, run_id="step-1400"))
    until(browser, session, f"{shown}.includes('shows the 4 episode(s) recorded so far')",
          "the page shows the appended episodes without being reloaded by the test")
    assert until(browser, session, "document.getElementById('agentgym-live') && window.scrollY",
                 "the scroll position kept") == before
    assert "Maze" in browser.evaluate(session, "document.querySelector('#summary').innerText")
    until(browser, session, f"document.body.dataset.trajectory === '{episode}'", "the open episode open again")
    browser.evaluate(session, "window.scrollTo(0, 0)")
    browser.screenshot(session, shots / "view-running-after.png")


@browser_only
def test_the_index_refreshes_a_running_row(view, reports, browser):
    session = browser.open(view)
    episodes = "document.querySelector('tr[data-key=\"step-1400\"] td.episodes').innerText.trim()"
    count = int(browser.evaluate(session, episodes))
    browser.evaluate(session, "document.querySelector('input.pick-run[value=\"step-1000\"]').click()")
    RunDir(reports / "step-1400").append_episode(make_episode("Maze", 1, run_id="step-1400"))
    until(browser, session, f"{episodes} === '{count + 1}'", "the running row's episodes counted again")
    # picks survive the refresh
    assert browser.evaluate(session, "document.querySelector('input.pick-run[value=\"step-1000\"]').checked")


@browser_only
def test_two_picked_runs_open_the_compare_view(view, browser, shots):
    session = browser.open(view)
    assert browser.evaluate(session, "document.getElementById('open-compare').classList.contains('disabled')")
    click(browser, session, 'input.pick-run[value="step-1200"]')
    click(browser, session, 'input.pick-run[value="step-1000"]')
    assert browser.evaluate(session, "document.getElementById('picked').textContent") == (
        "Picked 2: base step-1000, candidate step-1200.")
    click(browser, session, "#open-compare")
    until(browser, session, "document.title.startsWith('step-1200 against step-1000')", "the compare view")
    until(browser, session, "document.readyState === 'complete'", "the compare view loaded")
    assert "BabyAI" in browser.evaluate(session, "document.body.innerText")
    browser.screenshot(session, shots / "view-compare.png")


@browser_only
def test_three_picked_runs_open_the_trend_page(view, browser, shots):
    session = browser.open(view)
    for key in ("step-1300", "step-1000", "step-1200"):
        click(browser, session, f'input.pick-run[value="{key}"]')
    assert browser.evaluate(session, "document.getElementById('open-compare').classList.contains('disabled')")
    click(browser, session, "#open-trend")
    until(browser, session, "document.title.startsWith('Trend of 3 run(s)')", "the trend page")
    until(browser, session, "document.readyState === 'complete'", "the trend page loaded")
    assert browser.evaluate(session, "document.querySelectorAll('section.trend-env').length") == 2
    browser.screenshot(session, shots / "view-trend.png")


@browser_only
def test_the_static_index_gives_the_commands_for_the_picked_runs(reports, browser, shots):
    from pytest_agentgym.report.index import write_index

    session = browser.open(write_index(reports).as_uri())
    assert browser.evaluate(session, "document.body.dataset.live") == "no"
    assert browser.evaluate(session, "document.getElementById('open-compare')") is None
    click(browser, session, 'input.pick-run[value="step-1300"]')
    click(browser, session, 'input.pick-run[value="step-1000"]')
    command = "document.getElementById('pick-command').textContent"
    assert browser.evaluate(session, command).startswith(
        f"pytest-agentgym compare {reports / 'step-1000'} {reports / 'step-1300'}")
    click(browser, session, 'input.pick-run[value="step-1200"]')
    assert browser.evaluate(session, command) == (
        f"pytest-agentgym trend {reports / 'step-1000'} {reports / 'step-1200'} {reports / 'step-1300'} "
        f"--html trend.html")
    choose(browser, session, "status", "broken")
    assert browser.evaluate(session, SHOWN) == ["broken"]
    browser.screenshot(session, shots / "static-index.png")


# --------------------------------------------------------------------------- over HTTP


def test_only_run_directories_under_the_reports_directory_are_served(view, reports):
    (reports.parent / "secret").mkdir(exist_ok=True)
    (reports.parent / "secret" / "run.json").write_text("{}")
    for path in ("runs/../secret/", "runs/%2E%2E/secret/", "runs/%2E%2E%2Fsecret/", "runs/latest/",
                 f"runs/{reports.parent / 'secret'}/", "api/runs/..%2Fsecret/state", "etc/passwd"):
        status, body = get(view + path)
        assert status == 404, (path, body)
    status, state = get(view + "api/runs/step-1300/state")
    assert status == 200 and state["status"] == "finished" and state["episodes"] == 8


def test_runs_that_differ_are_compared_only_when_asked(view):
    status, body = get(view + "compare?base=other&candidate=step-1000")
    assert status == 400 and "were not run the same way" in body and "allow_mismatch=1" in body
    status, body = get(view + "compare?base=other&candidate=step-1000&allow_mismatch=1")
    assert status == 200 and "step-1000 against other" in body
    status, body = get(view + "trend?run=step-1000")
    assert status == 400 and "a trend needs two runs or more" in body


def test_a_host_other_machines_reach_is_refused_unless_asked(reports):
    result = subprocess.run([sys.executable, "-m", "pytest_agentgym", "view", str(reports), "--host", "0.0.0.0"],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert "--host 0.0.0.0 can be reached from other machines" in result.stderr
    assert "--allow-remote" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_server_cleanly(reports, signum):
    proc, url = start_view(reports)
    assert get(url + "api/index")[0] == 200
    code, out = stop_view(proc, signum)
    assert code == 0 and "pytest-agentgym view: stopped" in out and "Traceback" not in out
