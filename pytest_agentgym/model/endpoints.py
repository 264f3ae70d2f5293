"""Endpoint kinds, their health checks, and the fallback chain.

A node profile's ``model:`` section lists endpoints in order of preference;
:func:`choose_endpoint` returns the first healthy one, with notes for the
report header about every endpoint it passed over. The kinds (``openai``,
``tensorzero``, ``ollama``, ``vllm``, ``reference``), their base URLs and
health checks are tabled in docs/model.md.

TensorZero's OpenAI-compatible API wants model names of the form
``tensorzero::model_name::X`` or ``tensorzero::function_name::Y``; a profile
gives the full name as ``model`` or just ``model_name: X`` / ``function_name: Y``.

A URL may carry credentials (``http://user:pass@host``, ``?api_key=...``): they are
used for the requests, and every description, note and error message shows the
URL redacted (:func:`pytest_agentgym.results.redact.redact_url`).

Launched kinds (``vllm`` with a checkpoint, ``reference``) are started by
:func:`choose_endpoint` through :func:`pytest_agentgym.model.launcher.launch` as
child processes and stopped by :meth:`ChosenEndpoint.close`. A launch that fails
is one line in the notes; the log's last lines travel in
:attr:`NoEndpointAvailable.details`, to be shown once. The profile schema is
documented in docs/model.md.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx

from pytest_agentgym.model.client import (
    EndpointClient,
    RetryPolicy,
    Sampling,
    read_api_key,
    reject_unknown_keys,
)
from pytest_agentgym.model.launcher import ChosenEndpoint, launch
from pytest_agentgym.model.vllm import LaunchError, VLLMOptions
from pytest_agentgym.results.redact import redact_text, redact_url

__all__ = ["ChosenEndpoint", "EndpointConfig", "EndpointConfigError", "Health", "ModelSettings",
           "NoEndpointAvailable", "choose_endpoint", "launch", "parse_endpoint", "probe"]

KINDS = ("openai", "tensorzero", "ollama", "vllm", "reference")
LAUNCHABLE = ("vllm", "reference")
HEALTH_TIMEOUT = 2.0

_COMMON_KEYS = {"kind", "url", "model", "api_key_env"}
_KIND_KEYS = {
    "openai": set(),
    "tensorzero": {"model_name", "function_name"},
    "ollama": set(),
    "vllm": {"checkpoint"},
    "reference": {"policy", "seed", "latency_ms"},
}


class EndpointConfigError(ValueError):
    """A ``model:`` section that cannot be used; the message names the key and the fix."""


class NoEndpointAvailable(RuntimeError):
    """Every endpoint in the chain was unhealthy or failed to start.

    The message has one short clause per endpoint; ``details`` holds, for each
    launched one that failed, its command and the last lines of its log (for the
    run's summary: shown once, not in every episode)."""

    def __init__(self, notes: Sequence[str], details: Sequence[str] = ()) -> None:
        self.notes = tuple(notes)
        self.details = tuple(details)
        where = " (the end of the run's output shows the last lines of the log)" if self.details else ""
        super().__init__("no model endpoint is available: " + "; ".join(self.notes)
                         + f". Start one of them, or change model.endpoints in the node profile{where}.")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return type(self), (self.notes, self.details)


# --------------------------------------------------------------------------- configs


@dataclass(frozen=True)
class EndpointConfig:
    """One entry of ``model.endpoints``. ``url`` is None only for launched kinds."""

    kind: str
    url: str | None
    model: str | None
    api_key_env: str | None = None
    checkpoint: str | None = None  # vllm
    policy: str = "reference"  # reference: reference | random
    seed: int = 0  # reference
    latency_ms: float = 0.0  # reference
    where: str = "model.endpoints[0]"

    @property
    def launched(self) -> bool:
        """True when the plugin starts this endpoint itself (no url to attach to)."""
        return self.kind in LAUNCHABLE and self.url is None

    @property
    def base_url(self) -> str:
        """The URL the OpenAI client is pointed at."""
        if self.url is None:
            raise EndpointConfigError(f"{self.where}: {self.kind} endpoint has no URL until it is launched")
        if self.kind == "openai":
            return self.url
        if self.kind == "tensorzero":
            return join_url(self.url, "/openai/v1")
        return join_url(self.url, "/v1")

    def describe(self, with_model: bool = True) -> str:
        """E.g. ``ollama qwen3:8b at http://localhost:11434`` (the URL redacted)."""
        parts = [self.kind]
        label = self.model or self.checkpoint
        if with_model and label:
            parts.append(label)
        if self.url:
            parts.append(f"at {redact_url(self.url)}")
        return " ".join(parts)


def join_url(url: str, path: str) -> str:
    """``url`` + ``path`` with a query string kept at the end:
    ``join_url("http://h/v1?key=k", "/models")`` is ``http://h/v1/models?key=k``."""
    base, question, query = url.partition("?")
    return base.rstrip("/") + path + question + query


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EndpointConfigError(f"{where}.{key} must be a non-empty string, got {value!r}")
    return value.strip()


def _url(value: Any, where: str) -> str:
    url = _text(value, "url", where).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise EndpointConfigError(f"{where}.url must start with http:// or https://, got {redact_url(url)!r}")
    return url


def parse_endpoint(data: Mapping[str, Any], where: str = "model.endpoints[0]") -> EndpointConfig:
    """One endpoint from its mapping, e.g. ``{kind: ollama, url: ..., model: qwen3:8b}``."""
    if not isinstance(data, Mapping):
        raise EndpointConfigError(f"{where} must be a mapping with at least 'kind', got {data!r}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise EndpointConfigError(f"{where}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
    reject_unknown_keys(data, _COMMON_KEYS | _KIND_KEYS[kind], where, error=EndpointConfigError,
                        scope=f" for kind {kind}")
    url = _url(data["url"], where) if data.get("url") is not None else None
    model = _text(data["model"], "model", where) if data.get("model") is not None else None
    api_key_env = _text(data["api_key_env"], "api_key_env", where) if data.get("api_key_env") else None
    extra: dict[str, Any] = {}

    if kind not in LAUNCHABLE and url is None:
        example = {"openai": "http://localhost:8000/v1", "tensorzero": "http://localhost:3030",
                   "ollama": "http://localhost:11434"}[kind]
        raise EndpointConfigError(f"{where}.url is required for kind {kind}, e.g. url: {example}")
    if kind in ("openai", "ollama") and model is None:
        example = "qwen3:8b" if kind == "ollama" else "Qwen/Qwen3-8B"
        raise EndpointConfigError(f"{where}.model is required for kind {kind}, e.g. model: {example}")
    if kind == "tensorzero":
        model = _tensorzero_model(data, model, where)
    if kind == "vllm":
        if data.get("checkpoint") is not None:
            extra["checkpoint"] = str(data["checkpoint"])
        if url is not None and model is None:
            shown = redact_url(url)
            raise EndpointConfigError(f"{where}.model is required to attach to a running vLLM at {shown} "
                                      f"(the served model name; see GET {join_url(shown, '/v1/models')})")
    if kind == "reference":
        policy = data.get("policy", "reference")
        if policy not in ("reference", "random"):
            raise EndpointConfigError(f"{where}.policy must be reference or random, got {policy!r}")
        try:
            extra["seed"] = int(data.get("seed", 0))
            extra["latency_ms"] = float(data.get("latency_ms", 0.0))
        except (TypeError, ValueError):
            raise EndpointConfigError(f"{where}: seed must be an integer and latency_ms a number") from None
        extra["policy"] = policy
        if model is not None and model not in ("reference", "random"):
            raise EndpointConfigError(f"{where}.model must be reference or random for the reference agent, "
                                      f"got {model!r}")
        model = model or policy
    return EndpointConfig(kind=kind, url=url, model=model, api_key_env=api_key_env, where=where, **extra)


def _tensorzero_model(data: Mapping[str, Any], model: str | None, where: str) -> str:
    given = [k for k in ("model", "model_name", "function_name") if data.get(k) is not None]
    if len(given) != 1:
        raise EndpointConfigError(
            f"{where}: a tensorzero endpoint needs exactly one of model (full name "
            f"tensorzero::model_name::X), model_name: X or function_name: Y; got "
            f"{', '.join(given) or 'none'}")
    if model is not None:
        if not model.startswith(("tensorzero::model_name::", "tensorzero::function_name::")):
            raise EndpointConfigError(
                f"{where}.model {model!r} is not a TensorZero name; write model_name: {model} "
                f"(or function_name: {model}), or the full tensorzero::model_name::{model}")
        return model
    key = given[0]
    return f"tensorzero::{key}::{_text(data[key], key, where)}"


@dataclass(frozen=True)
class ModelSettings:
    """A node profile's ``model:`` section (plus its ``vllm:`` section), parsed."""

    endpoints: tuple[EndpointConfig, ...]
    api_key_env: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    request_timeout: float = 120.0
    retries: int = 3
    health_timeout: float = HEALTH_TIMEOUT
    vllm: VLLMOptions = field(default_factory=VLLMOptions)

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any], where: str = "node profile") -> "ModelSettings":
        """From a whole node profile mapping (its ``model:`` and ``vllm:`` sections)."""
        if "model" not in profile:
            raise EndpointConfigError(f"{where} has no model: section; add model: {{endpoints: [...]}}")
        return cls.from_mapping(profile["model"], vllm=profile.get("vllm"), where=f"{where}: model")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, vllm: Mapping[str, Any] | None = None,
                     where: str = "model") -> "ModelSettings":
        if not isinstance(data, Mapping):
            raise EndpointConfigError(f"{where} must be a mapping with an endpoints list")
        reject_unknown_keys(data, ("endpoints", "api_key_env", "sampling", "request_timeout", "retries",
                                   "health_timeout"), where, error=EndpointConfigError)
        raw = data.get("endpoints")
        if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
            raise EndpointConfigError(f"{where}.endpoints must be a non-empty list, e.g. "
                                      f"[{{kind: ollama, url: 'http://localhost:11434', model: 'qwen3:8b'}}]")
        endpoints = tuple(parse_endpoint(e, f"{where}.endpoints[{i}]") for i, e in enumerate(raw))
        try:
            sampling = Sampling.from_mapping(data.get("sampling"), where=f"{where}.sampling")
            options = VLLMOptions.from_mapping(vllm, where="vllm")
        except (ValueError, TypeError) as exc:
            raise EndpointConfigError(str(exc)) from None
        numbers: dict[str, Any] = {}
        for key, kind, default in (("request_timeout", float, 120.0), ("retries", int, 3),
                                   ("health_timeout", float, HEALTH_TIMEOUT)):
            value = data.get(key, default)
            try:
                numbers[key] = kind(value)
            except (TypeError, ValueError):
                raise EndpointConfigError(f"{where}.{key} must be a {kind.__name__}, got {value!r}") from None
            if numbers[key] < 0 or (key != "retries" and numbers[key] == 0):
                raise EndpointConfigError(f"{where}.{key} must be positive, got {value!r}")
        api_key_env = data.get("api_key_env")
        if api_key_env is not None:
            api_key_env = _text(api_key_env, "api_key_env", where)
        return cls(endpoints=endpoints, api_key_env=api_key_env, sampling=sampling, vllm=options, **numbers)

    def with_checkpoint(self, checkpoint: str | os.PathLike[str]) -> "ModelSettings":
        """Point every vllm endpoint that has no URL at ``checkpoint`` (--agentgym-checkpoint)."""
        endpoints = tuple(replace(e, checkpoint=str(checkpoint)) if e.kind == "vllm" and e.url is None else e
                          for e in self.endpoints)
        return replace(self, endpoints=endpoints)

    def key_env(self, endpoint: EndpointConfig) -> str | None:
        return endpoint.api_key_env or self.api_key_env

    def client(self, chosen: "ChosenEndpoint", *, turn_budget: float | None = None,
               http_client: httpx.AsyncClient | None = None) -> EndpointClient:
        """An :class:`EndpointClient` for the chosen endpoint with these settings."""
        return EndpointClient(
            chosen.base_url, chosen.model, api_key_env=self.key_env(chosen.config),
            sampling=self.sampling, request_timeout=self.request_timeout, turn_budget=turn_budget,
            retry=RetryPolicy(retries=self.retries), http_client=http_client,
        )


