"""--agentgym-endpoint KIND=URL: a shipped profile's endpoints pointed elsewhere, keeping
the profile's models, its chain and its fallbacks (config/options.py parse_endpoints,
model/endpoint_settings.py override_urls, config/settings.py), shown in the header and
kept in run.json with the URLs' credentials hidden. The TensorZero gateway the
``tensorzero`` package runs in-process is tests/model/test_tensorzero_gateway.py."""

from __future__ import annotations

import json
import subprocess
import sys

import httpcore  # noqa: F401 - see the note at agent()
import pytest

from helpers.model_faults import FakeEndpoint
from helpers.run_dirs import read_episodes
from helpers.usage_errors import says, settings_refusal
from pytest_agentgym.config.options import parse_endpoints
from pytest_agentgym.model.endpoint_settings import ModelSettings
from pytest_agentgym.model.endpoints import choose_endpoint
from pytest_agentgym.plugin.options import resolve_settings
from pytest_agentgym.process.health import HEALTH_ENDPOINT, free_port
from pytest_agentgym.process.managed import ManagedServer

pytestmark = pytest.mark.heavy

SECRETS = ("secret", "s3cret")


def resolved(pytester: pytest.Pytester, *args: str):
    return resolve_settings(pytester.parseconfig(*args))


def chain(settings) -> list[tuple[str, str | None, str | None]]:
    return [(e.kind, e.url, e.model) for e in ModelSettings.from_profile(settings.profile).endpoints]


# --------------------------------------------------------------------- what the option takes


def test_pairs_come_comma_separated_repeated_or_one_a_line():
    both = (("tensorzero", "http://gpu:3030"), ("ollama", "http://127.0.0.1:11434"))
    assert parse_endpoints("tensorzero=http://gpu:3030/,ollama=http://127.0.0.1:11434") == both
    assert parse_endpoints(["tensorzero=http://gpu:3030", "ollama=http://127.0.0.1:11434"]) == both
    assert parse_endpoints("\n  tensorzero=http://gpu:3030\n  ollama=http://127.0.0.1:11434\n") == both
    assert parse_endpoints("TensorZero=http://gpu:3030") == (("tensorzero", "http://gpu:3030"),)
    assert parse_endpoints("1=http://gpu:11434") == (("1", "http://gpu:11434"),)


@pytest.mark.parametrize("text,message", [
    ("tensorzero", "'tensorzero' is not KIND=URL; write e.g. tensorzero=http://gpu:3030*"),
    ("llama=http://gpu:3030", "'llama' in 'llama=http://gpu:3030' is neither an endpoint kind (openai, tensorzero, "
                              "ollama, vllm, reference) nor a position in the chain*"),
    ("tensorzero=gpu:3030", "tensorzero=gpu:3030: the URL must start with http:// or https:// and name a host*"),
    ("tensorzero=ftp://u:secret@gpu", "tensorzero=ftp://***@gpu: the URL must start with http://*"),
    ("ollama=http://a:1,ollama=http://b:2", "ollama is given twice (http://a:1 and http://b:2)*"),
    (" , ", "expected KIND=URL, e.g. tensorzero=http://gpu:3030,ollama=http://127.0.0.1:11434"),
])
def test_a_malformed_pair_says_what_to_write(text, message):
    with pytest.raises(ValueError) as refused:
        parse_endpoints(text)
    assert says(str(refused.value), [message]), str(refused.value)
    assert not any(secret in str(refused.value) for secret in SECRETS)


# --------------------------------------------------------------------- the profile's chain, kept


