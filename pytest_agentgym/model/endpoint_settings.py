"""A node profile's ``model:`` section, parsed: one :class:`EndpointConfig` per entry
of the fallback chain, and :class:`ModelSettings` for the whole section (with the
``vllm:`` section's :class:`~pytest_agentgym.model.vllm_options.VLLMOptions`); and
:class:`ChosenEndpoint`, the endpoint a run ends up using.

TensorZero's OpenAI-compatible API wants model names of the form
``tensorzero::model_name::X`` or ``tensorzero::function_name::Y``; a profile
gives the full name as ``model`` or just ``model_name: X`` / ``function_name: Y``.

No HTTP here (``httpx`` is imported when :meth:`ModelSettings.client` makes a
client). Descriptions and error messages show URLs redacted
(:func:`pytest_agentgym.results.redact.redact_url`). Checking the endpoints and
choosing one is :mod:`pytest_agentgym.model.endpoints`; starting the launched
kinds, :mod:`pytest_agentgym.model.launcher`. The schema is documented in docs/model.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pytest_agentgym.model.call_settings import RetryPolicy, Sampling, reject_unknown_keys
from pytest_agentgym.model.vllm_options import VLLMOptions
from pytest_agentgym.results.redact import redact_url

if TYPE_CHECKING:
    import httpx

    from pytest_agentgym.model.client import EndpointClient
    from pytest_agentgym.model.vllm import VLLMServer
    from pytest_agentgym.process.managed import ManagedServer

__all__ = ["ChosenEndpoint", "EndpointConfig", "EndpointConfigError", "EndpointOverride", "HEALTH_TIMEOUT", "KINDS",
           "LAUNCHABLE", "ModelSettings", "join_url", "override_urls", "parse_endpoint"]

KINDS = ("openai", "tensorzero", "ollama", "vllm", "reference")
LAUNCHABLE = ("vllm", "reference")
HEALTH_TIMEOUT = 2.0
#: A launched endpoint that died mid-run is started again up to this many times per
#: restart, waiting RESTART_BACKOFF seconds, doubling, in between (an environment
#: server's defaults: envs.yaml start_attempts and start_backoff)
RESTART_ATTEMPTS = 3
RESTART_BACKOFF = 1.0
#: The conversation of the chat that proves a route (sent with ``max_tokens: 1`` by
#: :mod:`pytest_agentgym.model.endpoints`; the reference agent answers it, model/reference/route_check.py).
PROOF_MESSAGES = ({"role": "user", "content": "Answer in one word: are you ready?"},)

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
                                   "health_timeout", "outage"),  # outage: config/profile.py reads it
                            where, error=EndpointConfigError)
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

    def client(self, chosen: ChosenEndpoint, *, turn_budget: float | None = None,
               http_client: httpx.AsyncClient | None = None) -> EndpointClient:
        """An :class:`~pytest_agentgym.model.client.EndpointClient` for the chosen endpoint
        with these settings."""
        from pytest_agentgym.model.client import EndpointClient  # httpx: imported where first used

        return EndpointClient(
            chosen.base_url, chosen.model, api_key_env=self.key_env(chosen.config),
            sampling=self.sampling, request_timeout=self.request_timeout, turn_budget=turn_budget,
            retry=RetryPolicy(retries=self.retries), http_client=http_client,
        )


def _position_label(position: int) -> str:
    return "primary" if position == 0 else f"fallback {position}"


@dataclass(frozen=True)
class EndpointOverride:
    """One endpoint of the chain whose URL ``--agentgym-endpoint`` replaced: the rest of
    the entry (its model, API key variable), its place in the chain and the fallbacks
    around it are the profile's. ``given_by`` is where the URL came from (the flag, its
    ``AGENTGYM_ENDPOINT`` variable or its ini key), for the header."""

    selector: str  # as given: a kind, or a position in the chain
    position: int
    kind: str
    url: str
    given_by: str = "--agentgym-endpoint"

    @property
    def name(self) -> str:
        """The endpoint as the user named it: ``tensorzero``, or ``fallback 1 (ollama)``."""
        return self.kind if self.selector == self.kind else f"{_position_label(self.position)} ({self.kind})"

    def describe(self) -> str:
        """``endpoint tensorzero overridden: http://gpu:3030 (--agentgym-endpoint)``, the URL redacted."""
        return f"endpoint {self.name} overridden: {redact_url(self.url)} ({self.given_by})"

    def record(self) -> dict[str, Any]:
        """What run.json's ``settings.endpoint_overrides`` keeps of it (the URL redacted)."""
        return {"endpoint": self.name, "kind": self.kind, "position": self.position,
                "url": redact_url(self.url), "given_by": self.given_by}


