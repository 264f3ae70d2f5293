"""Waiting for something a test cannot be told about: polling with a deadline."""

from __future__ import annotations

import subprocess
import time
from typing import Callable, Iterable


def wait_until(condition: Callable[[], object], timeout: float, what: str | Callable[[], str] = "the condition", *,
               procs: Iterable[subprocess.Popen] = (), interval: float = 0.05) -> None:
    """Poll ``condition`` every ``interval`` seconds until it is true.

    Fails (``AssertionError``) naming ``what`` when ``timeout`` seconds pass first, or
    when one of ``procs`` ends first (with its output, where that was piped). ``what``
    may be a function, called only on failure, to show the state at that moment."""
    procs = tuple(procs)
    deadline = time.monotonic() + timeout
    while not condition():
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a process ended (exit {proc.returncode}) before {_said(what)}{_output(proc)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {_said(what)}")
        time.sleep(interval)  # polling a condition with a deadline


def _said(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


def _output(proc: subprocess.Popen) -> str:
    if proc.stdout is None or proc.stdout.closed:
        return ""
    out = proc.stdout.read()
    return "\n" + (out.decode(errors="replace") if isinstance(out, bytes) else out)