def test_the_4090_chain_keeps_its_models_and_its_order(pytester):
    settings = resolved(pytester, "--agentgym-node=4090", "--agentgym-endpoint=tensorzero=http://gpu:3030",
                        "--agentgym-endpoint", "ollama=http://127.0.0.1:11500")
    assert settings.node == "4090"  # the suites' 4090 floor gates are keyed by the node's name
    assert chain(settings) == [("tensorzero", "http://gpu:3030", "tensorzero::model_name::qwen35_9b"),
                               ("ollama", "http://127.0.0.1:11500", "qwen3:8b")]
    assert [o.describe() for o in settings.endpoint_overrides] == [
        "endpoint tensorzero overridden: http://gpu:3030 (--agentgym-endpoint)",
        "endpoint ollama overridden: http://127.0.0.1:11500 (--agentgym-endpoint)"]
    untouched = resolved(pytester, "--agentgym-node=4090")
    assert chain(untouched)[0][1] == "http://localhost:3030" and untouched.endpoint_overrides == ()


def test_a_position_names_one_endpoint_and_a_launched_one_is_attached_to(pytester):
    settings = resolved(pytester, "--agentgym-node=local", "--agentgym-endpoint=0=http://127.0.0.1:8100")
    assert chain(settings) == [("reference", "http://127.0.0.1:8100", "reference")]
    assert not ModelSettings.from_profile(settings.profile).endpoints[0].launched
    assert settings.endpoint_overrides[0].describe() == (
        "endpoint primary (reference) overridden: http://127.0.0.1:8100 (--agentgym-endpoint)")


def test_the_fallback_still_takes_over_from_an_overridden_primary(pytester):
    dead = f"http://127.0.0.1:{free_port()}"
    with FakeEndpoint(ollama_tags=("qwen3:8b",)) as ollama:
        settings = resolved(pytester, "--agentgym-node=4090", f"--agentgym-endpoint=tensorzero={dead},"
                                                              f"ollama={ollama.url}")
        chosen = choose_endpoint(ModelSettings.from_profile(settings.profile))
    assert chosen.kind == "ollama" and chosen.base_url == ollama.url + "/v1" and chosen.model == "qwen3:8b"
    assert chosen.notes == (f"primary tensorzero at {dead} unhealthy (connection refused)",
                            f"using fallback ollama qwen3:8b at {ollama.url}")
    assert [r.path for r in ollama.requests] == ["/api/tags", "/v1/chat/completions"]


def test_the_header_names_the_variable_or_ini_key_it_came_from(pytester, monkeypatch):
    monkeypatch.setenv("AGENTGYM_ENDPOINT", "tensorzero=http://gpu:3030")
    from_variable = resolved(pytester, "--agentgym-node=4090")
    assert from_variable.endpoint_overrides[0].describe() == (
        "endpoint tensorzero overridden: http://gpu:3030 (environment variable AGENTGYM_ENDPOINT)")
    flag_wins = resolved(pytester, "--agentgym-node=4090", "--agentgym-endpoint=ollama=http://127.0.0.1:11500")
    assert [o.kind for o in flag_wins.endpoint_overrides] == ["ollama"]  # the option as a whole, not merged
    monkeypatch.delenv("AGENTGYM_ENDPOINT")
    pytester.makeini("[pytest]\nagentgym_endpoint =\n    tensorzero=http://gpu:3030\n    ollama=http://gpu:11434\n")
    from_ini = resolved(pytester, "--agentgym-node=4090")
    assert chain(from_ini)[1] == ("ollama", "http://gpu:11434", "qwen3:8b")
    assert from_ini.endpoint_overrides[1].given_by == "ini key agentgym_endpoint"


# --------------------------------------------------------------------- usage errors


def test_a_kind_the_profile_has_none_of_names_the_kinds_it_has(pytester):
    refused = settings_refusal(pytester, "--agentgym-node=4090", "--agentgym-endpoint=vllm=http://gpu:8000")
    assert says(refused, ["--agentgym-endpoint: vllm=http://gpu:8000: node 4090 (*4090.yaml) has no vllm endpoint; "
                          "its endpoints are tensorzero (0, the primary), ollama (1): name one of those kinds, "
                          "or a position (0=URL for the primary)"]), refused


