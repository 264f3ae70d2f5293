"""A shard of a run: which slice of the selection this process plays (``--agentgym-shard``).

``I/N`` (1 <= I <= N) or ``auto``, read from a batch scheduler's variables
(:func:`from_environment`: Kubernetes Indexed Jobs, Slurm job arrays, GitLab CI
parallel jobs). What the value means; how the selection is split is
run/shards.py. Plain code: no pytest, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pytest_agentgym.process import variables

Key = tuple[str, int, int]

#: The count variable that goes with Kubernetes' JOB_COMPLETION_INDEX (set it to the Job's completions).
K8S_COUNT = "AGENTGYM_SHARD_COUNT"
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_DIR = re.compile(r"^shard-(\d+)-of-(\d+)$")


class ShardError(ValueError):
    """A shard that cannot be worked out; the message names the value or variable and the fix."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int
    #: where the numbers came from, e.g. "--agentgym-shard=2/3" or "SLURM_ARRAY_TASK_ID=5, ..."
    source: str = ""
    #: a run id the scheduler gives every shard alike (Slurm's array job id), if any
    run_id: str | None = None

    @property
    def name(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def dirname(self) -> str:
        """The shard's run directory under ``reports/<run_id>/``."""
        return f"shard-{self.index}-of-{self.count}"


def parse_option(text: str) -> "Shard | str":
    """``--agentgym-shard``: ``I/N`` -> :class:`Shard`, ``auto`` -> ``"auto"``."""
    value = str(text).strip()
    if value.lower() == "auto":
        return "auto"
    match = _SPEC.match(value)
    if not match:
        raise ValueError(f"expected I/N (e.g. 2/3: the second of three shards) or auto, got {text!r}")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard {value}: I/N needs 1 <= I <= N (shards are numbered from 1), e.g. 1/{max(count, 1)}")
    return Shard(index, count, f"--agentgym-shard={index}/{count}")


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name].strip())
    except ValueError:
        raise ShardError(f"--agentgym-shard=auto: {name}={env[name]!r} is not a whole number") from None


def _kubernetes(env: Mapping[str, str]) -> Shard:
    if K8S_COUNT not in env:
        raise ShardError(f"--agentgym-shard=auto: JOB_COMPLETION_INDEX is set (Kubernetes Indexed Job) but "
                         f"{K8S_COUNT} is not; set {K8S_COUNT} to the Job's completions in the pod's env")
    index, count = _int(env, "JOB_COMPLETION_INDEX"), _int(env, K8S_COUNT)
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"--agentgym-shard=auto: JOB_COMPLETION_INDEX={index} with {K8S_COUNT}={count}: the "
                         f"index must be 0 to {K8S_COUNT} - 1; set {K8S_COUNT} to the Job's completions")
    return Shard(index + 1, count, f"JOB_COMPLETION_INDEX={index}, {K8S_COUNT}={count}")


