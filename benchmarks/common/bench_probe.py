"""A pytest plugin the benchmarks load into the run they measure (``-p bench_probe``).

It writes, to the JSON file named by ``AGENTGYM_BENCH_PROBE``, at the end of the
run: the process's own CPU seconds (all its threads; not its children, such as
the environment servers), the seconds from process start to the first finished
episode, and (every ``AGENTGYM_BENCH_EVERY`` finished episodes, default 250)
the number of episodes finished and the process's resident memory then; and, for
CPU per step without the start and the end of the process in it, the process's
CPU seconds when the ``AGENTGYM_BENCH_MARK``-th episode finished (default 1; the
rounds of the episodes finished by then) and when the last one finished.
It uses only the ``pytest_agentgym_episode_finished`` hook, so it measures any
version of the plugin that has it (before and after a change alike).
"""

from __future__ import annotations

import json
import os
import time

import psutil
import pytest

_PROCESS = psutil.Process()
_STATE = {"episodes": 0, "first_episode_s": None, "memory": []}
_EVERY = int(os.environ.get("AGENTGYM_BENCH_EVERY", "250"))
_MARK = int(os.environ.get("AGENTGYM_BENCH_MARK", "1"))


@pytest.hookimpl(optionalhook=True)
def pytest_agentgym_episode_finished(config, record):  # type: ignore[no-untyped-def]
    _STATE["episodes"] += 1
    cpu = time.process_time()  # every thread of this process
    if _STATE["episodes"] <= _MARK:
        _STATE["rounds_at_mark"] = _STATE.get("rounds_at_mark", 0) + getattr(record, "rounds", 0)
        _STATE["cpu_at_mark"] = cpu
    _STATE["cpu_at_last"] = cpu
    if _STATE["first_episode_s"] is None:
        _STATE["first_episode_s"] = time.time() - _PROCESS.create_time()
    if _STATE["episodes"] % _EVERY == 0:
        _STATE["memory"].append([_STATE["episodes"], _PROCESS.memory_info().rss])


def pytest_unconfigure(config):  # type: ignore[no-untyped-def]
    path = os.environ.get("AGENTGYM_BENCH_PROBE")
    if path:
        times = _PROCESS.cpu_times()
        _STATE["cpu_s"] = times.user + times.system
        _STATE["wall_s"] = time.time() - _PROCESS.create_time()
        with open(path, "w") as out:
            json.dump(_STATE, out)