def test_a_kind_that_repeats_asks_for_a_position(pytester):
    node = pytester.path / "two.yaml"
    node.write_text("name: two\nmodel:\n  endpoints:\n"
                    "    - {kind: ollama, url: 'http://localhost:11434', model: 'qwen3:8b'}\n"
                    "    - {kind: ollama, url: 'http://localhost:11435', model: 'qwen3:4b'}\n")
    refused = settings_refusal(pytester, f"--agentgym-node={node}", "--agentgym-endpoint=ollama=http://gpu:11434")
    assert says(refused, ["*has 2 ollama endpoints (positions 0, 1); name one by its position, e.g. 1=URL"]), refused
    settings = resolved(pytester, f"--agentgym-node={node}", "--agentgym-endpoint=1=http://gpu:11434")
    assert chain(settings) == [("ollama", "http://localhost:11434", "qwen3:8b"),
                               ("ollama", "http://gpu:11434", "qwen3:4b")]


@pytest.mark.parametrize("args,message", [
    (["--agentgym-endpoint=2=http://gpu:1"], "--agentgym-endpoint: 2=http://gpu:1: node 4090 (*) has 2 endpoint(s), "
                                             "positions 0 to 1: tensorzero (0, the primary), ollama (1)"),
    (["--agentgym-endpoint=tensorzero=http://a:1,0=http://b:2"],
     "*0=http://b:2: the primary endpoint (tensorzero) is already pointed at http://a:1 by tensorzero=...; "
     "give each endpoint one URL"),
    (["--agentgym-endpoint=tensorzero=http://gpu:3030", "--agentgym-base-url=http://gpu:8000/v1"],
     "--agentgym-endpoint and --agentgym-base-url do not go together: --agentgym-base-url replaces the whole "
     "chain with one endpoint; drop one of them"),
    (["--agentgym-endpoint=tensorzero=http://gpu:3030", "--agentgym-queue=nats://127.0.0.1:4222"],
     "--agentgym-endpoint and --agentgym-queue do not go together: *the endpoints of their own node profiles*"),
])
def test_what_cannot_be_done_with_the_chain_is_a_usage_error(pytester, args, message):
    refused = settings_refusal(pytester, "--agentgym-node=4090", *args)
    assert says(refused, [message]), refused


def test_a_launched_vllm_given_a_url_needs_its_served_name(pytester):
    node = pytester.path / "bare.yaml"
    node.write_text("name: bare\nmodel: {endpoints: [{kind: vllm}]}\n")  # launched on --agentgym-checkpoint
    refused = settings_refusal(pytester, f"--agentgym-node={node}", "--agentgym-endpoint=vllm=http://u:secret@gpu:8000")
    assert says(refused, ["--agentgym-endpoint: vllm=http://***@gpu:8000: *model.endpoints[[]0[]].model is required "
                          "to attach to a running vLLM at http://***@gpu:8000*"]), refused
    assert "secret" not in refused


def test_a_bad_variable_names_the_variable(pytester, monkeypatch):
    monkeypatch.setenv("AGENTGYM_ENDPOINT", "ollama")
    refused = settings_refusal(pytester, "--agentgym-node=4090")
    assert says(refused, ["environment variable AGENTGYM_ENDPOINT: 'ollama' is not KIND=URL*"]), refused


# --------------------------------------------------------------------- a run: header, run.json, redaction