def override_urls(profile: Mapping[str, Any], pairs: Sequence[tuple[str, str]], *,
                  given_by: str = "--agentgym-endpoint", where: str = "node profile",
                  ) -> tuple[dict[str, Any], tuple[EndpointOverride, ...]]:
    """A copy of the node ``profile`` (its raw mapping) whose ``model.endpoints`` have the
    URLs of ``pairs`` (``(selector, url)``, as config/options.py ``parse_endpoints`` reads
    ``--agentgym-endpoint``), and what was replaced.

    A selector is a kind, which names the one endpoint of that kind (a kind that occurs
    twice is ambiguous: the message lists the positions to write instead), or a position
    (``0`` the primary). The profile is rewritten rather than the parsed chain so that
    every reader of the ``model:`` section (the run, preflight, an xdist worker) sees the
    same chain. A launched kind given a URL is attached to instead (a ``vllm`` entry then
    needs its ``model``). Raises :class:`EndpointConfigError` naming ``given_by`` and the
    fix: a kind the chain has no endpoint of, a position past its end, two selectors for
    one endpoint, an entry the new URL makes unusable."""
    import copy

    chain = ModelSettings.from_profile(profile, where=where).endpoints  # the profile's own errors first
    has = ", ".join(f"{e.kind} ({i}{', the primary' if i == 0 else ''})" for i, e in enumerate(chain))
    raw = copy.deepcopy(dict(profile))
    entries = list(raw["model"]["endpoints"])
    overrides: dict[int, EndpointOverride] = {}
    for selector, url in pairs:
        given = f"{given_by}: {selector}={redact_url(url)}"
        if selector.isdigit():
            position = int(selector)
            if position >= len(chain):
                raise EndpointConfigError(f"{given}: {where} has {len(chain)} endpoint(s), positions 0 to "
                                          f"{len(chain) - 1}: {has}")
        else:
            positions = [i for i, endpoint in enumerate(chain) if endpoint.kind == selector]
            if not positions:
                raise EndpointConfigError(f"{given}: {where} has no {selector} endpoint; its endpoints are {has}: "
                                          f"name one of those kinds, or a position (0=URL for the primary)")
            if len(positions) > 1:
                raise EndpointConfigError(f"{given}: {where} has {len(positions)} {selector} endpoints (positions "
                                          f"{', '.join(map(str, positions))}); name one by its position, e.g. "
                                          f"{positions[-1]}=URL")
            position = positions[0]
        if position in overrides:
            raise EndpointConfigError(f"{given}: the {_position_label(position)} endpoint ({chain[position].kind}) "
                                      f"is already pointed at {redact_url(overrides[position].url)} by "
                                      f"{overrides[position].selector}=...; give each endpoint one URL")
        entries[position] = {**entries[position], "url": url}
        try:
            parse_endpoint(entries[position], chain[position].where)
        except EndpointConfigError as exc:
            raise EndpointConfigError(f"{given}: {exc}") from None
        overrides[position] = EndpointOverride(selector, position, chain[position].kind, url, given_by)
    raw["model"] = {**raw["model"], "endpoints": entries}
    return raw, tuple(overrides[i] for i in sorted(overrides))


@dataclass
class ChosenEndpoint:
    """The endpoint a run uses; ``close()`` stops it when the plugin launched it.

    ``notes`` are lines for the report header and run.json (endpoints passed
    over, a lowered ``max_model_len``, vLLM's start-up time); ``startup_s`` is
    the seconds a launched vLLM took from spawn to healthy and ``version`` what
    its ``GET /version`` answered (None for other kinds); ``checked_by`` how an attached
    endpoint was found healthy (``GET /status``; None for a launched one), for the header."""

    config: EndpointConfig
    base_url: str
    model: str
    notes: tuple[str, ...] = ()
    process: ManagedServer | VLLMServer | None = None
    startup_s: float | None = None
    version: str | None = None
    checked_by: str | None = None

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def summary(self) -> str:
        """One line for the report header."""
        return "; ".join(self.notes) if self.notes else f"using {self.config.describe()}"

    def revive(self) -> str | None:
        """Start the process the plugin launched for this endpoint again, on its port,
        when it has died (its process ended, or its port refuses connections); with
        back-off, like an environment server (:meth:`ManagedServer.revive
        <pytest_agentgym.process.managed.ManagedServer.revive>`). Returns a line that
        says what died, why and where it runs again, or None when nothing was done: the
        process is alive, or the endpoint is not the plugin's (attached: never restarted
        from here). Raises ``ServerStartError`` when it did not come back."""
        process = self.process
        if process is None:
            return None
        import logging

        why = process.revive(RESTART_ATTEMPTS, RESTART_BACKOFF, logging.getLogger("pytest_agentgym.model"))
        if why is None:
            return None
        managed = getattr(process, "process", process)  # a VLLMServer's ManagedServer
        return f"{managed.label} died mid-run ({why}) and was restarted at {redact_url(managed.url)}"

    def close(self) -> None:
        process, self.process = self.process, None  # first: a revive() from now on does nothing
        if process is not None:
            process.stop()

    def __enter__(self) -> "ChosenEndpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
