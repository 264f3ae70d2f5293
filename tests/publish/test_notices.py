"""Advisory notices shown once per machine (publish/notices.py): shown once, then only
with -v and again when they change, kept in a state directory that follows XDG; the
publisher's missing-stream notice is advisory while an outage is not. NATS is a real
nats-server."""

from __future__ import annotations

import json

import pytest

from helpers.nats_server import NatsServer, free_port
from helpers.projects import make_project, run, suite
from pytest_agentgym.publish import notices
from pytest_agentgym.publish.publisher import EventPublisher

pytestmark = pytest.mark.heavy


def test_a_notice_is_shown_once_then_only_when_verbose_and_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(notices.STATE_DIR_ENV, str(tmp_path / "state"))
    assert notices.state_dir() == tmp_path / "state"
    assert notices.once("nats.no-stream x", "no stream at x") is True
    assert notices.once("nats.no-stream x", "no stream at x") is False
    assert notices.once("nats.no-stream x", "no stream at x", verbose=True) is True
    assert notices.once("nats.no-stream x", "no stream for two subjects at x") is True  # new text
    assert notices.once("nats.no-stream y", "no stream at y") is True  # another key
    assert notices.once("nats.no-stream x", "no stream for two subjects at x") is False
    stored = json.loads((tmp_path / "state" / notices.STATE_FILE).read_text())
    assert set(stored["shown"]) == {"nats.no-stream x", "nats.no-stream y"}


def test_the_state_directory_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.delenv(notices.STATE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert notices.state_dir() == tmp_path / "xdg" / "pytest-agentgym"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")  # the XDG spec wants an absolute path
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert notices.state_dir() == tmp_path / "home" / ".local" / "state" / "pytest-agentgym"


@pytest.mark.faults
def test_an_unwritable_state_directory_shows_the_notice_every_time(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert notices.once("k", "text", directory=blocked) is True
    assert notices.once("k", "text", directory=blocked) is True
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / notices.STATE_FILE).write_text("{not json")
    assert notices.once("k", "text", directory=garbled) is True  # unreadable state: shown, then rewritten
    assert notices.once("k", "text", directory=garbled) is False


def test_the_publisher_marks_a_missing_stream_advisory_and_an_outage_not(tmp_path):
    server = NatsServer(tmp_path / "nats", jetstream=True)  # JetStream on, no stream for agentgym.>
    try:
        publisher = EventPublisher(server.url, tmp_path / "outbox.jsonl")
        notes = publisher.start()
        publisher.close(timeout=2.0)
    finally:
        server.stop()
    assert notes == [n.text for n in publisher.notices]
    (no_stream,) = [n for n in publisher.notices if "JetStream has no stream for" in n.text]
    assert no_stream.advisory and no_stream.key == f"nats.no-stream {server.url}"
    state = tmp_path / "state"
    assert notices.to_show(publisher.notices, directory=state) == [no_stream]
    assert notices.to_show(publisher.notices, directory=state) == []
    assert notices.to_show(publisher.notices, verbose=True, directory=state) == [no_stream]

    offline = EventPublisher(f"nats://127.0.0.1:{free_port()}", tmp_path / "offline.jsonl")
    offline.start()
    offline.close(timeout=1.0)
    (outage,) = offline.notices
    assert not outage.advisory and "unreachable (connection refused)" in outage.text
    assert notices.to_show(offline.notices, directory=state) == [outage]
    assert notices.to_show(offline.notices, directory=state) == [outage]  # every run


def test_the_jetstream_notice_shows_in_the_first_run_only_then_with_v(pytester, monkeypatch):
    monkeypatch.setenv(notices.STATE_DIR_ENV, str(pytester.path / "state"))
    server = NatsServer(pytester.path / "nats", jetstream=True)
    try:
        node = make_project(pytester)
        node.write_text(node.read_text() + f"nats: {{url: '{server.url}'}}\n")
        suite(pytester, "maze", "environment: Maze\ntasks: [17]\n")
        outputs = []
        for run_id, extra in (("first", []), ("second", []), ("verbose", ["-v"])):
            result = run(pytester, "suites", f"--agentgym-node={node}", f"--agentgym-run-id={run_id}", *extra)
            assert result.ret == 0, result.stdout.str()
            outputs.append(result.stdout.str())
    finally:
        server.stop()
    notice = "JetStream has no stream for"
    assert [notice in output for output in outputs] == [True, False, True]
    for run_id in ("first", "second", "verbose"):  # the record stays complete
        info = json.loads((pytester.path / "reports" / run_id / "run.json").read_text())
        assert any(notice in note for note in info["notes"]), info["notes"]
