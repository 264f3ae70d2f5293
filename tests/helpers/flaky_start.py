"""A server command that fails to start until a marker file exists, then becomes the
embedded lmrlgym server (Maze and Wordle) in the same process.

    python tests/helpers/flaky_start.py MARKER once --host 127.0.0.1 --port 8123
    python tests/helpers/flaky_start.py MARKER until --host 127.0.0.1 --port 8123

``once``: the first start creates MARKER and exits with code 3; every later
start runs the server. ``until``: every start exits with code 3 until someone
else creates MARKER. Each start prints what it did (the server's log).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    marker, mode, *server_args = sys.argv[1:]
    path = Path(marker)
    if not path.exists():
        if mode == "once":
            path.touch()
        print(f"flaky start ({mode}): no {path} yet, exiting with code 3", flush=True)
        sys.exit(3)
    print(f"flaky start ({mode}): {path} exists, serving", flush=True)
    os.execv(sys.executable,
             [sys.executable, "-m", "pytest_agentgym", "serve", "lmrlgym", *server_args])


def command(marker: Path, mode: str) -> str:
    """The command (with placeholders) for an ``EnvSpec``."""
    return f"{{python}} {Path(__file__).resolve()} {marker} {mode} --host {{host}} --port {{port}}"


if __name__ == "__main__":
    main()
