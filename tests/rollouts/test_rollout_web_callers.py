"""The rollout service against web pages and the callers they stand for, with real
processes on loopback (the service, node local with its spawned TextCraft server, an
endpoint that answers as a model and writes down what it was sent): a batch posted as
text/plain (what a page of any origin may send without asking) is refused 415 and plays
nothing, also from a real Chromium page on another origin; no answer carries CORS
headers; a foreign Host (DNS rebinding) gets 403; a base_url off the allow-list is
refused alike for an open and a closed port, and nothing is sent there, with no API key
held. Browser tests skip without Chromium unless AGENTGYM_REQUIRE_BROWSER=1."""

from __future__ import annotations

import json

import pytest
from helpers.header_log import MODEL
from helpers.nats_server import free_port
from helpers.report_fixtures import NO_BROWSER, REQUIRE_BROWSER, HeadlessChromium, find_chromium
from helpers.rollout_guards import guarded_service, header_log, logged
from helpers.run_dirs import read_episodes
from helpers.waiting import wait_until
from helpers.web_callers import ATTACKER, cors_headers, page_server, raw, rebinding_chromium

pytestmark = [pytest.mark.heavy, pytest.mark.faults]

CHROMIUM = find_chromium()
browser_only = pytest.mark.skipif(CHROMIUM is None and not REQUIRE_BROWSER, reason=NO_BROWSER)

BODY = {"env": "textcraft", "model": MODEL, "ids": [0], "max_round": 2}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """(service, its model endpoint, a loopback server with an 'admin' route, the run directory)."""
    base = tmp_path_factory.mktemp("web-callers")
    model = header_log(base, "model-endpoint")
    admin = header_log(base, "internal-admin")
    service = guarded_service(base / "service", "--base-url", model.url, "--allow-host", "trainer.example",
                              "--log-level", "info", run_id="web")
    yield service, model, admin, base / "service" / "reports" / "web"
    for server in (service, model, admin):
        server.stop()


def _host(service) -> dict[str, str]:
    return {"Host": f"127.0.0.1:{service.port}"}


def _chats(endpoint) -> int:
    return sum(1 for e in logged(endpoint) if e["path"].endswith("/chat/completions"))


def test_a_batch_not_sent_as_json_plays_nothing(stack):
    service, model, _, run_dir = stack
    body = json.dumps(BODY).encode()
    before, chats = len(read_episodes(run_dir)), _chats(model)
    for kind in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", None):
        headers = {**_host(service), "Origin": "http://127.0.0.1:1"}
        if kind is not None:
            headers["Content-Type"] = kind
        status, answer_headers, answer = raw(service.port, "POST", "/rollouts", headers, body)
        assert status == 415, (kind, answer)
        said = json.loads(answer)["error"]
        assert "Content-Type: application/json" in said and (kind or "no Content-Type")[:10] in said, said
        assert not cors_headers(answer_headers)
    assert len(read_episodes(run_dir)) == before and _chats(model) == chats
    # the control: the same bytes as JSON play a rollout and write it down
    status, _, answer = raw(service.port, "POST", "/rollouts", {**_host(service), "Content-Type":
                                                                 "application/json; charset=utf-8"}, body)
    assert status == 200, answer
    assert len(read_episodes(run_dir)) == before + 1 and _chats(model) > chats


def test_no_answer_carries_cors_headers(stack):
    service, _, _, _ = stack
    origin = {"Origin": f"http://{ATTACKER}"}
    asked = [("OPTIONS", "/rollouts", {"Access-Control-Request-Method": "POST",
                                       "Access-Control-Request-Headers": "content-type"}, None),
             ("GET", "/health", {}, None), ("GET", "/rollouts/no-such-job", {}, None),
             ("POST", "/rollouts", {"Content-Type": "application/json"}, b"{"),
             ("POST", "/rollouts", {"Content-Type": "application/json"},
              json.dumps({**BODY, "base_url": "http://127.0.0.1:9"}).encode()),
             ("GET", "/health", {"Host": ATTACKER}, None)]
    statuses = []
    for method, path, headers, body in asked:
        status, answer_headers, _ = raw(service.port, method, path, {**_host(service), **origin, **headers}, body)
        statuses.append(status)
        assert not cors_headers(answer_headers), (method, path, answer_headers)
    assert statuses == [405, 200, 404, 400, 403, 403]


