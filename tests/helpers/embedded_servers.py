"""An embedded server of one's own, for tests that kill it or start it with their own
environment (the conftest's ``embedded_server`` fixture shares one per session)."""

from __future__ import annotations

from pathlib import Path

from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer, free_port


def start_embedded(name: str, env_name: str, log_dir: Path, env: dict[str, str] | None = None,
                   startup_timeout: float = 120) -> ManagedServer:
    """``pytest-agentgym serve <name>`` as a real process on a free port, started."""
    port = free_port()
    return ManagedServer(
        env_name, command=embedded_command(name), port=port, env=env,
        log_path=log_dir / f"{name}-{port}.log", startup_timeout=startup_timeout,
        label=f"embedded server {name}",
    ).start()
