"""Start the endpoint kinds the plugin launches itself (vLLM on a checkpoint, the
reference agent), as the endpoint a run ends up using
(:class:`~pytest_agentgym.model.endpoint_settings.ChosenEndpoint`).

:func:`launch` starts one and waits until it is healthy. A start that fails
after the process ran raises :class:`LaunchFailed`: its message is one line
(what happened, the error line of the log when there is one, the log's path)
and :attr:`LaunchFailed.detail` keeps the command and the log's last lines, so
a run can show those once, at the end of its output, instead of in every episode.
:func:`~pytest_agentgym.model.endpoints.choose_endpoint` calls it for the
launched entries of the fallback chain (pytest's ``--agentgym-checkpoint``);
:func:`launch_checkpoint` for a door that launches vLLM alone (the rollout
service's ``--checkpoint``). No pytest here.

A checkpoint is checked before vLLM is started
(:func:`~pytest_agentgym.model.checkpoint.check_checkpoint`): a broken one fails in
well under a second with what is wrong and the fix, where vLLM took one to three
minutes to say less. When vLLM still fails, the one line names the cause:
:func:`error_line` takes the first exception in what this start wrote to the log
that says why (vLLM's engine process logs the root cause, "Cannot find any model
weights", and the API server then ends on "Engine core initialization failed").
"""

from __future__ import annotations

import re
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from pytest_agentgym.model.checkpoint import check_checkpoint
from pytest_agentgym.model.endpoint_settings import ChosenEndpoint, EndpointConfig, ModelSettings
from pytest_agentgym.model.vllm import MODEL_STOP_GRACE, LaunchError, VLLMServer
from pytest_agentgym.process.managed import ManagedServer
from pytest_agentgym.process.health import HEALTH_ENDPOINT, Advice, describe_exit

__all__ = ["LaunchFailed", "REFERENCE_STARTUP_TIMEOUT", "launch", "launch_checkpoint"]

#: how long a launched reference agent may take to answer /health
REFERENCE_STARTUP_TIMEOUT = 60.0
#: a log line that ends a Python traceback: ``ValueError: ...``, ``torch.OutOfMemoryError: ...``
ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)\b[^:]*: .+")
#: what vLLM's logger puts before each line: ``(EngineCore_DP0 pid=81) ERROR 11-23 10:02:03 [core.py:708] ``
#: (or only the process, on what a child prints), and terminal colours
VLLM_PREFIX = re.compile(r"^(?:[^(\s]*\([\w.:-]+ pid=\d+\) )?"
                         r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ \[[^\]]*\] ?)?")
COLOURS = re.compile(r"\x1b\[[0-9;]*m")
#: exceptions that only pass another one on: they name no cause of their own
NO_CAUSE = re.compile(r"Engine core initialization failed|See root cause above|Error raised in subprocess|"
                      r"failed to be inspected|^SystemExit\b|^KeyboardInterrupt\b|^BrokenPipeError\b|"
                      r"^Exception ignored in")
#: how much of a failed start's log is searched for its cause
LOG_WINDOW = 1_000_000


class LaunchFailed(LaunchError):
    """A launched endpoint's process ran but never became healthy. The message is
    one line; ``detail`` has the full start error (command, last lines of the log)."""

    def __init__(self, message: str, *, detail: str = "", exit_code: int | None = None) -> None:
        self.detail = detail
        super().__init__(message, exit_code=exit_code)


def error_line(log: str) -> str | None:
    """The exception line of ``log`` that says why the start failed, with the indented
    lines that continue its message (pydantic's ``ValidationError`` puts the reason
    there), in one line of at most 300 characters. vLLM's log prefixes are ignored.
    The first exception that names a cause wins: a chained traceback and vLLM's
    processes put the root cause first and wrappers ("Engine core initialization
    failed. See root cause above.") after it; a log of wrappers only gives its last."""
    lines = [VLLM_PREFIX.sub("", COLOURS.sub("", line), count=1) for line in log.splitlines()]
    found: list[str] = []
    for index, line in enumerate(lines):
        if not ERROR_LINE.match(line.strip()):
            continue
        parts = [line.strip()]
        for more in lines[index + 1:]:
            if not more[:1].isspace():
                break
            if more.strip() and not more.strip().startswith("For further information"):
                parts.append(more.strip())
        text = "; ".join(parts)
        found.append(text if len(text) <= 300 else text[:297] + "...")
    return next((text for text in found if not NO_CAUSE.search(text)), found[-1] if found else None)


def _written_since(path: Path | None, offset: int) -> str:
    """What a start wrote to its (appended) log: the text after ``offset``, at most the last
    :data:`LOG_WINDOW` bytes of it."""
    if path is None or not path.exists():
        return ""
    with path.open("rb") as log:
        size = log.seek(0, 2)
        log.seek(max(offset, size - LOG_WINDOW))
        return log.read().decode("utf-8", "replace")


