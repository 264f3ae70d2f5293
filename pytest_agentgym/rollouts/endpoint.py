"""The model endpoint a batch names: its OpenAI base URL, and whether it answers.

A batch gives the server's address as a trainer knows it (vLLM's
``http://172.17.0.1:8001``); the OpenAI paths hang off ``/v1``, which is added
unless the URL already ends in it (``.../v1``, TensorZero's ``.../openai/v1``).
Before any episode the service asks ``GET <base>/models``: no answer, or an
answer that lists the served models without the batch's, is a bad request
(HTTP 400) rather than a batch of errored rollouts.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from pytest_agentgym.model.endpoints import join_url
from pytest_agentgym.results.redact import redact_text, redact_url
from pytest_agentgym.rollouts.request import BadRollouts

#: Seconds the reachability check waits for ``GET /models``.
CHECK_TIMEOUT_S = 5.0


def openai_base(value: Any) -> str:
    """``http://host:8001`` -> ``http://host:8001/v1``; a URL ending in /v1 is kept."""
    if not isinstance(value, str) or not value.strip():
        raise BadRollouts(f"'base_url' must be the model server's URL, e.g. http://127.0.0.1:8001, got {value!r}")
    url = value.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRollouts(f"'base_url' must start with http:// or https:// and name a host, "
                          f"got {redact_url(url)!r}")
    if parts.path.rstrip("/").endswith("/v1"):
        base, question, query = url.partition("?")
        return base.rstrip("/") + question + query
    return join_url(url, "/v1")


def _served(response: httpx.Response) -> list[str] | None:
    """The model ids of an OpenAI model list, or None when the answer is not one."""
    try:
        data = response.json().get("data")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, AttributeError, TypeError):
        return None


async def check_endpoint(http: httpx.AsyncClient, base_url: str, model: str,
                         api_key: str | None = None) -> None:
    """Raise :class:`BadRollouts` when ``base_url`` does not answer, refuses the key,
    or lists its models and ``model`` is not among them. An endpoint without a model
    list (HTTP 404 there) passes: it answered."""
    url = join_url(base_url, "/models")
    shown = redact_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = await http.get(url, headers=headers, timeout=CHECK_TIMEOUT_S)
    except httpx.TimeoutException:
        raise BadRollouts(f"base_url {shown} did not answer GET /models within {CHECK_TIMEOUT_S:g} s; "
                          f"is the model server up and reachable from this host?") from None
    except httpx.HTTPError as exc:
        why = "connection refused" if "refused" in str(exc).lower() else f"{type(exc).__name__}: {exc}"
        raise BadRollouts(f"base_url {shown} is unreachable ({redact_text(why)}); is the model server "
                          f"running, and is the address reachable from the rollout service's host?") from None
    if response.status_code in (401, 403):
        raise BadRollouts(f"base_url {shown} refused the request (HTTP {response.status_code}); start the "
                          f"service with --api-key-env NAME, NAME being the variable that holds the key")
    if response.status_code != 200:
        return
    served = _served(response)
    if served and model not in served:
        raise BadRollouts(f"model {model!r} is not served at {shown}; it serves {', '.join(served)}")
