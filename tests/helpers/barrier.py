"""Release several processes at the same instant: each child opens a FIFO of its own
for reading as the first thing it does and blocks there; the parent opens every FIFO for
writing (which returns only once that child is waiting on it) and then closes them all
at once, which lets every child go.

In a pytest child, ``-p barrier_plugin`` (see :func:`install_pytest_plugin`) waits at
``pytest_cmdline_main``, before any plugin has looked at the run directory.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Sequence

PLUGIN = '''
import os
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    fifo = os.environ.get("AGENTGYM_TEST_BARRIER")
    if fifo:
        with open(fifo, "rb") as gate:
            gate.read()
'''


def install_pytest_plugin(directory: Path) -> str:
    """Write the barrier plugin into ``directory`` (a child's cwd); returns the ``-p`` name."""
    (directory / "barrier_plugin.py").write_text(PLUGIN)
    return "barrier_plugin"


def start_together(commands: Sequence[Sequence[str]], *, cwd: Path, fifo_dir: Path,
                   env: dict[str, str] | None = None) -> list[subprocess.Popen]:
    """Start every command, wait until each has reached its barrier, then release them
    all at once. Returns the processes (stdout and stderr merged, piped)."""
    procs, fifos = [], []
    for number, command in enumerate(commands):
        fifo = fifo_dir / f"barrier-{number}"
        os.mkfifo(fifo)
        fifos.append(fifo)
        child_env = {**(env or os.environ), "AGENTGYM_TEST_BARRIER": str(fifo)}
        procs.append(subprocess.Popen(list(command), cwd=cwd, env=child_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    # opening for writing blocks until the child has opened its end: every child waits now
    gates = [open(fifo, "wb") for fifo in fifos]
    for gate in gates:
        gate.close()
    return procs