def test_a_foreign_host_is_refused_naming_the_option(stack):
    service, model, _, run_dir = stack
    before = len(read_episodes(run_dir))
    for host in (f"{ATTACKER}:{service.port}", ATTACKER, "127.0.0.1.nip.io", "localhost@evil"):
        for method, path, body in (("GET", "/health", None), ("POST", "/rollouts", json.dumps(BODY).encode())):
            status, _, answer = raw(service.port, method, path, {"Host": host, "Content-Type": "application/json"},
                                    body)
            assert status == 403, (host, path, answer)
            said = json.loads(answer)["error"]
            assert f"Host {json.dumps(host)}" in said and "--allow-host" in said and "run_dir" not in said
    assert len(read_episodes(run_dir)) == before
    for host in (f"localhost:{service.port}", f"[::1]:{service.port}", "trainer.example", "TRAINER.example:1"):
        status, _, answer = raw(service.port, "GET", "/health", {"Host": host})
        assert status == 200 and json.loads(answer)["run_id"] == "web", host


def test_a_base_url_off_the_list_is_refused_alike_for_open_and_closed_ports(stack):
    service, _, admin, run_dir = stack
    before, asked_before = len(read_episodes(run_dir)), len(logged(admin))
    closed = free_port()
    answers = {}
    for where, base_url in (("open", f"http://127.0.0.1:{admin.port}/internal/admin"),
                            ("closed", f"http://127.0.0.1:{closed}/internal/admin")):
        status, _, answer = raw(service.port, "POST", "/rollouts", {**_host(service), "Content-Type":
                                                                     "application/json"},
                                json.dumps({**BODY, "base_url": base_url}).encode())
        assert status == 403, answer
        said = json.loads(answer)["error"]
        assert f"--allow-base-url http://127.0.0.1:" in said and "calls only" in said, said
        answers[where] = said.replace(str(admin.port), "PORT").replace(str(closed), "PORT")
    assert answers["open"] == answers["closed"]  # nothing tells whether something listens there
    assert len(logged(admin)) == asked_before  # not asked, not even /v1/models
    assert len(read_episodes(run_dir)) == before


@browser_only
def test_a_page_of_another_origin_posting_text_plain_plays_nothing(tmp_path, stack):
    service, model, _, run_dir = stack
    before, chats = len(read_episodes(run_dir)), _chats(model)
    log = service.log_path.read_text()
    page = ("<!DOCTYPE html><title>any site</title><script>window.sent = fetch("
            f"'http://127.0.0.1:{service.port}/rollouts', {{method: 'POST', mode: 'no-cors', headers: "
            f"{{'Content-Type': 'text/plain'}}, body: {json.dumps(json.dumps({**BODY, 'ids': [1, 2, 3]}))}}})"
            ".then(r => r.type, e => 'failed: ' + e);</script>")
    with page_server(page) as url, HeadlessChromium(CHROMIUM, tmp_path / "profile") as browser:
        tab = browser.open(url)
        assert browser.evaluate(tab, "window.sent") == "opaque"  # sent, and its answer unreadable
        wait_until(lambda: '"POST /rollouts HTTP/1.1" 415' in service.log_path.read_text()[len(log):], 30,
                   "the service's access log shows the page's POST refused", procs=[service.proc])
    assert len(read_episodes(run_dir)) == before and _chats(model) == chats


@browser_only
def test_a_rebound_page_in_chromium_cannot_post_or_read(tmp_path, stack):
    service, _, _, run_dir = stack
    before = len(read_episodes(run_dir))
    with rebinding_chromium(CHROMIUM, tmp_path / "chromium") as browser:
        tab = browser.open(f"http://{ATTACKER}:{service.port}/health")
        assert "does not answer for Host" in browser.evaluate(tab, "document.body.innerText")
        got = browser.evaluate(tab, "fetch('/rollouts', {method: 'POST', headers: {'Content-Type': "
                                    f"'application/json'}}, body: {json.dumps(json.dumps(BODY))}}})"
                                    ".then(async r => [r.status, await r.text()])")
        assert got[0] == 403 and "--allow-host" in got[1], got
    assert len(read_episodes(run_dir)) == before