NODE = """\
name: overnode
model:
  endpoints:
    - kind: reference          # launched, unless --agentgym-endpoint gives it a URL
    - {kind: openai, url: 'http://127.0.0.1:9/v1', model: reference}
limits: {max_rounds: 15, episode_timeout: 60, concurrency: 2}
envs: {servers: spawn}
"""


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """The reference agent as a running server of its own, for the chain to attach to.
    (httpcore is imported at the top of this module: a pytester test that imported it
    first would have it dropped from sys.modules at its end, and the probes of this
    fixture would then raise the second copy's errors, which httpx does not map.)"""
    port = free_port()
    server = ManagedServer("reference agent", port=port, health=HEALTH_ENDPOINT, startup_timeout=60,
                           command=[sys.executable, "-m", "pytest_agentgym", "reference-agent", "--port", "{port}"],
                           log_path=tmp_path_factory.mktemp("agent") / "agent.log", label="reference agent")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pointed(tmp_path_factory, agent):
    """A run of a node whose launched reference agent is pointed at ``agent`` and whose
    fallback elsewhere, both URLs with credentials; then the same with --collect-only."""
    root = tmp_path_factory.mktemp("pointed")
    (root / "node.yaml").write_text(NODE)
    (root / "suites").mkdir()
    (root / "suites" / "maze.yaml").write_text("environment: Maze\ntasks: 0-1\n")
    primary = f"http://alice:secret@127.0.0.1:{agent.port}?api_key=s3cret"
    fallback = "http://bob:s3cret@127.0.0.1:9/v1"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites", "--agentgym-node=node.yaml",
            f"--agentgym-endpoint=reference={primary},1={fallback}", "--agentgym-no-nats"]
    ran = subprocess.run([*args, "--agentgym-run-id=pointed"], cwd=root, capture_output=True, text=True,
                         timeout=240)
    listed = subprocess.run([*args, "--agentgym-run-id=listed", "--collect-only"], cwd=root,
                            capture_output=True, text=True, timeout=120)
    return {"ran": ran, "listed": listed, "run_dir": root / "reports" / "pointed",
            "shown": f"http://***@127.0.0.1:{agent.port}"}


def test_a_run_says_and_keeps_where_its_endpoints_were_pointed(pointed):
    ran, shown, run_dir = pointed["ran"], pointed["shown"], pointed["run_dir"]
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output
    lines = output.splitlines()
    assert f"agentgym: endpoint reference overridden: {shown}?api_key=*** (--agentgym-endpoint)" in lines
    assert "agentgym: endpoint fallback 1 (openai) overridden: http://***@127.0.0.1:9/v1 (--agentgym-endpoint)" \
        in lines
    assert f"agentgym: model reference via reference at {shown}/v1?api_key=*** (healthy: GET /health, then " \
        "a one-token chat)" in lines  # the agent answers the route's proof (model/reference/route_check.py)
    assert f"'--agentgym-endpoint=reference={shown}?api_key=***,1=http://***@127.0.0.1:9/v1'" in output
    info = json.loads((run_dir / "run.json").read_text())
    assert info["endpoint"] == f"{shown}/v1?api_key=***"  # the running agent, not one the run launched
    assert info["settings"]["endpoint_overrides"] == [
        {"endpoint": "reference", "kind": "reference", "position": 0, "url": f"{shown}?api_key=***",
         "given_by": "--agentgym-endpoint"},
        {"endpoint": "fallback 1 (openai)", "kind": "openai", "position": 1, "url": "http://***@127.0.0.1:9/v1",
         "given_by": "--agentgym-endpoint"}]
    assert [e["error"] for e in read_episodes(run_dir)] == [None, None]
    written = [output] + [path.read_text(errors="replace") for path in run_dir.rglob("*") if path.is_file()]
    assert [secret for secret in SECRETS for text in written if secret in text] == []


def test_collect_only_names_the_overridden_url_without_contacting_it(pointed):
    listed, shown = pointed["listed"], pointed["shown"]
    assert listed.returncode == 0, listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()
    assert f"agentgym: endpoint reference overridden: {shown}?api_key=*** (--agentgym-endpoint)" in lines
    assert f"agentgym: model endpoint reference reference at {shown}?api_key=*** (not contacted)" in lines
    assert not any(secret in listed.stdout + listed.stderr for secret in SECRETS)


def test_an_attached_reference_endpoint_launches_no_agent(pointed):
    assert pointed["ran"].returncode == 0
    assert not (pointed["run_dir"] / "logs" / "reference-agent.log").exists()
