"""Suites: what a suite file asks for, read and checked without pytest.

A suite is a YAML file with an ``environment:`` key (see docs/suites.md; which YAML
files are suites: config/suite_files.py)::

    environment: BabyAI
    tasks: 0-89                 # "0-9,12", [0, 5, 7], or {file: ids.txt}
    repeat: 1
    max_rounds: 20              # optional; else the node's cap and the env default
    episode_timeout: 120        # optional, seconds
    sampling: {temperature: 0}  # optional; the node's sampling wins where it says
    min_reward: 0.5             # optional per-episode assertion
    gates: [success_rate >= 0.6, mean_reward >= 0.3]
    max_error_rate: 0.05        # optional error budget of the gates
    baseline_metric: success    # optional: what --agentgym-baseline compares (success|reward)
    nodes:                      # optional per-node overrides of the keys above
      local: {tasks: 0-19}

A verifiers environment is ``environment: verifiers:<module>`` with ``args:`` for
its ``load_environment`` (integrations/verifiers_suite.py); ``tasks`` are example
indices, all of them when left out.

Each (environment, task index, repeat) of a suite is one episode; the plugin
makes it a pytest item with a stable id (plugin/items.py):
``suites/lightweight/babyai.yaml::BabyAI[17]``; repeats after the first are
``BabyAI[17-r2]`` (:func:`item_name`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from pytest_agentgym.envs.spec import is_verifiers, read_yaml
from pytest_agentgym.results.gates import Gate, GateError
from pytest_agentgym.config.suite_files import DEFAULT_SKIP_DIRS, SUITE_KEYS, SuitePlaces, is_suite_file, suite_files
from pytest_agentgym.config.tasks import parse_tasks
from pytest_agentgym.process import variables


class SuiteError(Exception):
    """A suite file that cannot be used; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Suite:
    path: Path
    environment: str
    tasks: tuple[int, ...]
    repeat: int = 1
    max_rounds: int | None = None
    episode_timeout: float | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    min_reward: float | None = None
    gates: tuple[Gate, ...] = ()
    max_error_rate: float | None = None
    baseline_metric: str | None = None


def _number(value: Any, key: str, where: str, *, integer: bool, positive: bool = True) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok or isinstance(value, bool) or (positive and value <= 0):
        kind = "a whole number" if integer else "a number"
        raise SuiteError(f"{where}: '{key}' must be {kind}{' > 0' if positive else ''}, got {value!r}")
    return value


