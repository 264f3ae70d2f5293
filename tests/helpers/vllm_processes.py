"""vLLM's processes as the slow tier looks for them: its API servers, engine cores and
workers, and whether a run left any of them behind."""

from __future__ import annotations

import time

import psutil


def vllm_processes() -> set[int]:
    """vLLM's API servers, engine cores and workers running now."""
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if cmdline.startswith("VLLM::") or "vllm.entrypoints.openai.api_server" in cmdline \
                or (proc.info["name"] or "").startswith("VLLM::"):
            found.add(proc.pid)
    return found


def new_vllm_processes(before: set[int], timeout: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = {p for p in vllm_processes() - before
                if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)  # polling the process table until the deadline
