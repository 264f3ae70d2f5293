"""Whether the model endpoint a batch names answers.

The batch's OpenAI base URL is read with the rest of the body
(:func:`pytest_agentgym.rollouts.request.openai_base`). Before any episode the
service asks ``GET <base>/models``: no answer, or an answer that lists the served
models without the batch's, is a bad request (HTTP 400) rather than a batch of
errored rollouts.
"""

from __future__ import annotations

import httpx

from pytest_agentgym.model.endpoint_settings import join_url
from pytest_agentgym.results.redact import redact_text, redact_url
from pytest_agentgym.rollouts.request import BadRollouts

#: Seconds the reachability check waits for ``GET /models``.
CHECK_TIMEOUT_S = 5.0


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