# --------------------------------------------------------------------------- health


@dataclass(frozen=True)
class Health:
    ok: bool
    reason: str = "ok"


def _failure(exc: httpx.HTTPError, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in str(exc).lower() else f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _listed(names: list[str], wanted: str, ollama: bool = False) -> bool:
    if ollama:
        def norm(tag: str) -> str:
            return tag if ":" in tag else tag + ":latest"
        return norm(wanted) in {norm(n) for n in names}
    return wanted in names


def probe(config: EndpointConfig, *, timeout: float = HEALTH_TIMEOUT, api_key: str | None = None,
          transport: httpx.BaseTransport | None = None) -> Health:
    """Check one running endpoint (bounded by ``timeout`` per request)."""
    if config.url is None:
        return Health(False, "not launched yet")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=timeout, transport=transport, headers=headers) as http:
            if config.kind == "tensorzero":
                return _expect_200(http.get(join_url(config.url, "/status")), "/status")
            if config.kind == "reference":
                return _expect_200(http.get(join_url(config.url, "/health")), "/health")
            if config.kind == "ollama":
                return _ollama_health(http, config)
            if config.kind == "vllm":
                health = _expect_200(http.get(join_url(config.url, "/health")), "/health")
                if not health.ok:
                    return health
            return _models_health(http, config)
    except httpx.HTTPError as exc:
        return Health(False, redact_text(_failure(exc, timeout)))


