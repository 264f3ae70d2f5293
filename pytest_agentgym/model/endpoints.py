"""Endpoint health checks, the chat that proves a route, and the fallback chain.

A node profile's ``model:`` section lists endpoints in order of preference
(parsed in :mod:`pytest_agentgym.model.endpoint_settings`);
:func:`choose_endpoint` returns the first healthy one, with notes for the
report header about every endpoint it passed over. An attached endpoint is
healthy when its health check passes and it then answers one real chat with its
model and ``max_tokens: 1`` (:func:`probe` with ``chat_timeout``, which preflight
asks too). The kinds (``openai``, ``tensorzero``, ``ollama``, ``vllm``,
``reference``), their base URLs and health checks are tabled in docs/model.md.

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
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import httpx

from pytest_agentgym.model.call_settings import read_api_key
from pytest_agentgym.model.endpoint_settings import (
    HEALTH_TIMEOUT,
    PROOF_MESSAGES,
    ChosenEndpoint,
    EndpointConfig,
    ModelSettings,
    join_url,
)
from pytest_agentgym.model.launcher import launch
from pytest_agentgym.model.vllm import LaunchError
from pytest_agentgym.results.redact import redact_text, redact_url
from pytest_agentgym.transport.proxies import ProxyRouting, proxy_for, proxy_phrase

__all__ = ["Health", "NoEndpointAvailable", "choose_endpoint", "probe"]


class NoEndpointAvailable(RuntimeError):
    """Every endpoint in the chain was unhealthy or failed to start.

    The message has one short clause per endpoint; ``details`` holds, for each
    launched one that failed, its command and the last lines of its log (for the
    run's summary: shown once, not in every episode)."""

    def __init__(self, notes: Sequence[str], details: Sequence[str] = ()) -> None:
        self.notes = tuple(notes)
        self.details = tuple(details)
        where = " (the last lines of the log are shown once, above the items)" if self.details else ""
        super().__init__("no model endpoint is available: " + "; ".join(self.notes)
                         + f". Start one of them, or change model.endpoints in the node profile{where}.")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return type(self), (self.notes, self.details)


# --------------------------------------------------------------------------- health


@dataclass(frozen=True)
class Health:
    """What a probe found. ``checked_by``: the request that showed a healthy endpoint
    healthy (``GET /status``), for the header; ``note``: a line for the header and
    run.json when that was not the kind's usual check (the route answered where the
    health route is missing), saying what the check did not cover."""

    ok: bool
    reason: str = "ok"
    checked_by: str = ""
    note: str | None = None


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
          transport: httpx.BaseTransport | None = None, chat_timeout: float | None = None) -> Health:
    """Check one running endpoint (bounded by ``timeout`` per request). With ``chat_timeout``,
    a healthy one must then answer one real chat with its model (:func:`_prove_chat`, within
    ``chat_timeout``): what preflight and :func:`choose_endpoint` ask, so that a server that
    answers only its health routes is not chosen. Requests follow the plugin's proxy rule
    (:func:`pytest_agentgym.transport.proxies.proxy_for`) unless a ``transport`` is
    injected; a failure through a proxy says so."""
    if config.url is None:
        return Health(False, "not launched yet")
    health = _probe(config, timeout, api_key, transport, chat_timeout)
    if not health.ok and transport is None:
        try:
            via = proxy_for(config.url)
        except httpx.InvalidURL:
            via = None
        if via is not None:
            return Health(False, f"{proxy_phrase(via)}: {health.reason}")
    return health


def _probe(config: EndpointConfig, timeout: float, api_key: str | None,
           transport: httpx.BaseTransport | None, chat_timeout: float | None) -> Health:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.Client(timeout=timeout, transport=transport or ProxyRouting(), headers=headers) as http:
            health = _health(http, config, proving=chat_timeout is not None)
            if not health.ok or chat_timeout is None:
                return health
            return _prove_chat(http, config, health, chat_timeout)
    except httpx.HTTPError as exc:
        return Health(False, redact_text(_failure(exc, timeout)))


