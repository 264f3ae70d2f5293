"""The one place the parts of an evaluation are made: the environment servers' pool,
the model a request is played against, and the engine that plays them.

The pytest run (run/services.py), the queue worker (through the same services)
and the rollout service (rollouts/service.py) all make them here, so a server
pool honours ``envs.servers`` the same way and a model client gets the same
timeouts, retries and sampling wherever an episode comes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from pytest_agentgym.envs.spec import EnvSpec


def server_pool(specs: Mapping[str, EnvSpec], servers_mode: str, log_dir: Path, *,
                replicas: int | str = 1, concurrency: int = 1) -> Any:
    """A :class:`~pytest_agentgym.servers.pool.ServerPool` for a node in ``servers_mode``:
    ``spawn`` always starts fresh servers on free ports; ``auto`` attaches to what
    answers on the configured port and spawns the rest; ``attach`` needs every URL to
    answer already (an environment without one gets its default URL). ``replicas``
    (N or "auto", following ``concurrency``: the episodes in flight) is how many
    processes an environment without its own ``replicas`` gets when spawned."""
    from pytest_agentgym.servers.pool import ServerPool

    if servers_mode == "attach":
        specs = {n: s if s.url else s.with_overrides(url=s.default_url()) for n, s in specs.items()}
    log_dir.mkdir(parents=True, exist_ok=True)
    return ServerPool(dict(specs), log_dir=log_dir, attach_running=servers_mode == "auto",
                      replicas=replicas, concurrency=concurrency)


def model(base_url: str, name: str, *, api_key_env: str | None, sampling: Any = None,
          request_timeout: float, retries: int) -> Any:
    """The :class:`~pytest_agentgym.engine.model.ModelAdapter` over an endpoint client
    for ``name`` at ``base_url``; ``sampling`` (a model.client.Sampling or a mapping)
    is the client's default under each request's own."""
    from pytest_agentgym.engine.model import ModelAdapter
    from pytest_agentgym.model.call_settings import RetryPolicy, Sampling
    from pytest_agentgym.model.client import EndpointClient

    if not isinstance(sampling, Sampling):
        sampling = Sampling.from_mapping(dict(sampling or {}))
    client = EndpointClient(base_url, name, api_key_env=api_key_env, sampling=sampling,
                            request_timeout=request_timeout, retry=RetryPolicy(retries=retries))
    return ModelAdapter(client, sampling)


def engine(*, concurrency: int, model_factory: Callable[[], Any], adapters: dict[str, Any],
           env_urls: Mapping[str, Any], before_retry: Any, on_finished: Callable[[Any], Any],
           outage: Any = None) -> Any:
    """The :class:`~pytest_agentgym.engine.runner.Engine` that plays a door's episodes;
    ``outage``: its :class:`~pytest_agentgym.engine.outage.OutageGuard` (the node's
    ``model.outage``), None to error on an unreachable endpoint at once."""
    from pytest_agentgym.engine.runner import Engine

    return Engine(concurrency=concurrency, model_factory=model_factory, adapters=adapters, env_urls=env_urls,
                  before_retry=before_retry, on_finished=on_finished, outage=outage)


def outage_endpoint(config: Any, *, api_key_env: str | None, health_timeout: float, chat_timeout: float,
                    make_model: Callable[[], Any]) -> Any:
    """An endpoint the engine's outage guard (engine/outage.py) may wait for or fail over
    to: its description (the URL redacted), its probe (the kind's own health check, then the
    one-token chat that proves the route, as the start chooses an endpoint: model/endpoints.py
    ``probe``; blocking, run on a thread) and how to make its ChatModel. One builder for every
    door: the pytest run and the queue worker (run/services.py), the rollout service."""
    from pytest_agentgym.engine.outage import Endpoint
    from pytest_agentgym.model.call_settings import read_api_key
    from pytest_agentgym.model.endpoints import probe

    def check() -> tuple[bool, str]:
        try:
            key = read_api_key(api_key_env) if api_key_env else None
        except ValueError as exc:
            return False, str(exc)
        health = probe(config, timeout=health_timeout, api_key=key, chat_timeout=chat_timeout)
        return health.ok, health.reason

    return Endpoint(config.describe(), check, make_model)