def _expect_200(response: httpx.Response, path: str) -> Health:
    if response.status_code == 200:
        return Health(True)
    return Health(False, f"GET {path} answered HTTP {response.status_code}")


def _ollama_health(http: httpx.Client, config: EndpointConfig) -> Health:
    response = http.get(join_url(config.url, "/api/tags"))
    if response.status_code != 200:
        return Health(False, f"GET /api/tags answered HTTP {response.status_code}")
    try:
        names = [m.get("name") or m.get("model") for m in response.json().get("models", [])]
    except (ValueError, AttributeError):
        return Health(False, "GET /api/tags did not answer Ollama's JSON; is this Ollama?")
    if not _listed([n for n in names if n], config.model or "", ollama=True):
        return Health(False, f"model {config.model} not pulled; run `ollama pull {config.model}`")
    return Health(True)


def _models_health(http: httpx.Client, config: EndpointConfig) -> Health:
    response = http.get(join_url(config.base_url, "/models"))
    if response.status_code in (401, 403):
        return Health(False, f"GET /models answered HTTP {response.status_code}; set model.api_key_env "
                             f"to the variable holding the key")
    if response.status_code != 200:
        return Health(False, f"GET /models answered HTTP {response.status_code}")
    try:
        ids = [m.get("id") for m in response.json().get("data", [])]
    except (ValueError, AttributeError):
        return Health(False, "GET /models did not answer an OpenAI model list")
    if config.model and not _listed([i for i in ids if i], config.model):
        served = ", ".join(i for i in ids if i) or "nothing"
        return Health(False, f"model {config.model} is not served there (it serves {served})")
    return Health(True)