def _health(http: httpx.Client, config: EndpointConfig, proving: bool) -> Health:
    """The kind's own health check (docs/model.md tables them)."""
    if config.kind == "tensorzero":
        return _tensorzero_health(http, config, proving)
    if config.kind == "reference":
        return _expect_200(http.get(join_url(config.url, "/health")), "/health")
    if config.kind == "ollama":
        return _ollama_health(http, config)
    if config.kind == "vllm":
        health = _expect_200(http.get(join_url(config.url, "/health")), "/health")
        if not health.ok:
            return health
    return _models_health(http, config, proving)


def _expect_200(response: httpx.Response, path: str) -> Health:
    if response.status_code == 200:
        return Health(True, checked_by=f"GET {path}")
    return Health(False, f"GET {path} answered HTTP {response.status_code}")


def _tensorzero_health(http: httpx.Client, config: EndpointConfig, proving: bool) -> Health:
    """``GET /status`` (a standalone gateway's liveness route), else ``GET /health``;
    when both are 404, whether the ``/openai/v1`` routes are served: the gateway that
    the ``tensorzero`` package runs in-process serves those and nothing else."""
    for path in ("/status", "/health"):
        response = http.get(join_url(config.url, path))
        if response.status_code != 404:
            return _expect_200(response, path)
    return _chat_route_health(http, config, "GET /status and GET /health answered HTTP 404", proving)


#: What a chat completions route answers to an empty JSON object: the request is
#: refused while it is read (``messages`` missing), before any model is asked.
_REFUSED_AS_INCOMPLETE = (400, 422)


def _chat_route_health(http: httpx.Client, config: EndpointConfig, missing: str, proving: bool) -> Health:
    """The fallback check of an endpoint whose health route is missing: ``POST
    <base>/chat/completions`` with an empty JSON object. An answer that refuses it as
    incomplete (HTTP 400 or 422) shows that the server is up and serves the route, and
    costs no model call; it does not show that the model name is known: a wrong one is
    the first episode's error. Anything else (404: no such route; 5xx; 401/403) is
    unhealthy and says so. When a real chat follows (``proving``), that chat is the
    check and the empty request is not sent."""
    if proving:
        return Health(True)
    url = join_url(config.base_url, "/chat/completions")
    route = urlsplit(url).path
    response = http.post(url, json={})
    code = response.status_code
    if code in (401, 403):
        return Health(False, f"{missing}, and POST {route} answered HTTP {code}; set model.api_key_env to the "
                             f"variable holding the key")
    if code not in _REFUSED_AS_INCOMPLETE:
        hint = (f"; nothing there serves OpenAI's chat completions: is {redact_url(config.url or '')} the "
                f"{'gateway' if config.kind == 'tensorzero' else 'OpenAI base URL'}?" if code in (404, 405) else "")
        return Health(False, f"{missing}, and POST {route} with an empty request answered HTTP {code}{hint}")
    check = f"POST {route} with an empty request"
    return Health(True, checked_by=check, note=(
        f"{config.describe(with_model=False)}: {missing}; checked instead that {check} is refused as "
        f"incomplete (HTTP {code}): the route is served and no model was asked, so the model name "
        f"{config.model} is first tried by the first episode"))


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
    return Health(True, checked_by="GET /api/tags")


def _models_health(http: httpx.Client, config: EndpointConfig, proving: bool) -> Health:
    response = http.get(join_url(config.base_url, "/models"))
    if response.status_code == 404:  # a server with no model list (TensorZero's OpenAI routes)
        return _chat_route_health(http, config, "GET /models answered HTTP 404", proving)
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
    return Health(True, checked_by="GET /health and GET /models" if config.kind == "vllm" else "GET /models")


# --------------------------------------------------------------------------- the chat that proves a route


#: What an HTTP 400 or 422 says when it refuses the model, not the conversation.
_MODEL_REFUSED = re.compile(r"does not exist|not found|unknown model|model_not_found|no such model|not served",
                            re.IGNORECASE)
#: What a gateway's 5xx says when its upstream refused the conversation (TensorZero: "Error 400 Bad Request
#: from openai client"): the route reached the model.
_UPSTREAM_REFUSED = re.compile(r"\bError 400\b")


