"""``pytest-agentgym view`` against web pages, with the real server as a subprocess on a
free loopback port: a request whose Host is a foreign name (DNS rebinding) reads nothing,
from raw HTTP and from a real Chromium whose resolver maps attacker.example to 127.0.0.1;
--allow-host adds a name; serving pages writes nothing into the reports directory (the
light index goes to $XDG_CACHE_HOME); a run directory holding a symbolic link out of the
reports directory is not read. Browser tests skip without Chromium unless
AGENTGYM_REQUIRE_BROWSER=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.report_fixtures import NO_BROWSER, REQUIRE_BROWSER, find_chromium
from helpers.runs_index import finished_run, start_view, stop_view
from helpers.web_callers import ATTACKER, cors_headers, raw, rebinding_chromium, tree

pytestmark = pytest.mark.faults  # issue 39's findings are in the fault tier

CHROMIUM = find_chromium()
browser_only = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)

SECRET_MODEL = "secret-model-outside"
PAGES = ("/", "/api/index", "/runs/step-1/", "/api/runs/step-1/state", "/compare?base=step-1&candidate=step-2",
         "/trend?run=step-1&run=step-2")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(view process, port, reports directory, light-index cache)."""
    base = tmp_path_factory.mktemp("view-web")
    root = base / "reports"
    finished_run(root, "step-1", {"BabyAI": "PPFF"}, started_at="2026-11-20T10:00:00+00:00")
    finished_run(root, "step-2", {"BabyAI": "PPPF"}, started_at="2026-11-21T10:00:00+00:00")
    outside = finished_run(base / "elsewhere", "secret", {"BabyAI": "PPPP"}, model=SECRET_MODEL,
                           started_at="2026-11-22T10:00:00+00:00").path
    linked = root / "linked"  # its own run.json, its episodes a link to another directory's
    linked.mkdir()
    shutil.copy(root / "step-1" / "run.json", linked / "run.json")
    (linked / "episodes.jsonl").symlink_to(outside / "episodes.jsonl")
    report_linked = root / "report-linked"  # a report.html and a folder linked out
    shutil.copytree(root / "step-2", report_linked)
    (report_linked / "report.html").symlink_to(outside / "episodes.jsonl")
    (report_linked / "evidence").symlink_to(outside, target_is_directory=True)
    for index in root.rglob("*.light.json"):  # left by the fixtures' own readings: view must make none
        index.unlink()
    cache = base / "cache"
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        proc, url = start_view(root)
    finally:
        os.environ.pop("XDG_CACHE_HOME") if old is None else os.environ.__setitem__("XDG_CACHE_HOME", old)
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    yield proc, port, root, cache
    stop_view(proc)


def test_a_foreign_host_reads_nothing_and_the_bound_names_read_everything(site):
    _, port, _, _ = site
    for path in PAGES:
        for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LOCALHOST"):
            status, _, body = raw(port, "GET", path, {"Host": host})
            assert status == 200, (path, host, body[:300])
        for host in (f"{ATTACKER}:{port}", ATTACKER, f"127.0.0.1.{ATTACKER}", "127.0.0.1:80@evil", ""):
            status, headers, body = raw(port, "GET", path, {"Host": host, "Origin": f"http://{ATTACKER}"})
            assert status == 403, (path, host)
            assert headers["content-type"].startswith("text/plain") and not cors_headers(headers)
            said = body.decode()
            assert f"Host {json.dumps(host)}" in said and "--allow-host" in said, said
            assert "step-1" not in said and "BabyAI" not in said
    assert raw(port, "GET", "/api/index", {"Host": f"{ATTACKER}:{port}"})[2].startswith(b"this server does not")


def test_allow_host_adds_a_name_and_a_bad_one_is_refused_at_start(tmp_path, site):
    _, _, root, _ = site
    proc, url = start_view(root, "--allow-host", "trainer.example", "--allow-host", "10.1.2.3")
    try:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        for host in (f"trainer.example:{port}", "TRAINER.EXAMPLE.", "10.1.2.3"):
            assert raw(port, "GET", "/api/index", {"Host": host})[0] == 200, host
        assert raw(port, "GET", "/api/index", {"Host": ATTACKER})[0] == 403
    finally:
        stop_view(proc)
    refused = subprocess.run([sys.executable, "-m", "pytest_agentgym", "view", str(root), "--port", "0",
                              "--allow-host", "http://trainer.example:80/"], capture_output=True, text=True,
                             cwd=REPO, timeout=60)
    assert refused.returncode == 2
    assert "--allow-host 'http://trainer.example:80/' is not a host name" in refused.stderr


def test_pages_write_nothing_into_the_reports_directory(site):
    _, port, root, cache = site
    before = tree(root)
    for path in PAGES:
        assert raw(port, "GET", path, {"Host": f"127.0.0.1:{port}"})[0] == 200, path
    assert tree(root) == before
    assert list(root.rglob("*.light.json")) == []
    kept = list(cache.rglob("*.light.json"))  # the index the reading left, in the cache instead
    assert kept and all(json.loads(k.read_bytes())["records"] for k in kept)


def test_a_symbolic_link_out_of_the_reports_directory_is_not_followed(site):
    _, port, _, _ = site
    host = {"Host": f"127.0.0.1:{port}"}
    status, _, body = raw(port, "GET", "/api/index", host)
    rows = {row["key"]: row for row in json.loads(body)["rows"]}
    for key in ("linked", "report-linked"):
        assert rows[key]["status"] == "broken" and "is a symbolic link" in rows[key]["problem"], rows[key]
        assert rows[key]["episodes"] == 0
        for path in (f"/runs/{key}/", f"/api/runs/{key}/state", f"/compare?base=step-1&candidate={key}"):
            status, _, body = raw(port, "GET", path, host)
            assert status == 403 and b"outside" in body and SECRET_MODEL.encode() not in body, (path, status)
    assert SECRET_MODEL.encode() not in raw(port, "GET", "/", host)[2]
    assert SECRET_MODEL.encode() not in raw(port, "GET", "/api/index", host)[2]


@browser_only
def test_a_rebound_page_in_chromium_reads_nothing(tmp_path, site):
    _, port, _, _ = site
    with rebinding_chromium(CHROMIUM, tmp_path / "chromium") as browser:
        own = browser.open(f"http://127.0.0.1:{port}/")  # the control: the same browser, the bound name
        assert browser.evaluate(own, "fetch('/api/index').then(r => r.json()).then(d => d.rows.length)") >= 2
        rebound = browser.open(f"http://{ATTACKER}:{port}/")
        assert "does not answer for Host" in browser.evaluate(rebound, "document.body.innerText")
        got = browser.evaluate(rebound, "fetch('/api/index').then(async r => [r.status, await r.text()])")
        assert got[0] == 403 and "step-1" not in got[1], got
        got = browser.evaluate(rebound, "fetch('/runs/step-1/').then(async r => [r.status, await r.text()])")
        assert got[0] == 403 and "BabyAI" not in got[1], got
