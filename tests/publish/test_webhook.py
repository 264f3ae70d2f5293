"""Webhooks (`--agentgym-notify`, publish/webhook.py): a real pytest run of a tiny suite
POSTs its summary to a real HTTP receiver on loopback; the body's fields, no secret in
it; receivers that answer 500, refuse as not found, or never answer leave the run's exit
status alone and are named in one warning line and in run.json; a URL that is not
http(s) is a usage error naming the option; `pytest-agentgym merge --notify`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.projects import REPO, make_project, run, run_json, suite
from helpers.usage_errors import settings_refusal
from helpers.webhook_receiver import WebhookReceiver
from pytest_agentgym.publish import webhook

pytestmark = pytest.mark.heavy

SECRET_KEY = "sk-live-do-not-leak-4242"
HOOK_TOKEN = "hooktoken-do-not-leak"


#: What each route of the test receiver answers: ``/hang`` reads the request and never answers
ROUTES = {"/ok": 204, "/fail": 500, "/missing": 404, "/hang": None}


@pytest.fixture
def receiver():
    made = WebhookReceiver(lambda path: ROUTES.get(path.split("?")[0], 404))
    yield made
    made.close()


def test_a_finished_run_posts_its_summary_with_the_failed_gate_and_no_secret(pytester, receiver, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\ngates: [success_rate >= 0.5, mean_reward >= 2]\n")
    monkeypatch.setenv("AGENTGYM_TEST_HOOK_KEY", SECRET_KEY)
    hook = f"http://alice:hookpass@{receiver.url.removeprefix('http://')}/ok?token={HOOK_TOKEN}"
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=hooked",
                 "--agentgym-api-key-env=AGENTGYM_TEST_HOOK_KEY", f"--agentgym-notify={hook}")
    assert result.ret == 1, result.stdout.str()  # the gate that cannot be met, as without a webhook
    (post,) = receiver.to("/ok")
    body = json.loads(post["body"])
    info = run_json(pytester, "hooked")
    assert {k: body[k] for k in ("schema_version", "event", "source", "run_id", "status", "model", "node",
                                 "checkpoint", "shard", "started_at", "ended_at")} == {
        "schema_version": 1, "event": "run.finished", "source": "pytest", "run_id": "hooked", "status": "finished",
        "model": info["model"], "node": "testnode", "checkpoint": None, "shard": None,
        "started_at": info["started_at"], "ended_at": info["ended_at"]}
    assert body["counts"] == info["counts"] and body["counts"]["gates_failed"] == 1
    assert body["environments"] == {"Maze": {"episodes": 2, "success_rate": 1.0, "errors": 0,
                                             "mean_reward": info["summaries"]["Maze"]["mean_reward"]}}
    assert [(g["env"], g["gate"], g["outcome"]) for g in body["gates"]] == [
        ("Maze", "success_rate >= 0.5", "passed"), ("Maze", "mean_reward >= 2", "failed")]
    assert body["gates"][0]["value"] == 1.0
    assert body["failed_gates"] == [body["gates"][1]]
    assert body["report"] == str(pytester.path / "reports" / "hooked" / "report.html")
    assert body["run_dir"] == str(pytester.path / "reports" / "hooked")
    assert post["headers"]["Content-Type"] == "application/json"
    assert post["headers"]["X-Agentgym-Event"] == "run.finished"
    sent = json.dumps(post["headers"]) + post["body"]
    for secret in (SECRET_KEY, HOOK_TOKEN, "hookpass"):
        assert secret not in sent
    assert "agentgym: notify" not in result.stdout.str()  # delivered: nothing to say


def test_receivers_that_fail_leave_the_exit_status_alone_and_are_named_once(pytester, receiver):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: [0]\ngates: [success_rate >= 0.5]\n")
    hooks = ",".join(f"{receiver.url}{path}?token={HOOK_TOKEN}" for path in ("/fail", "/missing", "/hang"))
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=unheard",
                 f"--agentgym-notify={hooks}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"agentgym: notify {receiver.url}/fail?token=*** not delivered: answered HTTP 500 (after 3 attempt(s)); "
        f"the run's result is unchanged",
        f"agentgym: notify {receiver.url}/missing?token=*** not delivered: answered HTTP 404 (after 1 attempt(s)); "
        f"the run's result is unchanged",
        f"agentgym: notify {receiver.url}/hang?token=*** not delivered: no answer within * s (after * attempt(s)); "
        f"the run's result is unchanged",
        "*agentgym: run unheard finished*"])
    assert HOOK_TOKEN not in result.stdout.str() + result.stderr.str()
    assert (len(receiver.to("/fail")), len(receiver.to("/missing"))) == (3, 1)  # 500 retried, 404 not
    assert 1 <= len(receiver.to("/hang")) <= webhook.ATTEMPTS
    notes = run_json(pytester, "unheard")["notes"]
    assert [n.split(" not delivered")[0] for n in notes if n.startswith("notify ")] == [
        f"notify {receiver.url}{path}?token=***" for path in ("/fail", "/missing", "/hang")]
    assert run_json(pytester, "unheard")["status"] == "finished"


def test_a_refused_connection_is_retried_then_named(receiver):
    receiver.close()  # nothing listens on its port any more
    (problem,) = webhook.deliver([receiver.url + "/ok"], {"event": "run.finished"})
    assert problem.startswith(f"notify {receiver.url}/ok not delivered: ConnectError: ")
    assert problem.endswith(f"(after {webhook.ATTEMPTS} attempt(s)); the run's result is unchanged")


@pytest.mark.parametrize("given, named", [
    ("ftp://hooks.example.org/x", "ftp://hooks.example.org/x is not an http:// or https:// URL"),
    ("hooks.example.org/x", "hooks.example.org/x is not an http:// or https:// URL"),
    ("https://ok.example.org/a,mailto:ops@example.org", "mailto:ops@example.org is not an http"),
    ("http://u:pw@/x?token=t", "http://***@/x?token=*** is not an http"),
])
def test_a_url_that_is_not_http_is_a_usage_error_naming_the_option(pytester, given, named):
    make_project(pytester)
    refused = settings_refusal(pytester, f"--agentgym-notify={given}")
    assert refused.startswith("--agentgym-notify") and named in refused
    assert "pw" not in refused


def test_the_variable_and_the_ini_key_are_read_and_named(pytester, monkeypatch):
    from pytest_agentgym.plugin.options import resolve_settings

    make_project(pytester)
    monkeypatch.setenv("AGENTGYM_NOTIFY", "gopher://x")
    assert "AGENTGYM_NOTIFY" in settings_refusal(pytester)
    monkeypatch.delenv("AGENTGYM_NOTIFY")
    pytester.makeini("[pytest]\nagentgym_notify = http://127.0.0.1:9/a, https://hooks.example.org/b\n")
    settings = resolve_settings(pytester.parseconfig())
    assert settings.notify == ("http://127.0.0.1:9/a", "https://hooks.example.org/b")


def test_merge_posts_the_merged_run_and_its_gate_verdicts(pytester, receiver):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\ngates: [mean_reward >= 2]\n")
    for index in (1, 2):
        shard = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=split",
                    f"--agentgym-shard={index}/2")
        assert shard.ret == 0, shard.stdout.str()
    assert len(receiver.posts) == 0
    merged = subprocess.run([sys.executable, "-m", "pytest_agentgym", "merge", "reports/split", "--out",
                             "reports/split", "--notify", f"{receiver.url}/ok,{receiver.url}/fail"],
                            cwd=pytester.path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert merged.returncode == 1, merged.stdout + merged.stderr  # the gate failed, the webhook did not matter
    (post,) = receiver.to("/ok")
    body = json.loads(post["body"])
    assert (body["source"], body["run_id"], body["counts"]["episodes"]) == ("merge", "split", 4)
    assert [(g["gate"], g["outcome"]) for g in body["failed_gates"]] == [("mean_reward >= 2", "failed")]
    assert f"pytest-agentgym merge: notify {receiver.url}/fail not delivered: answered HTTP 500" in merged.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_agentgym", "merge", "reports/split", "--out", "reports/x",
                          "--notify", "file:///tmp/x"], cwd=pytester.path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "pytest-agentgym merge: --notify: file:///tmp/x is not an http" in bad.stderr
    assert not (pytester.path / "reports" / "x").exists()
