"""Whether the model endpoint a batch names answers.

The batch's OpenAI base URL is read with the rest of the body
(:func:`pytest_agentgym.rollouts.request.openai_base`). Before any episode the
service asks ``GET <base>/models``: no answer, or an answer that lists the served
models without the batch's, is a bad request (HTTP 400) rather than a batch of
errored rollouts. The service's API key goes with the question only when the
base URL is on its allow-list (:mod:`pytest_agentgym.rollouts.access`); the
caller of :func:`check_endpoint` decides, and passes no key otherwise.
"""

from __future__ import annotations

import httpx

from pytest_agentgym.model.endpoint_settings import join_url
from pytest_agentgym.results.redact import redact_text, redact_url
from pytest_agentgym.rollouts.request import BadRollouts, shown, shown_list

#: Seconds the reachability check waits for ``GET /models``.
CHECK_TIMEOUT_S = 5.0


def _served(response: httpx.Response) -> list[str] | None:
    """The model ids of an OpenAI model list, or None when the answer is not one."""
    try:
        data = response.json().get("data")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, AttributeError, TypeError):
        return None


def shown_url(url: str, limit: int = 200) -> str:
    """``url`` as a message shows it: credentials as ``***``, cut to ``limit`` characters."""
    text = redact_url(url)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


async def check_endpoint(http: httpx.AsyncClient, base_url: str, model: str,
                         api_key: str | None = None) -> None:
    """Raise :class:`BadRollouts` when ``base_url`` does not answer, refuses the key,
    or lists its models and ``model`` is not among them. An endpoint without a model
    list (HTTP 404 there) passes: it answered."""
    url = join_url(base_url, "/models")
    where = shown_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = await http.get(url, headers=headers, timeout=CHECK_TIMEOUT_S)
    except httpx.TimeoutException:
        raise BadRollouts(f"base_url {where} did not answer GET /models within {CHECK_TIMEOUT_S:g} s; "
                          f"is the model server up and reachable from this host?") from None
    except httpx.InvalidURL as exc:
        raise BadRollouts(f"base_url {where} cannot be requested ({str(exc)[:200]}); send the model server's "
                          f"address, e.g. http://127.0.0.1:8001") from None
    except httpx.HTTPError as exc:
        why = "connection refused" if "refused" in str(exc).lower() else f"{type(exc).__name__}: {exc}"
        raise BadRollouts(f"base_url {where} is unreachable ({redact_text(why)[:300]}); is the model server "
                          f"running, and is the address reachable from the rollout service's host?") from None
    if response.status_code in (401, 403):
        advice = ("its key did not open it" if api_key else
                  "no key was sent: start the service with --api-key-env NAME, NAME being the variable that "
                  "holds the key, and allow this endpoint with --allow-base-url if it was not started with it")
        raise BadRollouts(f"base_url {where} refused the request (HTTP {response.status_code}); {advice}")
    if response.status_code != 200:
        return
    served = _served(response)
    if served and model not in served:
        raise BadRollouts(f"model {shown(model)} is not served at {where}; it serves {shown_list(served, 10)}")
