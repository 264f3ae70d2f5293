"""Endpoint kinds, health checks, the fallback chain, node profiles, and launching vLLM
(without vLLM: that is tests/model/test_vllm_slow.py; the process launcher underneath
is tests/process/test_managed_server.py)."""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import psutil
import pytest
import yaml

from helpers import REPO
from helpers.model_faults import FakeEndpoint, ok
from pytest_agentgym.model.endpoint_settings import EndpointConfigError, ModelSettings, parse_endpoint
from pytest_agentgym.model.endpoints import NoEndpointAvailable, choose_endpoint, probe
from pytest_agentgym.model.vllm import LaunchError, VLLMServer, vllm_command
from pytest_agentgym.model.vllm_options import VLLMOptions
from pytest_agentgym.process.managed import free_port

NODES = REPO / "pytest_agentgym" / "configs" / "nodes"


def settings(*endpoints, **extra) -> ModelSettings:
    return ModelSettings.from_mapping({"endpoints": list(endpoints), **extra})


# --------------------------------------------------------------------- parsing


def test_tensorzero_names_and_base_url():
    short = parse_endpoint({"kind": "tensorzero", "url": "http://localhost:3030/", "model_name": "qwen35_9b"})
    assert short.model == "tensorzero::model_name::qwen35_9b"
    assert short.base_url == "http://localhost:3030/openai/v1"
    function = parse_endpoint({"kind": "tensorzero", "url": "http://gw:3030", "function_name": "agent"})
    assert function.model == "tensorzero::function_name::agent"
    full = parse_endpoint({"kind": "tensorzero", "url": "http://gw:3030", "model": "tensorzero::model_name::x"})
    assert full.model == "tensorzero::model_name::x"


@pytest.mark.parametrize("entry,message", [
    ({"kind": "tensorzero", "url": "http://gw:3030", "model": "qwen35_9b"}, "model_name: qwen35_9b"),
    ({"kind": "tensorzero", "url": "http://gw:3030", "model_name": "a", "function_name": "b"},
     "exactly one of"),
    ({"kind": "ollama", "model": "qwen3:8b"}, r"model.endpoints\[0\].url is required"),
    ({"kind": "ollama", "url": "http://localhost:11434"}, r"model.endpoints\[0\].model is required"),
    ({"kind": "openai", "url": "localhost:8000/v1", "model": "m"}, "must start with http"),
    ({"kind": "llama", "url": "http://x"}, "kind must be one of"),
    ({"kind": "ollama", "url": "http://x", "model": "m", "temperature": 1}, "unknown key.*temperature"),
    ({"kind": "reference", "policy": "smart"}, "policy must be reference or random"),
    ({"kind": "vllm", "url": "http://127.0.0.1:8000"}, "model is required to attach"),
])
def test_bad_endpoint_entries_name_the_key_and_the_fix(entry, message):
    with pytest.raises(EndpointConfigError, match=message):
        parse_endpoint(entry)


def test_base_urls_of_each_kind():
    assert parse_endpoint({"kind": "openai", "url": "http://h:8000/v1", "model": "m"}).base_url == "http://h:8000/v1"
    assert parse_endpoint({"kind": "ollama", "url": "http://h:11434", "model": "m"}).base_url == "http://h:11434/v1"
    attached = parse_endpoint({"kind": "vllm", "url": "http://h:8000", "model": "m"})
    assert attached.base_url == "http://h:8000/v1" and not attached.launched
    assert parse_endpoint({"kind": "reference"}).launched


def test_settings_errors_name_the_key():
    with pytest.raises(EndpointConfigError, match="model.endpoints must be a non-empty list"):
        ModelSettings.from_mapping({"endpoints": []})
    with pytest.raises(EndpointConfigError, match="unknown key.*timeout"):
        ModelSettings.from_mapping({"endpoints": [{"kind": "reference"}], "timeout": 3})
    with pytest.raises(EndpointConfigError, match="model.request_timeout must be positive"):
        ModelSettings.from_mapping({"endpoints": [{"kind": "reference"}], "request_timeout": 0})
    with pytest.raises(EndpointConfigError, match="vllm: unknown key.*gpu_mem"):
        ModelSettings.from_mapping({"endpoints": [{"kind": "reference"}]}, vllm={"gpu_mem": 0.5})


# --------------------------------------------------------------------- node profiles


def load(name: str) -> dict:
    return yaml.safe_load((NODES / f"{name}.yaml").read_text())