# --------------------------------------------------------------------------- the chain


def choose_endpoint(settings: ModelSettings, *, log_dir: str | os.PathLike[str] | None = None,
                    transport: httpx.BaseTransport | None = None, spawned: Any = None) -> ChosenEndpoint:
    """The first healthy endpoint of ``settings.endpoints``, launching launched kinds.

    The notes say which endpoints were passed over and why, e.g. ``primary
    tensorzero at http://localhost:3030 unhealthy (connection refused)`` and
    ``using fallback ollama qwen3:8b at http://localhost:11434``. Raises
    :class:`NoEndpointAvailable` when none works. Launched processes log into
    ``log_dir`` (default: a new temporary directory). ``spawned``: the first endpoint's
    reference agent, already spawned (``RunResources.spawn_endpoint_ahead``).
    """
    notes: list[str] = []
    details: list[str] = []
    for position, config in enumerate(settings.endpoints):
        label = "primary" if position == 0 else f"fallback {position}"
        if config.launched:
            directory = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="agentgym-model-"))
            try:
                chosen = launch(config, settings, directory, spawned if position == 0 else None)
            except LaunchError as exc:
                notes.append(f"{label} {config.describe()} failed to start ({redact_text(str(exc))})")
                if getattr(exc, "detail", ""):
                    details.append(f"{label} {config.describe()}: {redact_text(exc.detail)}")
                continue
        else:
            try:
                key = read_api_key(settings.key_env(config)) if settings.key_env(config) else None
            except ValueError as exc:
                notes.append(f"{label} {config.describe(with_model=False)} unusable ({redact_text(str(exc))})")
                continue
            health = probe(config, timeout=settings.health_timeout, api_key=key, transport=transport)
            if not health.ok:
                notes.append(f"{label} {config.describe(with_model=False)} unhealthy ({health.reason})")
                continue
            chosen = ChosenEndpoint(config, config.base_url, config.model or "")
        if notes:
            notes.append(f"using {'fallback ' if position else ''}{chosen.config.describe()}")
        chosen.notes = tuple(notes) + chosen.notes
        return chosen
    raise NoEndpointAvailable(notes, details)
