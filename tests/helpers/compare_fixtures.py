"""Run directories for the compare view and trend tests, written through RunDir as
the plugin writes them, with the fingerprint a comparison checks."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from pytest_agentgym.results import fingerprint
from pytest_agentgym.results.records import ErrorInfo, Turn
from pytest_agentgym.results.store import RunDir

from helpers.report_fixtures import make_episode, make_info, make_turn, write_run

ENV_SETTINGS = {"max_rounds": 15, "sampling": {"temperature": 0.0}, "prompt_sha256": "cd" * 32,
                "server": "embedded: babyai 1.0 [0123456789ab]"}
#: (env, task, repeat, mark) -> the episode's turns
TurnMaker = Callable[[str, int, int, str], Sequence[Turn]]


def plain_turns(env: str, task: int, repeat: int, mark: str) -> tuple[Turn, ...]:
    """The same two turns in every run; the last one's reward says pass or fail."""
    return (make_turn(0, observation=f"{env} task {task}: find the key."),
            make_turn(1, observation="You turned left.", reward=1.0 if mark == "P" else 0.0, done=mark == "P"))


def paired_run(root: Path, run_id: str, envs: dict[str, str | list[str]], *, checkpoint: str | None = None,
               started_at: str = "2026-11-21T12:00:00+00:00", baseline: str | None = None,
               turns: TurnMaker = plain_turns, model: str = "qwen3.5-9b") -> RunDir:
    """A finished run: ``envs[env]`` has one mark per task (a list: one string per
    repeat): P passed, F failed, E errored, - not run."""
    fp = fingerprint.build(model=model, endpoint_kind="tensorzero", checkpoint=checkpoint,
                           envs={env: ENV_SETTINGS for env in envs})
    info = make_info(run_id=run_id, environments=tuple(envs), checkpoint=checkpoint, started_at=started_at,
                     baseline=baseline, fingerprint=fp, model=model, gates=())
    records = []
    for env, table in envs.items():
        for repeat, row in enumerate([table] if isinstance(table, str) else table):
            for task, mark in enumerate(row):
                if mark == "-":
                    continue
                outcome = {"P": "passed", "F": "failed", "E": "error"}[mark]
                error = ErrorInfo("ConnectError", "connection refused by the env server", "env") if mark == "E" else None
                records.append(make_episode(env, task, run_id=run_id, repeat=repeat, outcome=outcome,
                                            turns=tuple(turns(env, task, repeat, mark)), error=error))
    return write_run(root, info, records)
