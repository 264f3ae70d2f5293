"""Fixtures shared by the project's tests: real servers on loopback.

This file's folder (tests/) is on sys.path, so test modules in every folder import the
shared helpers as ``from helpers.projects import run`` (tests/helpers/)."""

from __future__ import annotations

import httpx
import pytest

from pytest_agentgym.process.managed import ManagedServer, free_port
from pytest_agentgym.servers.pool import embedded_command

pytest_plugins = ["pytester"]


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


@pytest.fixture(scope="module")
def http(request, embedded_server):
    """An HTTP client on the session's embedded server that the test module names in
    ``EMBEDDED_SERVER``: ``EMBEDDED_SERVER = "babyai"`` -> ``http.post("/create")``;
    a path after the name is the base of every request (``"lmrlgym/maze"``)."""
    named = getattr(request.module, "EMBEDDED_SERVER", None)
    if named is None:
        pytest.fail(f"{request.module.__name__} uses the http fixture without naming its EMBEDDED_SERVER")
    name, _, path = named.partition("/")
    base_url = embedded_server(name).url + (f"/{path}" if path else "")
    with httpx.Client(base_url=base_url, timeout=120) as client:
        yield client


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


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` for this suite: two workers per core (at most 8), or
    ``PYTEST_XDIST_AUTO_NUM_WORKERS``. Most tests spend their time waiting on processes
    they started (a pytest run, servers, the reference agent), so one worker per core
    leaves the cores idle; docs/developing.md has the measured times."""
    import os

    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if wanted and wanted.isdigit():
        return int(wanted)
    return min(2 * (os.cpu_count() or 1), 8)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With ``-n``, workers take tests from each other's queues (``--dist worksteal``)
    unless ``--dist`` says otherwise: the tests' durations range from milliseconds to a
    minute, and the slow ones cluster in a few files."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") == "no":
        config.option.dist = "worksteal"


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
