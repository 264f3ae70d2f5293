"""Start, watch, restart and stop servers: the public names in one place.

The work is done in :mod:`pytest_agentgym.process.managed` (one server:
spawn, death signal, stop), :mod:`pytest_agentgym.process.health` (ports,
health probes, commands, messages) and :mod:`pytest_agentgym.servers.pool`
(which server each environment gets, and the pool that starts them). This
module re-exports their public names, so ``from
pytest_agentgym.servers.lifecycle import ServerPool`` keeps working.
"""

from __future__ import annotations

from pytest_agentgym.process.health import (
    ANY_ANSWER,
    DEFAULT_HOST,
    HEALTH_ENDPOINT,
    Advice,
    HealthCheck,
    build_argv,
    free_port,
    probe,
    server_url,
)
from pytest_agentgym.servers.pool import (
    ServerPlan,
    ServerPool,
    ServerUnavailable,
    embedded_command,
    plan_server,
)
from pytest_agentgym.process.errors import ServerError, ServerStartError
from pytest_agentgym.process.managed import ManagedServer

__all__ = [
    "ANY_ANSWER", "DEFAULT_HOST", "HEALTH_ENDPOINT", "Advice", "HealthCheck", "ManagedServer",
    "ServerError", "ServerPlan", "ServerPool", "ServerStartError", "ServerUnavailable",
    "build_argv", "embedded_command", "free_port", "plan_server", "probe", "server_url",
]
