"""What field operators do on a node and what they should see: the dry run under
its habitual names, `pytest-agentgym envs --node`, a preflight that shows the
whole model chain, and advisory notices that are shown once per machine.

Model endpoints are real HTTP servers on loopback (tests/model_faults.py),
environment servers real embedded-server processes, NATS a real nats-server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from model_faults import FakeEndpoint
from nats_server import NatsServer, free_port
from projects import make_project, run, suite

from pytest_agentgym.publish import notices
from pytest_agentgym.publish.publisher import EventPublisher
from pytest_agentgym.servers.status import HEALTHS


def write_node(pytester: pytest.Pytester, name: str, endpoints: str) -> Path:
    """A node with these model endpoints (YAML list items) and the embedded environments only."""
    path = pytester.path / f"{name}.yaml"
    path.write_text(f"name: {name}\nmodel:\n  endpoints:\n{endpoints}"
                    "envs: {servers: spawn, skip: [ALFWorld, SQLGym, WebShop, SciWorld, AgentBench-ALFWorld, AgentBench-WebShop]}\n")
    return path


# -- --agentgym-dry-run and the --dry-run habit ------------------------------------------


def test_dry_run_is_the_preflight_under_another_name(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    preflight = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
    dry_run = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-dry-run")
    assert preflight.ret == dry_run.ret == 0, dry_run.stdout.str()
    assert dry_run.stdout.lines == preflight.stdout.lines
    dry_run.stdout.fnmatch_lines(["agentgym preflight: node testnode*", "preflight: ready"])
    assert not (pytester.path / "reports").exists()
    helped = run(pytester, "--help")
    helped.stdout.fnmatch_lines(["*--agentgym-preflight, --agentgym-dry-run*"])
    assert "--agentgym-dry-run is the same" in " ".join(helped.stdout.str().split())


def test_the_dry_run_habit_gets_a_did_you_mean_hint(pytester):
    make_project(pytester)
    habit = run(pytester, "--dry-run")
    assert habit.ret == pytest.ExitCode.USAGE_ERROR
    habit.stderr.fnmatch_lines([
        "*unrecognized arguments: --dry-run",
        "  hint: did you mean --agentgym-dry-run (the preflight check)?",
    ])
    other = run(pytester, "--no-such-flag")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --no-such-flag" in other.stderr.str()
    assert "did you mean" not in other.stderr.str()


# -- preflight: the whole model chain ---------------------------------------------------


def test_preflight_shows_every_endpoint_and_the_one_a_run_would_use(pytester):
    make_project(pytester)
    with FakeEndpoint(health_status=503) as gateway, FakeEndpoint(ollama_tags=("qwen3:8b",)) as ollama:
        node = write_node(pytester, "field", (
            f"    - {{kind: tensorzero, url: '{gateway.url}', model_name: qwen35_9b}}\n"
            f"    - {{kind: ollama, url: '{ollama.url}', model: 'qwen3:8b'}}\n"
            "    - {kind: reference}\n"))
        result = run(pytester, f"--agentgym-node={node}", "--agentgym-dry-run")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"  model primary: tensorzero tensorzero::model_name::qwen35_9b at {gateway.url}: "
        "unhealthy: GET /status answered HTTP 503",
        f"  model fallback 1: ollama qwen3:8b at {ollama.url}: healthy",
        "  model fallback 2: reference reference: launchable (reference is started by the plugin)",
        f"  would use: fallback 1 ollama qwen3:8b at {ollama.url}",
        "preflight: ready",
    ])


def test_preflight_goes_on_past_a_healthy_primary_and_reads_api_keys_like_a_run(pytester, monkeypatch):
    make_project(pytester)
    monkeypatch.delenv("AGENTGYM_TEST_UNSET_KEY", raising=False)
    with FakeEndpoint(models=("m",)) as keyed, FakeEndpoint(models=("m",)) as served, \
            FakeEndpoint(ollama_tags=("llama3:latest",)) as ollama:
        node = write_node(pytester, "chain", (
            f"    - {{kind: openai, url: '{keyed.base_url}', model: m, api_key_env: AGENTGYM_TEST_UNSET_KEY}}\n"
            f"    - {{kind: openai, url: '{served.base_url}', model: m}}\n"
            f"    - {{kind: ollama, url: '{ollama.url}', model: 'qwen3:8b'}}\n"))
        result = run(pytester, f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"  model primary: openai m at {keyed.base_url}: unusable: *AGENTGYM_TEST_UNSET_KEY*not set*",
        f"  model fallback 1: openai m at {served.base_url}: healthy",
        f"  model fallback 2: ollama qwen3:8b at {ollama.url}: unhealthy: model qwen3:8b not pulled; "
        "run `ollama pull qwen3:8b`",
        f"  would use: fallback 1 openai m at {served.base_url}",
    ])
    assert not keyed.requests  # an endpoint without its key is not contacted


def test_preflight_checks_the_endpoint_the_command_line_names(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    with FakeEndpoint(models=("my-model",)) as endpoint:
        result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight",
                     f"--agentgym-base-url={endpoint.base_url}", "--agentgym-model=my-model")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"  model primary: openai my-model at {endpoint.base_url}: healthy",
        f"  would use: primary openai my-model at {endpoint.base_url}",
    ])
    assert "reference" not in result.stdout.str()  # the node's own chain is replaced, as in a run


def test_preflight_without_a_usable_endpoint_says_so_and_exits_1(pytester):
    make_project(pytester)
    port = free_port()
    node = write_node(pytester, "down", f"    - {{kind: ollama, url: 'http://127.0.0.1:{port}', model: 'qwen3:8b'}}\n"
                                        "    - {kind: vllm, model: policy}\n")
    result = run(pytester, f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        f"  model primary: ollama qwen3:8b at http://127.0.0.1:{port}: unhealthy: connection refused",
        "  model fallback 1: vllm policy: unusable: no checkpoint; pass --agentgym-checkpoint PATH",
        "  would use: nothing, no endpoint of the chain is usable*",
        "preflight: 1 problem(s)",
    ])


# -- pytest-agentgym envs --node ------------------------------------------------------------


def envs_command(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_agentgym", "envs", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def rows(stdout: str) -> dict[str, list[str]]:
    """ENVIRONMENT -> [category, url, health] from the table."""
    found = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 4 and cells[3] in HEALTHS:
            found[cells[0]] = cells[1:4]
    return found


@pytest.mark.parametrize("mode, wordle, textcraft", [
    ("auto", "up", "spawnable"),        # attach to what answers, spawn the rest
    ("attach", "up", "down"),           # everything must answer on its port
    ("spawn", "spawnable", "spawnable"),  # always fresh servers; the running one is not used
])
def test_envs_node_lists_what_that_node_would_attach_to_spawn_or_skip(tmp_path, embedded_server, mode, wordle,
                                                                       textcraft):
    lmrlgym = embedded_server("lmrlgym")
    unused = free_port()
    nodes = tmp_path / "configs" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "field.yaml").write_text(
        "name: field\nmodel: {endpoints: [{kind: reference}]}\n"
        f"envs:\n  servers: {mode}\n  skip: [BabyAI, ALFWorld]\n"
        f"  overrides:\n    Maze: {{url: 'http://127.0.0.1:{lmrlgym.port}'}}\n"
        f"    Wordle: {{port: {lmrlgym.port}}}\n    TextCraft: {{port: {unused}}}\n")
    result = envs_command(tmp_path, "--node", "field", "--timeout", "2")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"node field ({nodes / 'field.yaml'}): servers {mode} (")
    table = rows(result.stdout)
    assert table["Maze"] == ["lightweight", f"http://127.0.0.1:{lmrlgym.port}/maze", "up"]  # its envs url
    assert table["Wordle"][2] == wordle
    assert table["TextCraft"][2] == textcraft
    assert table["BabyAI"][2] == table["ALFWorld"][2] == "skipped"
    if mode == "spawn":
        assert table["Wordle"][1] == "http://127.0.0.1:<free-port>/wordle"
    else:
        assert table["Wordle"][1] == f"http://127.0.0.1:{lmrlgym.port}/wordle"
        assert table["TextCraft"][1] == f"http://127.0.0.1:{unused}"
    if mode == "attach":
        assert f"servers mode attach: start it on port {unused}" in result.stdout
    assert "2 skipped" in result.stdout.splitlines()[-1]


def test_envs_node_accepts_a_path_and_the_shipped_names(tmp_path):
    shipped = envs_command(tmp_path, "--node", "4090", "--timeout", "0.3")
    assert shipped.returncode == 0, shipped.stderr
    assert "servers auto" in shipped.stdout.splitlines()[0]
    assert rows(shipped.stdout)["SciWorld"][2] == "skipped"
    profile = tmp_path / "mine.yml"
    profile.write_text("name: mine\nmodel: {endpoints: [{kind: reference}]}\nenvs: {servers: spawn, skip: [Maze]}\n")
    by_path = envs_command(tmp_path, "--node", str(profile), "--timeout", "0.3")
    assert by_path.returncode == 0, by_path.stderr
    assert rows(by_path.stdout)["Maze"][2] == "skipped" and rows(by_path.stdout)["WebShop"][2] == "down"


def test_envs_with_an_unknown_node_lists_the_known_ones_and_exits_2(tmp_path):
    (tmp_path / "configs" / "nodes").mkdir(parents=True)
    (tmp_path / "configs" / "nodes" / "bench.yaml").write_text("name: bench\nmodel: {endpoints: [{kind: reference}]}\n")
    result = envs_command(tmp_path, "--node", "4080")
    assert result.returncode == 2
    assert result.stderr.startswith("pytest-agentgym envs --node 4080: unknown node; known nodes: 4090, bench, cpu, gpu, local")
    bad_mode = tmp_path / "bad.yaml"
    bad_mode.write_text("name: bad\nmodel: {endpoints: [{kind: reference}]}\nenvs: {servers: sometimes}\n")
    result = envs_command(tmp_path, "--node", str(bad_mode))
    assert result.returncode == 2 and "envs.servers is 'sometimes'" in result.stderr and "'auto'" in result.stderr
    both = envs_command(tmp_path, "--node", "4090", "--config", str(bad_mode))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


# -- notices shown once per machine -------------------------------------------------------


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


def test_preflight_from_the_environment_variable_checks_and_runs_no_episode(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    monkeypatch.setenv("AGENTGYM_PREFLIGHT", "1")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=looked")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["agentgym preflight: node testnode*", "preflight: ready"])
    assert not (pytester.path / "reports" / "looked" / "episodes.jsonl").exists()
