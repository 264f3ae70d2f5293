"""The report and the ``view`` pages fit a 1366 x 768 window (issue 41), and ``view`` pages
ask for nothing that fails (their icon is a data: URI; ``/favicon.ico`` answers too).

The run is real: a pytest run in a subprocess against the reference agent and the
embedded servers, on a node profile with a long name, with a long checkpoint path and
four environments a conftest adds with long names (eight columns in all), one of whose
adapters refuses a task with a long message (an error episode). A copy of it as a
model with a long name would have recorded it is the second run of the compare view
and the trend page. Skips without Chromium unless AGENTGYM_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from pytest_agentgym.report.index import write_index

from helpers.report_fixtures import NO_BROWSER, REQUIRE_BROWSER, HeadlessChromium, find_chromium
from helpers.runs_index import get
from helpers.view_pages import chromium, serving
from helpers.waiting import wait_until

CHROMIUM = find_chromium()
pytestmark = [pytest.mark.heavy, pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)]

WIDTH, HEIGHT = 1366, 768
LONG_ENVS = ("Maze-from-the-lab-plugin-with-a-long-name", "Wordle-from-the-lab-plugin-with-a-long-name",
             "MazeWithAnUnbrokenNameOfFortyFiveCharactersXY", "Wordle-lab-2")
BROKEN_ENV, BROKEN_TASK = LONG_ENVS[0], 1
CHECKPOINT = "/data/checkpoints/agent-sft-experiment-with-a-long-name/global_step_001200/actor/huggingface"
LONG_MODEL = "organisation-name/qwen3.5-9b-instruct-finetuned-on-agent-trajectories-merged-lora-step-001200"
MESSAGE = ("the task server of the lab refused this task while loading it: " + "the grid file is missing, " * 30
           + "see http://127.0.0.1:9/logs/" + "x" * 240 + " for its traceback")

NODE = """\
name: lab-cluster-node-with-an-unusually-long-profile-name
model:
  endpoints:
    - kind: reference
      policy: reference
    - kind: vllm             # takes --agentgym-checkpoint (never reached: the reference agent answers)
limits: {max_rounds: 15, episode_timeout: 60, concurrency: 2}
envs: {servers: spawn}
"""

CONFTEST = f"""
import dataclasses
from pytest_agentgym.envs import register
from pytest_agentgym.envs.maze import MazeAdapter
from pytest_agentgym.envs.wordle import WordleAdapter

LONG_ENVS = {LONG_ENVS!r}


@register
class BrokenMaze(MazeAdapter):
    name = LONG_ENVS[0]

    async def reset_and_observe(self, client, env_id, task_index):
        observation = await super().reset_and_observe(client, env_id, task_index)
        if task_index == {BROKEN_TASK}:
            raise client.bad_answer("/reset", {MESSAGE!r}, env_id)
        return observation


for number, (name, base) in enumerate(zip(LONG_ENVS[1:], (WordleAdapter, MazeAdapter, WordleAdapter))):
    register(type(f"LongName{{number}}", (base,), {{"name": name}}))


def pytest_agentgym_add_environments(config, specs):
    for name in LONG_ENVS:
        like = "Maze" if name.startswith("Maze") else "Wordle"
        specs[name] = dataclasses.replace(specs[like], name=name)
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("wide-project")
    (project / "nodes").mkdir()
    (project / "nodes" / "lab.yaml").write_text(NODE)
    (project / "conftest.py").write_text(CONFTEST)
    (project / "suites").mkdir()
    for number, env in enumerate(("BabyAI", "TextCraft", "Maze", "Wordle", *LONG_ENVS)):
        (project / "suites" / f"s{number}.yaml").write_text(f"environment: {env}\ntasks: 0-2\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                           "--agentgym-node=nodes/lab.yaml", "--agentgym-run-id=wide",
                           f"--agentgym-checkpoint={CHECKPOINT}"],
                          cwd=project, capture_output=True, text=True, timeout=600)
    root = project / "reports"
    errors = [json.loads(line) for line in (root / "wide" / "episodes.jsonl").read_text().splitlines()]
    errors = [(e["env"], e["task_index"]) for e in errors if e["error"]]
    assert errors == [(BROKEN_ENV, BROKEN_TASK)], done.stdout[-3000:] + done.stderr[-3000:]
    _copy_as(root / "wide", root / "wide-other-model", model=LONG_MODEL)
    judged = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites",
                             "--agentgym-node=nodes/lab.yaml", "--agentgym-run-id=wide-judged",
                             f"--agentgym-checkpoint={CHECKPOINT}", "--agentgym-baseline=wide"],
                            cwd=project, capture_output=True, text=True, timeout=600)
    assert json.loads((root / "wide-judged" / "run.json").read_text())["baseline"], judged.stdout[-3000:]
    return root


def _copy_as(source: Path, target: Path, *, model: str) -> None:
    """``source`` as the same run by another model would have recorded it: ``target``'s run id
    is its folder's name, its model ``model``."""
    target.mkdir()
    info = json.loads((source / "run.json").read_text())
    info.update(run_id=target.name, model=model)
    info["fingerprint"]["model"] = model
    (target / "run.json").write_text(json.dumps(info))
    lines = []
    for line in (source / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        record.update(run_id=target.name, model=model)
        lines.append(json.dumps(record))
    (target / "episodes.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def view(reports):
    with serving(reports) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), width=WIDTH, height=HEIGHT) as opened:
        yield opened


