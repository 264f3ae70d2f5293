"""Run directories written from marks, one per episode, through the project's own RunDir,
RunInfo and EpisodeRecord, with the fingerprint a comparison checks: what the compare tests
pair and judge."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.records import EpisodeRecord, ErrorInfo, RunInfo
from pytest_agentgym.results.store import RunDir

#: The settings of every environment of a marked run (its fingerprint)
SETTINGS = {"max_rounds": 15, "sampling": {"temperature": 0.0}, "prompt_sha256": "ab" * 32,
            "server": "embedded: maze 1.0 [0123456789ab]"}


def write_run(root: Path, run_id: str, envs: dict[str, str | list[str]], *,
              env_settings: dict[str, dict] | None = None, version: str = "0.1.0",
              with_fingerprint: bool = True, rewards: dict[str, list[float]] | None = None) -> Path:
    """A run directory: ``envs[env]`` has one character per task (a list of strings:
    one string per repeat): P passed, F failed, E errored, N non-finite reward (written as
    the harness writes it: null), U a line that names its episode but holds a NaN token
    (written by another tool: no record), - absent. ``rewards[env]`` sets repeat 1's rewards
    (success = reward >= 1)."""
    run_dir = RunDir.create(root, run_id)
    fp_envs = {env: {**SETTINGS, **(env_settings or {}).get(env, {})} for env in envs}
    fp = fingerprint.build(model=f"model-{run_id}", endpoint_kind="reference", checkpoint=None,
                           envs=fp_envs) if with_fingerprint else {}
    run_dir.write_info(RunInfo(run_id=run_id, started_at="2026-01-01T00:00:00Z", node="test",
                               model=f"model-{run_id}", endpoint="none", endpoint_kind="reference",
                               environments=tuple(envs), command="test", status="finished",
                               versions={"pytest-agentgym": version}, fingerprint=fp))
    for env, table in envs.items():
        for repeat, row in enumerate([table] if isinstance(table, str) else table, 1):
            for task, mark in enumerate(row):
                if mark == "-":
                    continue
                facts = dict(run_id=run_id, env=env, task_index=task, repeat=repeat,
                             started_at="2026-01-01T00:00:00Z", model=f"model-{run_id}")
                if mark == "E":
                    record = EpisodeRecord.errored(error=ErrorInfo("ConnectError", "refused", "env"), **facts)
                else:
                    reward = (rewards or {}).get(env, [None] * (task + 1))[task] if repeat == 1 else None
                    if reward is None:
                        reward = math.nan if mark in "NU" else (1.0 if mark == "P" else 0.0)
                    record = EpisodeRecord(reward=reward, success=mark == "P" if reward is not None else False,
                                           rounds=3, stop_reason="done", duration_s=0.1, **facts)
                if mark == "U":
                    with run_dir.episodes_file.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(record.to_dict()) + "\n")  # Python's json writes NaN
                else:
                    run_dir.append_episode(record)
    return run_dir.path
