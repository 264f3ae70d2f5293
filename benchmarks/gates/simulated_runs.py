"""What the gate's calibration studies share: the battery they simulate, its success
distributions, run directories in the results format, and where the studies write.

gate_calibration.py (the command and its default, reward, needed and strict studies) and
calibration_studies.py (the holm, errors and sequential studies and the one table) both
import from here; this module imports neither of them. compare_startup.py writes its
runs with :func:`write_run` too.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from pytest_agentgym.results import fingerprint  # noqa: E402
from pytest_agentgym.results.records import EpisodeRecord, RunInfo  # noqa: E402
from pytest_agentgym.results.store import RunDir  # noqa: E402

#: The studies' JSON (gate_calibration*.json) and logs (the table), beside the scripts.
RESULTS = Path(__file__).resolve().parent / "results"
LOGS = Path(__file__).resolve().parent / "logs"

#: The lightweight battery's shape (tasks per environment).
BATTERY = {"BabyAI": 90, "TextCraft": 100, "Maze": 25, "Wordle": 25}
DISTRIBUTIONS = {"Beta(2,2)": (2.0, 2.0), "Beta(0.3,0.3)": (0.3, 0.3)}


# -- run directories in the results format ------------------------------------------------------


#: What an episode the plugin could not play records (the server refused the connection).
_ERROR = {"type": "ConnectError", "message": "simulated infrastructure error", "where": "env"}


def _template(run_id: str) -> dict:
    record = EpisodeRecord(run_id=run_id, env="", task_index=0, repeat=1, reward=0.0, success=False,
                           rounds=1, stop_reason="done", started_at="2026-01-01T00:00:00Z",
                           duration_s=0.0, model="simulated")
    return record.to_dict()


def write_run(root: Path, run_id: str, outcomes: dict[str, np.ndarray],
              errors: dict[str, set[int]] | None = None) -> Path:
    """A run directory holding one episode per (env, task, repeat): ``outcomes[env]``
    is a (tasks, repeats) array of successes (reward 1.0 on success, else 0.0) or,
    when it is a float array, of rewards (success: reward >= 1). ``errors[env]``: tasks
    whose episodes are recorded as infrastructure errors instead (no reward, an
    ErrorInfo), as the plugin records an episode it could not play."""
    run_dir = RunDir(root / run_id)
    if run_dir.path.exists():
        shutil.rmtree(run_dir.path)
    run_dir.path.mkdir(parents=True)
    envs = {env: {"max_rounds": 15, "sampling": {"temperature": 0.0}, "prompt_sha256": "0" * 64,
                  "server": f"simulated {env}"} for env in outcomes}
    run_dir.write_info(RunInfo(
        run_id=run_id, started_at="2026-01-01T00:00:00Z", node="simulated", model="simulated",
        endpoint="none", endpoint_kind="simulated", environments=tuple(outcomes), command="gate_calibration",
        versions={"pytest-agentgym": "simulated"}, status="finished",
        fingerprint=fingerprint.build(model="simulated", endpoint_kind="simulated", checkpoint=None, envs=envs)))
    template, lines = _template(run_id), []
    for env, table in outcomes.items():
        for task in range(table.shape[0]):
            for repeat in range(table.shape[1]):
                value = table[task, repeat]
                rewarded = table.dtype.kind == "f"
                success = bool(value >= 1.0) if rewarded else bool(value)
                record = dict(template, env=env, task_index=task, repeat=repeat + 1, success=success,
                              reward=float(value) if rewarded else (1.0 if success else 0.0),
                              outcome="passed" if success else "unsolved",
                              episode_id=f"{run_id}:{env}:{task}:r{repeat + 1}")
                if task in (errors or {}).get(env, ()):
                    record.update(reward=None, success=False, rounds=0, stop_reason="error", outcome="error",
                                  error=_ERROR)
                lines.append(json.dumps(record))
    run_dir.episodes_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_dir.path