def _prove_chat(http: httpx.Client, config: EndpointConfig, health: Health, timeout: float) -> Health:
    """One real chat with the endpoint's model and ``max_tokens: 1``, after its health check.
    A route that cannot chat (no such route, a key refused, a model not served, a server
    error, no answer, an answer that is not a chat completion) is unhealthy, naming the
    request, the HTTP status and the fix. An HTTP 400 or 422 that refuses the conversation
    and not the model shows that the route serves the model (a model may refuse so short a
    conversation; the reference agent answers it: model/reference/route_check.py), and so does
    a gateway's 5xx that passes on such a refusal from its upstream, and a 429 (busy, retried
    by a run)."""
    url = join_url(config.base_url, "/chat/completions")
    asked = f"POST {urlsplit(url).path} (a one-token chat with {config.model})"
    body = {"model": config.model, "messages": list(PROOF_MESSAGES), "max_tokens": 1, "stream": False}
    try:
        response = http.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return Health(False, redact_text(f"{asked}: {_failure(exc, timeout)}"))
    code, said = response.status_code, _said(response)
    refused = (code in (400, 422) or (code >= 500 and _UPSTREAM_REFUSED.search(said) is not None)) \
        and not _MODEL_REFUSED.search(said)
    if code == 200 and not _chat_completion(response):
        return Health(False, f"{asked} answered HTTP 200 without a chat completion ({_short(said)}); is "
                             f"{redact_url(config.url or '')} an OpenAI-compatible server?")
    if code not in (200, 429) and not refused:
        return Health(False, f"{asked} answered HTTP {code} ({_short(said)}); {_chat_fix(config, code, said)}")
    chat = "a one-token chat" + ("" if code == 200 else ", busy (HTTP 429)" if code == 429
                                 else f", refused as HTTP {code} for its conversation, not its model")
    return Health(True, checked_by=f"{health.checked_by}, then {chat}" if health.checked_by
                  else f"{asked.split(' (')[0]}, {chat}", note=health.note)


def _said(response: httpx.Response) -> str:
    """The server's own words in an answer, on one line (at most 500 characters)."""
    from types import SimpleNamespace

    from pytest_agentgym.model.errors import server_message

    try:
        payload = response.json()
    except ValueError:
        payload = None
    said = server_message(SimpleNamespace(body=payload, response=response)) if response.content else "empty body"
    return redact_text(said)


def _short(said: str, most: int = 160) -> str:
    return said if len(said) <= most else said[:most - 3].rstrip() + "..."


def _chat_completion(response: httpx.Response) -> bool:
    try:
        choices = response.json().get("choices")
    except (ValueError, AttributeError):
        return False
    return bool(choices) and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict)


def _chat_fix(config: EndpointConfig, code: int, said: str) -> str:
    """What to do about a chat route that refused the one-token chat with ``code``."""
    where = redact_url(config.url or "")
    if code in (401, 403):
        return "set model.api_key_env to the variable holding the endpoint's key"
    if code == 404 and config.kind == "tensorzero":
        name = (config.model or "").split("::")[-1]
        return (f"is {where} a TensorZero gateway whose config has the model {name} (configs/tensorzero/4090.toml "
                f"is one)? An OpenAI-compatible server without the gateway is kind: openai")
    if code == 404 or _MODEL_REFUSED.search(said):
        return (f"does {where} serve the model {config.model} (GET .../models lists what it serves), and is it "
                f"the {'OpenAI base URL' if config.kind == 'openai' else 'server root'}?")
    if code >= 500:
        return "the server failed the chat: its log says why (a gateway answers 502 when its upstream fails)"
    return "the endpoint does not take an OpenAI chat request"


# --------------------------------------------------------------------------- the chain


def choose_endpoint(settings: ModelSettings, *, log_dir: str | os.PathLike[str] | None = None,
                    transport: httpx.BaseTransport | None = None, spawned: Any = None) -> ChosenEndpoint:
    """The first healthy endpoint of ``settings.endpoints`` (an attached one must answer a
    one-token chat), launching launched kinds.

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
            health = probe(config, timeout=settings.health_timeout, api_key=key, transport=transport,
                           chat_timeout=settings.request_timeout)
            if not health.ok:
                notes.append(f"{label} {config.describe(with_model=False)} unhealthy ({health.reason})")
                continue
            chosen = ChosenEndpoint(config, config.base_url, config.model or "", checked_by=health.checked_by,
                                    notes=(health.note,) if health.note else ())
        if notes:
            notes.append(f"using {'fallback ' if position else ''}{chosen.config.describe()}")
        chosen.notes = tuple(notes) + chosen.notes
        return chosen
    raise NoEndpointAvailable(notes, details)
