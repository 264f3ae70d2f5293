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

``serve`` with ``segments=[NAME, ...]`` (or ``hold_term=S``) plays a vLLM family instead,
as far as stopping it goes (:func:`serve_family`): the process the launcher started
creates ``/dev/shm/NAME`` of each (and never deletes them, as when vLLM's deleter is
killed), a child of its own maps them (and ``also_map``'s segments) and keeps them mapped, and
another child is the reference agent. On SIGTERM the children end at once, but the
first process holds on ``hold_term`` seconds before it exits (as vLLM does while a
connection is open), leaving its children where they are if they did not get the
signal themselves.

The real vLLM is exercised by the slow tier (tests/model/test_vllm_slow.py).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shlex
import signal
import stat
import subprocess
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


def install(directory: Path, mode: str, *, segments: list[str] | tuple[str, ...] = (), hold_term: float = 0.0,
            also_map: list[str] | tuple[str, ...] = (), latency_ms: int = 0) -> Path:
    """An executable ``directory/python`` that behaves as ``mode`` (crash | hang | serve);
    the keywords are ``serve``'s (see the module)."""
    directory.mkdir(parents=True, exist_ok=True)
    python = directory / "python"
    options = {"segments": list(segments), "hold_term": hold_term, "also_map": list(also_map), "latency_ms": latency_ms}
    command = shlex.join([sys.executable, str(Path(__file__).resolve()), mode, json.dumps(options)])
    python.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return python


#: the size of each segment ``serve`` creates
SEGMENT_BYTES = 1 << 20


def segment_path(name: str) -> Path:
    return Path("/dev/shm") / name


def serve_family(host: str, port: str, options: dict) -> None:
    """``serve`` as a family of processes holding shared memory (see the module)."""
    for name in options["segments"]:
        fd = os.open(segment_path(name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(fd, SEGMENT_BYTES)
        os.close(fd)
    names = [*options["segments"], *options["also_map"]]
    holder = subprocess.Popen([sys.executable, __file__, "hold", json.dumps(names)], stdout=subprocess.PIPE)
    assert holder.stdout is not None
    print(holder.stdout.readline().decode().strip(), flush=True)  # it maps them before the agent starts
    agent = subprocess.Popen([sys.executable, "-m", "pytest_agentgym", "reference-agent", "--host", host,
                              "--port", port, "--latency-ms", str(options["latency_ms"])])
    print(f"fake vLLM: pid {os.getpid()}, holder pid {holder.pid}, agent pid {agent.pid}", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # after the children: they keep the default
    signal.sigwait({signal.SIGTERM})
    print(f"fake vLLM: SIGTERM received; holding on for {options['hold_term']:g} s", flush=True)
    time.sleep(options["hold_term"])  # stands for vLLM finishing a connection after SIGTERM
    os._exit(0)  # the segment stays: its deleter is gone


def hold(names: list[str]) -> None:
    """The child of :func:`serve_family` that keeps the segments mapped until it is stopped."""
    maps = []
    for name in names:
        with open(segment_path(name), "r+b") as segment:
            maps.append(mmap.mmap(segment.fileno(), 0))
    print(f"fake vLLM holder: pid {os.getpid()} maps {', '.join(names)}", flush=True)
    while True:
        signal.pause()


def main(mode: str, options: dict, argv: list[str]) -> None:
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
    if options["segments"] or options["hold_term"]:
        serve_family(args.host, args.port, options)
    os.execv(sys.executable, [sys.executable, "-m", "pytest_agentgym", "reference-agent",
                              "--host", args.host, "--port", args.port, "--latency-ms", str(options["latency_ms"])])


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(json.loads(sys.argv[2]))
    main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:])