def test_4090_profile_is_tensorzero_then_ollama():
    profile = load("4090")
    model = ModelSettings.from_profile(profile)
    primary, fallback = model.endpoints
    assert (primary.kind, primary.url, primary.model) == (
        "tensorzero", "http://localhost:3030", "tensorzero::model_name::qwen35_9b")
    assert (fallback.kind, fallback.url, fallback.model) == ("ollama", "http://localhost:11434", "qwen3:8b")
    assert (model.sampling.temperature, model.sampling.max_tokens) == (0.7, 1024)
    assert (model.request_timeout, model.retries, model.api_key_env) == (120, 3, None)
    assert profile["limits"] == {"max_rounds": 15, "episode_timeout": 300, "concurrency": 1}
    assert profile["nats"]["url"] == "nats://localhost:4222"
    assert profile["envs"]["servers"] == "auto"


def test_local_profile_is_the_reference_agent_with_spawned_servers():
    profile = load("local")
    (endpoint,) = ModelSettings.from_profile(profile).endpoints
    assert endpoint.kind == "reference" and endpoint.launched
    assert profile["limits"]["concurrency"] == 4 and profile["limits"]["episode_timeout"] == 60
    assert profile["nats"]["url"] is None  # off on a laptop; --agentgym-nats turns it on
    assert profile["envs"]["servers"] == "spawn"


def test_gpu_profile_launches_vllm_on_the_checkpoint():
    profile = load("gpu")
    model = ModelSettings.from_profile(profile).with_checkpoint("ckpt/step-1200")
    (endpoint,) = model.endpoints
    assert endpoint.kind == "vllm" and endpoint.checkpoint == "ckpt/step-1200"
    assert profile["limits"]["concurrency"] == 32
    argv = vllm_command(endpoint.checkpoint, model.vllm, port=8123)
    assert argv[1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "ckpt/step-1200"]
    for flag in ("--max-model-len", "--gpu-memory-utilization", "--tensor-parallel-size"):
        assert flag in argv


# --------------------------------------------------------------------- health and the chain


def test_fallback_is_chosen_when_the_primary_is_down_and_the_notes_say_so():
    dead = f"http://127.0.0.1:{free_port()}"
    with FakeEndpoint(script=[ok("Action:\nfrom the fallback")], ollama_tags=("qwen3:8b",)) as fake:
        model = settings({"kind": "tensorzero", "url": dead, "model_name": "qwen35_9b"},
                         {"kind": "ollama", "url": fake.url, "model": "qwen3:8b"})
        started = time.monotonic()
        chosen = choose_endpoint(model)
        assert time.monotonic() - started < 6
        assert chosen.kind == "ollama" and chosen.base_url == fake.url + "/v1"
        assert chosen.notes == (
            f"primary tensorzero at {dead} unhealthy (connection refused)",
            f"using fallback ollama qwen3:8b at {fake.url}",
        )

        async def talk():
            async with model.client(chosen) as client:
                return await client.chat([{"role": "user", "content": "hi"}])

        reply = asyncio.run(talk())
    assert reply.text == "Action:\nfrom the fallback"
    assert fake.chat_requests()[0].body["model"] == "qwen3:8b"


def test_healthy_primary_is_used_without_notes():
    with FakeEndpoint() as fake:
        chosen = choose_endpoint(settings({"kind": "tensorzero", "url": fake.url, "model_name": "q"}))
    assert chosen.kind == "tensorzero" and chosen.notes == ()
    assert chosen.base_url == fake.url + "/openai/v1"
    assert [r.path for r in fake.requests] == ["/status", "/openai/v1/chat/completions"]
    proof = fake.chat_requests()[0].body  # the route is proven by one real chat with the model, one token
    assert (proof["model"], proof["max_tokens"], proof["stream"]) == ("tensorzero::model_name::q", 1, False)
    assert chosen.checked_by == "GET /status, then a one-token chat"


def test_ollama_without_the_model_is_unhealthy_with_the_pull_command():
    with FakeEndpoint(ollama_tags=("llama3:latest",)) as fake:
        health = probe(parse_endpoint({"kind": "ollama", "url": fake.url, "model": "qwen3:8b"}))
        bare = probe(parse_endpoint({"kind": "ollama", "url": fake.url, "model": "llama3"}))
    assert not health.ok
    assert health.reason == "model qwen3:8b not pulled; run `ollama pull qwen3:8b`"
    assert bare.ok  # "llama3" means "llama3:latest"


def test_openai_health_checks_the_model_list():
    with FakeEndpoint(models=("served-a", "served-b")) as fake:
        good = probe(parse_endpoint({"kind": "openai", "url": fake.base_url, "model": "served-b"}))
        bad = probe(parse_endpoint({"kind": "openai", "url": fake.base_url, "model": "other"}))
    assert good.ok
    assert not bad.ok and bad.reason == "model other is not served there (it serves served-a, served-b)"


