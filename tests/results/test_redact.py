"""Secrets in URLs are hidden wherever a URL is shown or stored.

Unit tests of :mod:`pytest_agentgym.results.redact`, then the places that show URLs,
each driven for real: endpoint descriptions and fallback notes (a real closed
port on loopback), the model client's error messages (a real HTTP endpoint),
a spawned server's log and error (a real process), records, run.json, event
payloads and the report. The whole-run test (a real pytest run, a real HTTP
endpoint, a real nats-server) is in test_redact_run.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shlex
import sys

import pytest

from helpers.model_faults import FakeEndpoint, ok, status
from pytest_agentgym.results.events import field_status
from pytest_agentgym.model.client import EndpointClient, ModelError
from pytest_agentgym.model.endpoint_settings import EndpointConfigError, ModelSettings, parse_endpoint
from pytest_agentgym.model.endpoints import choose_endpoint
from pytest_agentgym.results.redact import redact_data, redact_text, redact_url
from pytest_agentgym.report.render import render_run_dir
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo, Turn
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.results.store import RunDir

SECRETS = ("secret", "s3cret")


def assert_hidden(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown in: {text[:300]}"


@pytest.mark.parametrize("url, shown", [
    ("http://alice:secret@127.0.0.1:8000/v1?api_key=s3cret",
     "http://***@127.0.0.1:8000/v1?api_key=***"),
    ("http://alice@127.0.0.1/v1", "http://***@127.0.0.1/v1"),
    ("https://h.example/v1?model=m&API_KEY=s3cret&page=2", "https://h.example/v1?model=m&API_KEY=***&page=2"),
    ("https://h.example/v1?apikey=1&key=2&token=3&access_token=4&secret=5&password=6&passwd=7&auth=8"
     "&signature=9&sig=10&X-Api-Key=11&openai_key=12&hf_token=13&X-Amz-Signature=14",
     "https://h.example/v1?apikey=***&key=***&token=***&access_token=***&secret=***&password=***"
     "&passwd=***&auth=***&signature=***&sig=***&X-Api-Key=***&openai_key=***&hf_token=***"
     "&X-Amz-Signature=***"),
    ("https://h.example/cb#access_token=s3cret&state=x", "https://h.example/cb#access_token=***&state=x"),
    ("nats://u:secret@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
    ("http://[::1]:8000/v1?monkey=1&keyboard=2", "http://[::1]:8000/v1?monkey=1&keyboard=2"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("127.0.0.1:8000/v1?token=s3cret", "127.0.0.1:8000/v1?token=***"),
])
def test_redact_url_hides_user_info_and_secret_parameters_only(url, shown):
    assert redact_url(url) == shown


def test_redact_text_finds_every_url_and_keeps_json_and_shell_quoting_valid():
    command = shlex.join(["pytest", "suites", "--agentgym-base-url=http://alice:secret@127.0.0.1:1/v1?api_key=s3cret",
                          "--agentgym-nats", "nats://bob:secret@127.0.0.1:4222"])
    shown = redact_text(command)
    assert_hidden(shown)
    assert shlex.split(shown) == ["pytest", "suites", "--agentgym-base-url=http://***@127.0.0.1:1/v1?api_key=***",
                                  "--agentgym-nats", "nats://***@127.0.0.1:4222"]
    data = {"message": "model endpoint http://alice:secret@127.0.0.1:1/v1?token=s3cret\n(model m): 500",
            "quoted": 'see "https://h/?key=s3cret"'}
    text = redact_text(json.dumps(data))
    assert_hidden(text)
    assert json.loads(text)["message"] == "model endpoint http://***@127.0.0.1:1/v1?token=***\n(model m): 500"
    assert redact_text("no url: user:secret is not a URL") == "no url: user:secret is not a URL"


def test_redact_data_walks_dicts_lists_and_tuples_and_keeps_other_values():
    data = {"a": ["http://u:secret@h/", 1.5, None, ("x", "http://h/?sig=s3cret")], "n": 3, "b": True}
    assert redact_data(data) == {"a": ["http://***@h/", 1.5, None, ("x", "http://h/?sig=***")], "n": 3, "b": True}


# --------------------------------------------------------------------------- what the endpoints print


def test_endpoint_description_and_fallback_notes_never_show_credentials():
    dead = free_port()  # nothing listens there: a real refused connection
    fake = FakeEndpoint(models=("fake-model",))
    with fake:
        settings = ModelSettings.from_mapping({"endpoints": [
            {"kind": "openai", "url": f"http://alice:secret@127.0.0.1:{dead}/v1?api_key=s3cret", "model": "m"},
            {"kind": "openai", "url": f"http://alice:secret@127.0.0.1:{fake.port}/v1?api_key=s3cret",
             "model": "fake-model"},
        ]})
        chosen = choose_endpoint(settings)
    primary = settings.endpoints[0]
    assert primary.describe() == f"openai m at http://***@127.0.0.1:{dead}/v1?api_key=***"
    assert "unhealthy" in chosen.notes[0] and "using fallback" in chosen.notes[-1]
    for line in (*chosen.notes, chosen.summary):
        assert_hidden(line)
    # the credentials were used: the health check of the fallback carried both
    probe = fake.requests[0]
    assert probe.path == "/v1/models?api_key=s3cret"
    assert probe.headers["authorization"] == "Basic " + base64.b64encode(b"alice:secret").decode()


def test_endpoint_config_errors_do_not_echo_credentials():
    with pytest.raises(EndpointConfigError) as caught:
        parse_endpoint({"kind": "openai", "url": "ftp://alice:secret@127.0.0.1/v1?token=s3cret", "model": "m"})
    assert "ftp://***@127.0.0.1/v1?token=***" in str(caught.value)
    with pytest.raises(EndpointConfigError) as caught:
        parse_endpoint({"kind": "vllm", "url": "http://alice:secret@127.0.0.1:8000?key=s3cret"})
    assert_hidden(str(caught.value))
    assert "http://***@127.0.0.1:8000/v1/models?key=***" in str(caught.value)


def test_model_errors_name_the_endpoint_without_its_credentials_and_the_request_carries_them():
    with FakeEndpoint(script=[status(400, "bad request"), ok()]) as fake:
        url = f"http://alice:secret@127.0.0.1:{fake.port}/v1?api_key=s3cret"

        async def chat_twice() -> tuple[ModelError, str]:
            async with EndpointClient(url, "fake-model") as client:
                with pytest.raises(ModelError) as caught:
                    await client.chat([{"role": "user", "content": "hi"}])
                reply = await client.chat([{"role": "user", "content": "hi"}])
                return caught.value, reply.text

        error, text = asyncio.run(chat_twice())
    assert text.startswith("Thought:")
    assert f"model endpoint http://***@127.0.0.1:{fake.port}/v1?api_key=***" in str(error)
    assert_hidden(str(error))
    chats = [r for r in fake.requests if r.method == "POST"]
    assert [r.path for r in chats] == ["/v1/chat/completions?api_key=s3cret"] * 2
    assert {r.headers["authorization"] for r in chats} == {"Basic " + base64.b64encode(b"alice:secret").decode()}


def test_a_spawned_servers_log_and_error_hide_credentials(tmp_path):
    log = tmp_path / "server.log"
    server = ManagedServer(
        "leaky", command=[sys.executable, "-c", "import sys; sys.exit(3)",
                          "--upstream=http://alice:secret@127.0.0.1:1/v1?token=s3cret"],
        log_path=log, startup_timeout=30, label="leaky server")
    with pytest.raises(ServerStartError) as caught:
        server.start()
    assert "exited with code 3" in str(caught.value)
    assert "--upstream=http://***@127.0.0.1:1/v1?token=***" in str(caught.value)
    assert_hidden(str(caught.value))
    assert "starting: " in log.read_text() and "http://***@127.0.0.1:1/v1?token=***" in log.read_text()
    assert_hidden(log.read_text())


def test_attaching_to_a_url_with_credentials_fails_without_showing_them():
    port = free_port()
    server = ManagedServer("gone", url=f"http://alice:secret@127.0.0.1:{port}?key=s3cret", startup_timeout=0.3)
    with pytest.raises(ServerStartError) as caught:
        server.start()
    assert f"http://***@127.0.0.1:{port}?key=***" in str(caught.value)
    assert_hidden(str(caught.value))


# --------------------------------------------------------------------------- what is stored and published


def leaky_run(tmp_path) -> tuple[RunDir, RunInfo]:
    url = "http://alice:secret@127.0.0.1:9/v1?api_key=s3cret"
    info = RunInfo(run_id="r1", started_at="2026-01-01T00:00:00Z", node="local", model="m", endpoint=url,
                   endpoint_kind="openai", environments=("Maze",), command=f"pytest --agentgym-base-url={url}",
                   settings={"base_url": url}, notes=(f"primary openai at {url} unhealthy",),
                   gates=({"env": "Maze", "gate": "g", "value": None, "passed": False, "detail": url},))
    run = RunDir.create(tmp_path, "r1")
    run.write_info(info)
    error = ErrorInfo("EndpointDown", f"model endpoint {url} (model m): connection refused", "model")
    turn = Turn(0, f"go to {url}", f"I will visit {url}", "move up", "ok", 0.0, False, 0.1, 0.1)
    run.append_episode(EpisodeRecord(run_id="r1", env="Maze", task_index=0, repeat=0, reward=None,
                                     success=False, rounds=1, stop_reason="error", started_at="t",
                                     duration_s=1.0, model="m", turns=(turn,), error=error,
                                     retried=(error,), outcome="error"))
    return run, info


def test_run_json_episodes_and_report_are_redacted(tmp_path):
    run, _ = leaky_run(tmp_path)
    stored = run.run_file.read_text() + run.episodes_file.read_text()
    assert_hidden(stored)
    assert json.loads(run.run_file.read_text())["endpoint"] == "http://***@127.0.0.1:9/v1?api_key=***"
    record = run.read_episodes()[0]
    assert record.error.message == "model endpoint http://***@127.0.0.1:9/v1?api_key=*** (model m): connection refused"
    html = render_run_dir(run.path, compress=False).read_text()
    assert_hidden(html)
    assert "http://***@127.0.0.1:9/v1?api_key=***" in html


def test_the_report_redacts_what_older_unredacted_files_hold(tmp_path):
    run, info = leaky_run(tmp_path)
    # a run written before redaction existed: the raw text straight into the files
    raw = json.dumps(info.to_dict())
    run.run_file.write_text(raw)
    line = run.episodes_file.read_text().replace("***@", "alice:secret@").replace("=***", "=s3cret")
    run.episodes_file.write_text(line)
    assert "secret" in run.run_file.read_text() and "s3cret" in run.episodes_file.read_text()
    for compress in (False, True):
        assert_hidden(render_run_dir(run.path, compress=compress).read_text())


def test_status_events_are_redacted(tmp_path):
    _, info = leaky_run(tmp_path)
    event = field_status(info, "finished", {"episodes": 1})
    assert event.payload["config"]["endpoint"] == "http://***@127.0.0.1:9/v1?api_key=***"
    assert_hidden(event.data().decode())
