"""Fixtures shared by the project's tests: real servers on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.servers.pool import embedded_command
from pytest_agentgym.process.managed import ManagedServer, free_port
pytest_plugins = ["pytester"]

#: Data copied from the golden files for tests (tests/data/).
DATA = Path(__file__).parent / "data"

__all__ = ["DATA", "free_port"]  # test modules import them: `from conftest import DATA, free_port`


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory):
    """Factory: ``embedded_server("babyai")`` -> a running embedded server, one per name.

    The server is a :class:`~pytest_agentgym.process.managed.ManagedServer`
    spawned with ``python -m pytest_agentgym serve NAME`` on a free port:
    ``.url``, ``.port``, ``.proc`` (the Popen), ``.stop()``; its log is under
    the session's temporary directory.
    """
    started: dict[str, ManagedServer] = {}
    log_dir = tmp_path_factory.mktemp("server-logs")

    def get(name: str) -> ManagedServer:
        if name not in started:
            port = free_port()
            started[name] = ManagedServer(
                name, command=embedded_command(name), port=port,
                log_path=log_dir / f"{name}-{port}.log", startup_timeout=60,
                label=f"embedded server {name}",
            ).start()
        return started[name]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(autouse=True, scope="session")
def _notice_state(tmp_path_factory):
    """Runs started by the tests keep their "shown once" notices in a folder of their own."""
    import os

    from pytest_agentgym.publish.notices import STATE_DIR_ENV

    previous = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(tmp_path_factory.mktemp("notice-state"))
    yield
    if previous is None:
        os.environ.pop(STATE_DIR_ENV, None)
    else:
        os.environ[STATE_DIR_ENV] = previous


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run tests marked slow (vLLM on CPU, long runs)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: pass --run-slow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