def test_vllm_attach_checks_health_then_models():
    with FakeEndpoint(models=("policy",)) as fake:
        assert probe(parse_endpoint({"kind": "vllm", "url": fake.url, "model": "policy"})).ok
    with FakeEndpoint(health_status=503) as fake:
        health = probe(parse_endpoint({"kind": "vllm", "url": fake.url, "model": "policy"}))
    assert not health.ok and health.reason == "GET /health answered HTTP 503"


def test_a_hanging_health_check_is_bounded():
    with FakeEndpoint(hang_health=True) as fake:
        started = time.monotonic()
        health = probe(parse_endpoint({"kind": "tensorzero", "url": fake.url, "model_name": "q"}), timeout=1.0)
        elapsed = time.monotonic() - started
    assert not health.ok and health.reason == "no answer within 1 s"
    assert elapsed < 4


def test_no_healthy_endpoint_lists_every_reason():
    first, second = (f"http://127.0.0.1:{free_port()}" for _ in range(2))
    model = settings({"kind": "tensorzero", "url": first, "model_name": "q"},
                     {"kind": "ollama", "url": second, "model": "qwen3:8b"},
                     {"kind": "vllm"})  # no checkpoint given
    with pytest.raises(NoEndpointAvailable) as caught:
        choose_endpoint(model)
    notes = caught.value.notes
    assert notes[0] == f"primary tensorzero at {first} unhealthy (connection refused)"
    assert notes[1] == f"fallback 1 ollama at {second} unhealthy (connection refused)"
    assert notes[2].startswith("fallback 2 vllm failed to start") and "--agentgym-checkpoint" in notes[2]


def test_a_named_but_unset_key_variable_skips_that_endpoint(monkeypatch):
    monkeypatch.delenv("AGENTGYM_UNSET_KEY", raising=False)
    with FakeEndpoint() as fake:
        model = settings({"kind": "openai", "url": fake.base_url, "model": "fake-model",
                          "api_key_env": "AGENTGYM_UNSET_KEY"},
                         {"kind": "ollama", "url": fake.url, "model": "qwen3:8b"})
        chosen = choose_endpoint(model)
    assert chosen.kind == "ollama"
    assert "AGENTGYM_UNSET_KEY" in chosen.notes[0] and "unusable" in chosen.notes[0]


def test_reference_kind_is_launched_and_stopped(tmp_path):
    chosen = choose_endpoint(settings({"kind": "reference", "seed": 3}), log_dir=tmp_path)
    try:
        pid = chosen.process.pid
        assert chosen.kind == "reference" and chosen.model == "reference"
        answer = httpx.get(chosen.base_url + "/models", timeout=5).json()
        assert [m["id"] for m in answer["data"]] == ["reference", "random"]
        assert (tmp_path / "reference-agent.log").exists()
    finally:
        chosen.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_vllm_options_and_command():
    options = VLLMOptions.from_mapping({
        "python": "/opt/vllm/bin/python", "served_model_name": "policy", "max_model_len": 4096,
        "gpu_memory_utilization": 0.8, "tensor_parallel_size": 2, "data_parallel_size": 1, "seed": 7,
        "enforce_eager": True, "extra_args": "--enable-prefix-caching --swap-space 4"})
    argv = vllm_command("/ckpt/step-1", options, port=9001)
    assert argv == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server",
                    "--model", "/ckpt/step-1", "--host", "127.0.0.1", "--port", "9001",
                    "--served-model-name", "policy", "--max-model-len", "4096",
                    "--gpu-memory-utilization", "0.8", "--tensor-parallel-size", "2",
                    "--data-parallel-size", "1", "--seed", "7", "--logprobs-mode", "raw_logprobs",
                    "--enforce-eager", "--enable-prefix-caching", "--swap-space", "4"]


def test_vllm_python_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTGYM_VLLM_PYTHON", "/somewhere/python")
    assert VLLMOptions().interpreter() == "/somewhere/python"
    assert VLLMOptions(python="/explicit/python").interpreter() == "/explicit/python"
    monkeypatch.delenv("AGENTGYM_VLLM_PYTHON")
    assert VLLMOptions().interpreter() == sys.executable


def test_vllm_server_refuses_a_missing_checkpoint_or_an_interpreter_without_vllm(tmp_path):
    with pytest.raises(LaunchError, match="does not exist"):
        VLLMServer(tmp_path / "nope", VLLMOptions(), log_path=tmp_path / "v.log").start()
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    # an "interpreter" that fails every import check
    with pytest.raises(LaunchError, match="vLLM is not importable by /bin/false"):
        VLLMServer(checkpoint, VLLMOptions(python="/bin/false"), log_path=tmp_path / "v.log").start()
    with pytest.raises(LaunchError, match="vLLM is not importable by /no/such/python"):
        VLLMServer(checkpoint, VLLMOptions(python="/no/such/python"), log_path=tmp_path / "v.log").start()
