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


def pid_serving(port: str) -> int:
    """The pid of the `pytest-agentgym serve ... --port PORT` process (a server a run spawned,
    found from its log's name, to kill it with a real signal)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"--port" in argv and argv[argv.index(b"--port") + 1] == port.encode():
            return int(entry.name)
    raise AssertionError(f"no server process on port {port}")
