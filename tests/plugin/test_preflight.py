"""--agentgym-preflight (and --agentgym-dry-run, its habitual name) and
--agentgym-list-envs: the model chain, environment servers and suites checked without
an episode being played. Model endpoints are real HTTP servers on loopback
(tests/helpers/model_faults.py), environment servers real embedded-server processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.model_faults import FakeEndpoint
from helpers.projects import make_project, run, suite
from pytest_agentgym.process.managed import free_port

pytestmark = pytest.mark.heavy


def test_preflight_and_list_envs_check_without_running_an_episode(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "agentgym preflight: node testnode*",
        "  model primary: reference*: launchable*",
        "  would use: primary reference*",
        "  env Maze: http://127.0.0.1:<free-port>/maze: spawnable*",  # servers: spawn
        "preflight: ready",
    ])
    listed = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-list-envs")
    assert listed.ret == 0
    listed.stdout.fnmatch_lines(["ENVIRONMENT*CATEGORY*URL*HEALTH*", "BabyAI*lightweight*<free-port>*spawnable*",
                                 "*SciWorld*heavy*"])
    assert not (pytester.path / "reports").exists()


def test_preflight_names_a_suite_that_would_not_load(pytester):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-3\n")
    suite(pytester, "broken", "environment: Maze\ntasks: [0, 1\n")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["  suite *suites/broken.yaml: not valid YAML*", "preflight: 1 problem(s)"])


def test_preflight_fails_when_nothing_can_serve_the_model(pytester):
    make_project(pytester)
    node = pytester.path / "down.yaml"
    node.write_text("name: down\nmodel: {endpoints: [{kind: openai, url: 'http://127.0.0.1:9/v1', model: m}]}\n")
    result = run(pytester, "--agentgym-node=" + str(node), "--agentgym-preflight")
    assert result.ret == 3  # a run would be NOT PLAYED, exit 3
    result.stdout.fnmatch_lines(["  model primary: openai m at http://127.0.0.1:9/v1: unhealthy: *",
                                 "  would use: nothing*", "preflight: * problem(s)"])


def write_node(pytester: pytest.Pytester, name: str, endpoints: str) -> Path:
    """A node with these model endpoints (YAML list items) and the embedded environments only."""
    path = pytester.path / f"{name}.yaml"
    path.write_text(f"name: {name}\nmodel:\n  endpoints:\n{endpoints}"
                    "envs: {servers: spawn, skip: [ALFWorld, SQLGym, WebShop, SciWorld, AgentBench-ALFWorld, AgentBench-WebShop]}\n")
    return path


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
        f"  model fallback 1: ollama qwen3:8b at {ollama.url}: healthy (GET /api/tags, then a one-token chat)",
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
        f"  model fallback 1: openai m at {served.base_url}: healthy (GET /models, then a one-token chat)",
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
        f"  model primary: openai my-model at {endpoint.base_url}: healthy (GET /models, then a one-token chat)",
        f"  would use: primary openai my-model at {endpoint.base_url}",
    ])
    assert "reference" not in result.stdout.str()  # the node's own chain is replaced, as in a run


def test_preflight_without_a_usable_endpoint_says_so_and_exits_3(pytester):
    make_project(pytester)
    port = free_port()
    node = write_node(pytester, "down", f"    - {{kind: ollama, url: 'http://127.0.0.1:{port}', model: 'qwen3:8b'}}\n"
                                        "    - {kind: vllm, model: policy}\n")
    result = run(pytester, f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 3
    result.stdout.fnmatch_lines([
        f"  model primary: ollama qwen3:8b at http://127.0.0.1:{port}: unhealthy: connection refused",
        "  model fallback 1: vllm policy: unusable: no checkpoint; pass --agentgym-checkpoint PATH",
        "  would use: nothing, no endpoint of the chain is usable*",
        "preflight: 1 problem(s)",
    ])


def test_preflight_from_the_environment_variable_checks_and_runs_no_episode(pytester, monkeypatch):
    node = make_project(pytester)
    suite(pytester, "maze", "environment: Maze\ntasks: 0-1\n")
    monkeypatch.setenv("AGENTGYM_PREFLIGHT", "1")
    result = run(pytester, "suites", f"--agentgym-node={node}", "--agentgym-run-id=looked")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["agentgym preflight: node testnode*", "preflight: ready"])
    assert not (pytester.path / "reports" / "looked" / "episodes.jsonl").exists()


def test_preflight_names_a_broken_file_where_the_ini_says_suites_are(pytester):
    """A file of an ``agentgym_suites`` folder is a suite even when it does not look like one
    (plugin/suite_places.py): collection stops at it, so preflight names it too."""
    node = make_project(pytester)
    pytester.makeini("[pytest]\nagentgym_suites = evals\n")
    (pytester.path / "evals").mkdir()
    (pytester.path / "evals" / "maze.yaml").write_text("environment: Maze\ntasks: 0-3\n")
    (pytester.path / "evals" / "wordle.yaml").write_text("tasks: 0-3\n")  # no environment: no suite by its looks
    result = run(pytester, "evals", f"--agentgym-node={node}", "--agentgym-preflight")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["  suite *evals/wordle.yaml: missing key 'environment'*", "preflight: 1 problem(s)"])
    collected = run(pytester, "evals", f"--agentgym-node={node}", "--collect-only")  # what a run would meet
    assert collected.ret == pytest.ExitCode.USAGE_ERROR, collected.stdout.str()