def _slurm(env: Mapping[str, str]) -> Shard:
    missing = [n for n in ("SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN") if n not in env]
    if missing:
        raise ShardError(f"--agentgym-shard=auto: SLURM_ARRAY_TASK_ID is set but {' and '.join(missing)} "
                         f"not; run inside an sbatch --array job step, or give --agentgym-shard=I/N")
    task, count, low = _int(env, "SLURM_ARRAY_TASK_ID"), _int(env, "SLURM_ARRAY_TASK_COUNT"), \
        _int(env, "SLURM_ARRAY_TASK_MIN")
    step = _int(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
    high = _int(env, "SLURM_ARRAY_TASK_MAX") if "SLURM_ARRAY_TASK_MAX" in env else low + (count - 1) * step
    where = (f"SLURM_ARRAY_TASK_ID={task}, SLURM_ARRAY_TASK_MIN={low}, SLURM_ARRAY_TASK_MAX={high}, "
             f"SLURM_ARRAY_TASK_STEP={step}, SLURM_ARRAY_TASK_COUNT={count}")
    if step < 1 or (high - low) % step or (high - low) // step + 1 != count or (task - low) % step \
            or not low <= task <= high:
        raise ShardError(f"--agentgym-shard=auto: {where}: the array is not one evenly stepped range holding this "
                         f"task (e.g. --array=0-{count - 1}); submit the array as a range, or give "
                         f"--agentgym-shard=I/N")
    job = env.get("SLURM_ARRAY_JOB_ID", "").strip()
    return Shard((task - low) // step + 1, count, where, run_id=f"slurm-{job}" if job else None)


def _gitlab(env: Mapping[str, str]) -> Shard:
    if "CI_NODE_TOTAL" not in env:
        raise ShardError("--agentgym-shard=auto: CI_NODE_INDEX is set but CI_NODE_TOTAL is not; "
                         "give the job 'parallel: N', or --agentgym-shard=I/N")
    index, count = _int(env, "CI_NODE_INDEX"), _int(env, "CI_NODE_TOTAL")
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"--agentgym-shard=auto: CI_NODE_INDEX={index} with CI_NODE_TOTAL={count}: the index "
                         f"must be 1 to CI_NODE_TOTAL")
    return Shard(index, count, f"CI_NODE_INDEX={index}, CI_NODE_TOTAL={count}")


#: (the variable that says a scheduler is there, what reads it, the scheduler's name)
_SOURCES: tuple[tuple[str, Callable[[Mapping[str, str]], Shard], str], ...] = (
    ("JOB_COMPLETION_INDEX", _kubernetes, f"JOB_COMPLETION_INDEX with {K8S_COUNT} (Kubernetes Indexed Job)"),
    ("SLURM_ARRAY_TASK_ID", _slurm, "SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN "
                                    "(Slurm job array)"),
    ("CI_NODE_INDEX", _gitlab, "CI_NODE_INDEX with CI_NODE_TOTAL (GitLab CI parallel jobs)"),
)


def from_environment(env: Mapping[str, str]) -> Shard:
    """``--agentgym-shard=auto``: the shard the scheduler's variables in ``env`` name.
    Missing, partial or contradictory variables are a :class:`ShardError`."""
    env = variables.set_only(env)  # CI_NODE_INDEX="" is a variable nobody gave
    found = [read(env) for marker, read, _ in _SOURCES if marker in env]
    if not found:
        raise ShardError("--agentgym-shard=auto: no scheduler variables are set; looked for "
                         + "; ".join(text for _, _, text in _SOURCES)
                         + ". Set them, or give --agentgym-shard=I/N (see docs/scale-out.md)")
    first = found[0]
    for other in found[1:]:
        if (other.index, other.count) != (first.index, first.count):
            raise ShardError(f"--agentgym-shard=auto: the scheduler variables disagree: {first.source} says "
                             f"shard {first.name}, {other.source} says {other.name}; unset the ones that do "
                             f"not belong to this job, or give --agentgym-shard=I/N")
    run_id = next((s.run_id for s in found if s.run_id), None)
    return Shard(first.index, first.count, "; ".join(s.source for s in found), run_id=run_id)


def resolve(value: "Shard | str | None", env: Mapping[str, str]) -> Shard | None:
    """The shard of the run from the parsed option (``auto`` reads ``env``)."""
    if value == "auto":
        return from_environment(env)
    return value  # type: ignore[return-value]


def from_record(record: Mapping[str, Any] | None) -> Shard | None:
    """The shard a run.json's ``shard`` entry describes (resume keeps it)."""
    if not record:
        return None
    return Shard(int(record["index"]), int(record["count"]), f"the resumed run's shard {record['index']}/"
                 f"{record['count']}")


def parse_dirname(name: str) -> tuple[int, int] | None:
    """``shard-2-of-3`` -> (2, 3); None for any other name."""
    match = _DIR.match(name)
    return (int(match[1]), int(match[2])) if match else None
