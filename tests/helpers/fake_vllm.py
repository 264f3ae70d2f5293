"""A stand-in for the interpreter that has vLLM, for the default test tier.

:func:`install` writes an executable ``python`` that the launcher can be
pointed at (``vllm.python`` or ``AGENTGYM_VLLM_PYTHON``). It answers the
launcher's "is vllm importable?" probe with yes, and to
``-m vllm.entrypoints.openai.api_server ARGS`` it

* ``crash``: prints its arguments and a long Python traceback, as vLLM does
  when it refuses a checkpoint, and exits 1 before it answers;
* ``hang``: prints its arguments and its pid, then never answers (it sleeps
  for at most a minute);
* ``serve``: prints its arguments and becomes the plugin's reference agent on
  the ``--host``/``--port`` it was given (a real OpenAI-compatible server that
  answers ``GET /health``; the served model name must be ``reference``).

The real vLLM is exercised by the slow tier (tests/model/test_vllm_slow.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import stat
import sys
import time
from pathlib import Path

#: the frames of the traceback ``crash`` prints; each line names its number
FRAMES = 80
#: the exception line that ends it
CRASH_ERROR = ("ValueError: User-specified max_model_len (16384) is greater than the derived "
               "max_model_len (max_position_embeddings=512 in model's config.json).")


def frame_line(number: int) -> str:
    return f'  File "/venv/lib/python3.11/site-packages/vllm/fake_frame_{number}.py", line {number}, in step'


def install(directory: Path, mode: str) -> Path:
    """An executable ``directory/python`` that behaves as ``mode`` (crash | serve)."""
    directory.mkdir(parents=True, exist_ok=True)
    python = directory / "python"
    command = shlex.join([sys.executable, str(Path(__file__).resolve()), mode])
    python.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return python


def main(mode: str, argv: list[str]) -> None:
    if argv[:1] == ["-c"]:  # the launcher's probe: is vllm importable here?
        sys.exit(0)
    if argv[:2] != ["-m", "vllm.entrypoints.openai.api_server"]:
        sys.exit(f"fake vLLM: unexpected arguments {argv}")
    parser = argparse.ArgumentParser()
    parser.add_argument("--host")
    parser.add_argument("--port")
    args, _ = parser.parse_known_args(argv[2:])
    print("fake vLLM args:", " ".join(argv[2:]), flush=True)
    if mode == "crash":
        print("Traceback (most recent call last):")
        for number in range(FRAMES):
            print(frame_line(number))
            print("    engine.step()")
        print(CRASH_ERROR, flush=True)
        sys.exit(1)
    if mode == "hang":
        print(f"fake vLLM: loading, pid {os.getpid()}", flush=True)
        time.sleep(60)  # stands for a start that takes too long; the launcher stops it first
        sys.exit(1)
    os.execv(sys.executable, [sys.executable, "-m", "pytest_agentgym", "reference-agent",
                              "--host", args.host, "--port", args.port])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