def _read_task_file(path: Path, where: str) -> tuple[int, ...]:
    """A task file: one index or AgentEval item id ("babyai_12") per line, or
    AgentEval's JSON ``[{"item_id": "babyai_12"}, ...]``."""
    if not path.is_file():
        raise SuiteError(f"{where}: tasks.file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        entries = [e["item_id"] if isinstance(e, dict) else e for e in json.loads(text)]
    else:
        entries = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    try:
        return tuple(dict.fromkeys(int(str(e).rsplit("_", 1)[-1]) for e in entries))
    except ValueError as exc:
        raise SuiteError(f"{where}: tasks.file {path}: {exc}; expected indices or ids like babyai_12") from None


def load_suite(path: Path, node: str, known_envs: list[str], specs: dict[str, Any] | None = None) -> Suite:
    """The suite in ``path`` for ``node``. A verifiers environment (``verifiers:<module>``)
    is loaded here, and its spec put into ``specs`` (the run's environments)."""
    where = str(path)
    try:
        data = read_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise SuiteError(f"{where}: not valid YAML ({exc}); fix the syntax at the position shown") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: a suite must be a mapping with 'environment' and 'tasks' keys")
    unknown = sorted(set(data) - SUITE_KEYS)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(SUITE_KEYS))}")
    overrides = (data.get("nodes") or {}).get(node) or {}
    if not isinstance(overrides, dict):
        raise SuiteError(f"{where}: nodes.{node} must be a mapping of suite keys")
    data = _when_set({**data, **overrides}, where)
    if "environment" not in data:
        raise SuiteError(f"{where}: missing key 'environment' (the environment's name, e.g. 'environment: BabyAI')")
    env = data.get("environment")
    if is_verifiers(env):
        data = _verifiers_environment(data, where, specs)
        known_envs = [env]
    elif "args" in data:
        raise SuiteError(f"{where}: 'args' is for a verifiers environment (environment: verifiers:<module>); "
                         f"{env} takes none: remove it")
    match = [name for name in known_envs if str(env).lower() == name.lower()]
    if not match:
        raise SuiteError(
            f"{where}: environment {env!r} is unknown; known: {', '.join(known_envs)} "
            "(configs/envs.yaml, or an environment added by a plugin)"
        )
    if "tasks" not in data:
        raise SuiteError(f"{where}: missing key 'tasks' (e.g. 'tasks: 0-89')")
    tasks_value = data["tasks"]
    try:
        if isinstance(tasks_value, dict) and "file" in tasks_value:
            tasks = _read_task_file(path.parent / str(tasks_value["file"]), where)
        else:
            tasks = parse_tasks(tasks_value)
    except ValueError as exc:
        raise SuiteError(f"{where}: tasks: {exc}") from None
    try:
        gates = tuple(Gate.parse(g) for g in (data.get("gates") or ()))
    except GateError as exc:
        raise SuiteError(f"{where}: gates: {exc}") from None
    sampling = data.get("sampling") or {}
    if not isinstance(sampling, dict):
        raise SuiteError(f"{where}: 'sampling' must be a mapping such as {{temperature: 0}}")
    return Suite(
        path=path,
        environment=match[0],
        tasks=tasks,
        repeat=_number(data.get("repeat", 1), "repeat", where, integer=True),
        max_rounds=_number(data["max_rounds"], "max_rounds", where, integer=True) if data.get("max_rounds") is not None else None,
        episode_timeout=_number(data["episode_timeout"], "episode_timeout", where, integer=False) if data.get("episode_timeout") is not None else None,
        sampling=sampling,
        min_reward=_number(data["min_reward"], "min_reward", where, integer=False, positive=False) if data.get("min_reward") is not None else None,
        gates=gates,
        max_error_rate=_fraction(data.get("max_error_rate"), "max_error_rate", where),
        baseline_metric=_metric(data.get("baseline_metric"), where),
    )