#: What sticks out of the window: the page's own width, and each table, <pre> or figure
#: whose right edge is past the window's (a table in a box that scrolls counts: it is wider).
OVERFLOW = """(() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    const out = [...document.querySelectorAll('table, pre, figure, svg, code')]
        .filter(e => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > innerWidth + 0.5)
        .map(e => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${e.getAttribute('class') || ''} ends at `
                  + Math.round(e.getBoundingClientRect().right));
    return {scrollWidth: document.documentElement.scrollWidth, innerWidth, out}; })()"""


def _fits(browser: HeadlessChromium, session: str, page: str) -> None:
    browser.wait_for(session, "document.readyState === 'complete'")
    found = browser.evaluate(session, OVERFLOW)
    assert found["innerWidth"] == WIDTH
    assert found["scrollWidth"] <= WIDTH and found["out"] == [], f"{page} is wider than a {WIDTH} px window: {found}"


def test_the_report_of_the_run_fits_the_window(reports, browser):
    report = reports / "wide" / "report.html"
    session = browser.open(report.as_uri())
    _fits(browser, session, "report.html")
    assert set(LONG_ENVS) <= set(browser.evaluate(session, "[...document.querySelectorAll('#summary th[scope=row]')]"
                                                           ".map(th => th.textContent)"))
    (episode,) = [json.loads(line)["episode_id"] for line in (reports / "wide" / "episodes.jsonl").open()
                  if json.loads(line)["error"]]
    session = browser.open(report.as_uri() + "#episode=" + quote(episode, safe=""))
    assert browser.wait_for(session, "document.body.dataset.trajectory") == episode
    assert MESSAGE in browser.evaluate(session, "document.getElementById('trajectory').innerText")
    _fits(browser, session, "report.html with the error episode open")


def test_the_report_of_a_run_judged_against_a_baseline_fits_the_window(reports, browser):
    """Two more columns (the baseline's mean and the change) and a second gate per environment:
    the intervals and output tokens go under their figures, so the gates stay in the window."""
    session = browser.open((reports / "wide-judged" / "report.html").as_uri())
    _fits(browser, session, "report.html of a run judged against a baseline")
    gates = browser.evaluate(session, "[...document.querySelectorAll('#summary td.gates-cell')]"
                                      ".map(td => td.innerText)")
    assert len(gates) == 8 and all("baseline success" in text for text in gates), gates


def test_the_view_pages_fit_the_window(reports, view, browser):
    pages = {"the index": "", "a run's page": "runs/wide/", "the other run's page": "runs/wide-other-model/",
             "the compare view": "compare?base=wide&candidate=wide-other-model",
             "the trend page": "trend?run=wide&run=wide-other-model"}
    for page, path in pages.items():
        session = browser.open(view + path)
        _fits(browser, session, page)
    session = browser.open(view)
    assert LONG_MODEL in browser.evaluate(session, "document.getElementById('runs-table').innerText")
    session = browser.open(write_index(reports).as_uri())
    _fits(browser, session, "the static index")


def test_view_pages_ask_for_nothing_that_fails(reports, view, tmp_path):
    """Every page links its icon as a data: URI (the browser asks no server for it); a
    browser asks /favicon.ico of a page without one, and gets the icon."""
    with chromium(tmp_path / "profile", width=WIDTH, height=HEIGHT) as browser:
        seen: list[dict] = []
        icons = {}
        for path in ("", "runs/wide/", "compare?base=wide&candidate=wide-other-model",
                     "trend?run=wide&run=wide-other-model", "runs/no-such-run/"):
            session = _open_watching(browser, view + path, seen)
            icons[path] = browser.evaluate(session, "document.querySelector('link[rel=icon]')?.getAttribute('href')")
        # a JSON answer has no <link>: the browser asks /favicon.ico; once answered, every page has been asked for
        _open_watching(browser, view + "api/runs/wide/state", seen)
        wait_until(lambda: any(e["url"].endswith("/favicon.ico") and e["method"] == "Network.responseReceived"
                               for e in _network(browser, seen)), 30, "the browser asked for /favicon.ico")
        failed = [(e["method"], e["url"], e["params"].get("response", {}).get("status"), e["params"].get("errorText"))
                  for e in _network(browser, seen)
                  if e["method"] == "Network.loadingFailed"
                  or (e["method"] == "Network.responseReceived" and e["params"]["response"]["status"] >= 400
                      and not e["url"].endswith("/runs/no-such-run/"))]
        assert failed == []
    assert all(icon and icon.startswith("data:image/svg+xml,") for icon in icons.values()), icons
    status, body = get(view + "favicon.ico")
    assert status == 200 and body.startswith("<svg")


def _open_watching(browser: HeadlessChromium, url: str, seen: list[dict]) -> str:
    """``url`` in a new tab whose network events are kept (HeadlessChromium.open enables no network)."""
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page.enable", "Runtime.enable", "Network.enable"):
        browser.call(domain, session=session)
    browser.call("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session)
    return session


def _network(browser: HeadlessChromium, seen: list[dict]) -> list[dict]:
    """Every network event the browser has sent so far, kept in ``seen``, each with its URL."""
    browser.call("Browser.getVersion")  # what the browser sent before this answer is read on the way
    urls = {e["params"]["requestId"]: _url(e) for e in seen if e["method"] == "Network.requestWillBeSent"}
    for event in [e for e in browser._events if e.get("method", "").startswith("Network.")]:
        browser._events.remove(event)
        if event["method"] == "Network.requestWillBeSent":
            urls[event["params"]["requestId"]] = _url(event)
        seen.append({**event, "url": _url(event) or urls.get(event["params"].get("requestId"), "?")})
    return seen


def _url(event: dict) -> str:
    params = event["params"]
    return params.get("response", {}).get("url") or params.get("request", {}).get("url") or ""