def _one_line(exc: LaunchError, server: ManagedServer, label: str, notes: Sequence[str],
              log: str = "") -> LaunchFailed:
    """The start error ``exc`` of ``server``, said in one line with the cause found in
    ``log`` (what this start wrote; else the error's tail); the detail ends with ``notes``."""
    if exc.exit_code is not None:
        what = f"{label} {describe_exit(exc.exit_code)} before it answered"
    else:
        what = (f"{label} did not answer {server.health.describe()} within {server.startup_timeout:g} s "
                f"and was stopped ({server.advice.slow_start})")
    cause = error_line(log) or error_line(exc.log_tail)
    return LaunchFailed(f"{what}{': ' + cause if cause else ''}; log: {server.log_path}",
                        detail="\n".join([str(exc), *(f"note: {n}" for n in notes)]), exit_code=exc.exit_code)


def _started(server: Any, process: ManagedServer, label: str, notes: Sequence[str] = ()) -> None:
    """``server.start()``; a failure with a log behind it becomes :class:`LaunchFailed`.
    Failures before anything ran (no checkpoint, no vLLM there) are short already."""
    log_path = process.log_path
    offset = log_path.stat().st_size if log_path is not None and log_path.exists() else 0
    try:
        server.start()
    except LaunchError as exc:
        if not exc.log_tail and exc.exit_code is None:
            raise
        raise _one_line(exc, process, label, notes, _written_since(log_path, offset)) from exc


def _fits_max_tokens(settings: ModelSettings, max_model_len: int | None) -> list[str]:
    max_tokens = settings.sampling.max_tokens
    if max_model_len is None or max_tokens is None or max_tokens < max_model_len:
        return []
    return [f"sampling max_tokens {max_tokens} is not below max_model_len {max_model_len}: vLLM refuses "
            f"every request; lower model.sampling.max_tokens (or pass --agentgym-sampling=max_tokens=N)"]


def reference_agent(config: EndpointConfig, log_dir: Path) -> ManagedServer:
    """The reference agent's process for ``config``, not yet started."""
    return ManagedServer(
        "reference agent",
        command=["{python}", "-m", "pytest_agentgym", "reference-agent", "--host", "{host}",
                 "--port", "{port}", "--policy", config.policy, "--seed", str(config.seed),
                 "--latency-ms", str(config.latency_ms)],
        log_path=log_dir / "reference-agent.log", startup_timeout=REFERENCE_STARTUP_TIMEOUT,
        stop_grace=MODEL_STOP_GRACE, health=HEALTH_ENDPOINT, label="reference agent", advice=Advice(),
        death_signal=signal.SIGTERM)


def launch(config: EndpointConfig, settings: ModelSettings, log_dir: Path,
           spawned: ManagedServer | None = None) -> ChosenEndpoint:
    """Start a launched kind and wait until it is healthy. Raises :class:`LaunchError`
    (:class:`LaunchFailed` when the process ran and did not come up). ``spawned``: a
    reference agent already spawned for ``config`` (:func:`reference_agent`), waited for
    instead of a new one."""
    if config.kind == "vllm":
        if not config.checkpoint:
            raise LaunchError(f"{config.where}: kind vllm needs a checkpoint; pass "
                              f"--agentgym-checkpoint PATH or set checkpoint: PATH")
        options = settings.vllm
        problems = check_checkpoint(config.checkpoint, options)
        if problems:  # said now, not by vLLM after a minute or three
            said = [str(p) for p in problems] if len(problems) == 1 else \
                [f"({n}) {p}" for n, p in enumerate(problems, 1)]
            raise LaunchError(f"checkpoint {config.checkpoint} cannot be served, vLLM was not started: "
                              + " ".join(said))
        if config.model and not options.served_model_name:
            options = replace(options, served_model_name=config.model)
        server = VLLMServer(config.checkpoint, options, log_path=log_dir / "vllm.log")
        _started(server, server.process, f"vLLM on {config.checkpoint}", server.notes)
        resolved = replace(config, url=server.url, model=server.model)
        notes = tuple(server.notes) + tuple(_fits_max_tokens(settings, server.options.max_model_len))
        return ChosenEndpoint(resolved, server.base_url, server.model, notes=notes, process=server,
                              startup_s=server.startup_s, version=server.version)
    if config.kind == "reference":
        agent = spawned if spawned is not None else reference_agent(config, log_dir)
        _started(agent, agent, "the reference agent")
        resolved = replace(config, url=agent.url)
        return ChosenEndpoint(resolved, resolved.base_url, resolved.model or config.policy, process=agent)
    raise LaunchError(f"{config.where}: kind {config.kind} is attached to, not launched")


def launch_checkpoint(settings: ModelSettings, checkpoint: str, log_dir: Path, *,
                      where: str = "the node profile") -> ChosenEndpoint:
    """vLLM on ``checkpoint`` as the profile's first ``vllm`` endpoint without a URL
    describes it (its served name, the ``vllm:`` section), checked and started by
    :func:`launch` as ``--agentgym-checkpoint`` does, without the rest of the chain:
    a door that serves this checkpoint has no fallback. Raises :class:`LaunchError`."""
    settings = settings.with_checkpoint(checkpoint)
    config = next((e for e in settings.endpoints if e.kind == "vllm" and e.launched), None)
    if config is None:
        kinds = ", ".join(e.kind + (" (with a url)" if e.url else "") for e in settings.endpoints)
        raise LaunchError(f"{where} has no vllm endpoint to launch on {checkpoint} (its model.endpoints: {kinds}); "
                          f"use a profile with one, e.g. --node cpu or --node gpu, or add "
                          f"{{kind: vllm, model: policy}} to its model.endpoints")
    return launch(config, settings, log_dir)