def _when_set(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The suite's keys with ``when_set``'s applied: ``{VARIABLE: {key: value, ...}}``, each
    mapping taken where the environment variable is set to something other than blanks (the
    data a server reads, say: ``when_set: {ALFWORLD_DATA: {tasks: 2420-2619}}``)."""
    conditional = data.pop("when_set", None) or {}
    example = "e.g. 'when_set: {ALFWORLD_DATA: {tasks: 2420-2619}}'"
    if not isinstance(conditional, dict):
        raise SuiteError(f"{where}: when_set must map environment variables to suite keys, {example}")
    for variable, keys in conditional.items():
        if not isinstance(keys, dict):
            raise SuiteError(f"{where}: when_set.{variable} must be a mapping of suite keys, {example}")
        unknown = sorted(set(keys) - (SUITE_KEYS - {"environment", "nodes", "when_set"}))
        if unknown:
            raise SuiteError(f"{where}: when_set.{variable} cannot set {', '.join(unknown)}; it sets the keys "
                             f"of an episode's run (tasks, gates, ...), {example}")
        if variables.value(str(variable)) is not None:
            data = {**data, **keys}
    return data


def _verifiers_environment(data: dict[str, Any], where: str, specs: dict[str, Any] | None) -> dict[str, Any]:
    """The suite's keys once its verifiers environment is loaded (its spec put into
    ``specs``): ``tasks`` defaults to every example."""
    from pytest_agentgym.envs.verifiers_suite import VerifiersSuiteError, load_for_suite

    try:
        return load_for_suite(data, specs)
    except VerifiersSuiteError as exc:
        raise SuiteError(f"{where}: {exc}") from None


def _metric(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if value not in ("success", "reward"):
        raise SuiteError(f"{where}: 'baseline_metric' must be success or reward, got {value!r}")
    return value


def _fraction(value: Any, key: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise SuiteError(f"{where}: '{key}' must be a number from 0 to 1 (e.g. 0.05 for 5%), got {value!r}")
    return float(value)


def suites_under(paths: list[str], settings: Any, errors: list[str] | None = None, *,
                 skip_dirs: Sequence[str] = DEFAULT_SKIP_DIRS, places: SuitePlaces | None = None) -> list[Suite]:
    """The usable suites under command-line ``paths``, as collection would keep them
    (--agentgym-envs and the node's skip list applied; ``skip_dirs``: pytest's
    ``norecursedirs``; ``places``: where every YAML file is a suite, config/suite_files.py).
    A broken file is left out; its error is appended to ``errors`` when given (else
    collection reports it)."""
    found: list[Suite] = []
    wanted = {e.lower() for e in settings.envs} if settings.envs else None
    for path in suite_files(paths, skip_dirs, places):
        try:
            suite = load_suite(path, settings.node, list(settings.env_specs), settings.env_specs)
        except SuiteError as exc:
            if errors is not None:
                errors.append(str(exc))
            continue
        if (wanted and suite.environment.lower() not in wanted) or suite.environment in settings.skip_envs:
            continue
        found.append(suite)
    return found


def marker_name(env: str) -> str:
    """The mark of an environment's items: its name in lower case; ``verifiers`` for
    every verifiers environment (a mark's name cannot hold the colon)."""
    return "verifiers" if is_verifiers(env) else env.lower()


def item_name(env: str, task: int, repeat: int) -> str:
    return f"{env}[{task}]" if repeat == 1 else f"{env}[{task}-r{repeat}]"


_ITEM_NAME = re.compile(r"^(?P<env>[^\[\]]+)\[(?P<task>\d+)(?:-r(?P<repeat>\d+))?\]$")


def parse_item_name(name: str) -> tuple[str, int, int] | None:
    """Inverse of :func:`item_name`: ``BabyAI[17-r2]`` -> ("BabyAI", 17, 2); None otherwise."""
    match = _ITEM_NAME.match(name)
    if match is None:
        return None
    return match["env"], int(match["task"]), int(match["repeat"] or 1)


def duplicate_episodes(items: list[Any]) -> list[str]:
    """A run holds each (env, task, repeat) once: two suite files naming the same
    episode would be counted twice. One message per clash."""
    first: dict[tuple[str, int, int], Any] = {}
    errors = []
    for item in items:
        other = first.setdefault(item.key, item)
        if other is not item:
            errors.append(f"{item.nodeid} and {other.nodeid} are the same episode "
                          f"({item.suite.environment} task {item.task_index}, repeat {item.repeat}); "
                          f"a run holds each episode once: drop it from one suite or run them separately")
    return errors


def out_of_range(items: list[Any], settings: Any) -> list[str]:
    """Task indices that do not exist in their environment (configs/envs.yaml ``tasks``),
    one message per suite file."""
    bad: dict[tuple[str, str], list[int]] = {}
    for item in items:
        spec = settings.spec(item.suite.environment)
        low, high = spec.task_range()
        if item.task_index < low or (high is not None and item.task_index > high):
            bad.setdefault((str(item.path), spec.name), []).append(item.task_index)
    errors = []
    for (path, env), tasks in bad.items():
        spec = settings.spec(env)
        shown = ", ".join(str(t) for t in sorted(set(tasks))[:10]) + (" ..." if len(set(tasks)) > 10 else "")
        source = ("its taskset's examples, as load_environment built them" if spec.in_process
                  else f"configs/envs.yaml environments.{env}.tasks")
        errors.append(f"{path}: {env} has no task(s) {shown}: its task indices are {spec.tasks} "
                      f"({source}); fix 'tasks' or --agentgym-tasks")
    return errors


def episodes(suite: Suite, tasks: tuple[int, ...] | None, repeat: int | None) -> Iterator[tuple[int, int]]:
    """(task, repeat) pairs in run order: every task once, then the second repeats, ..."""
    for r in range(1, (repeat or suite.repeat) + 1):
        for task in tasks if tasks is not None else suite.tasks:
            yield task, r
