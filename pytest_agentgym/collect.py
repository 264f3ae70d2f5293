"""Suite files become pytest items: one per (environment, task index, repeat).

A suite is a YAML file with an ``environment:`` key (see docs/suites.md)::

    environment: BabyAI
    tasks: 0-89                 # "0-9,12", [0, 5, 7], or {file: ids.txt}
    repeat: 1
    max_rounds: 20              # optional; else the node's cap and the env default
    episode_timeout: 120        # optional, seconds
    sampling: {temperature: 0}  # optional, merged over the node's
    min_reward: 0.5             # optional per-episode assertion
    gates: [success_rate >= 0.6, mean_reward >= 0.3]
    nodes:                      # optional per-node overrides of the keys above
      local: {tasks: 0-19}

Item ids are stable: ``suites/lightweight/babyai.yaml::BabyAI[17]``; repeats
after the first are ``BabyAI[17-r2]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from pytest_agentgym.gates import Gate, GateError
from pytest_agentgym.options import parse_tasks

_SUITE_MARK = re.compile(r"^environment\s*:", re.MULTILINE)
SUITE_KEYS = {
    "environment", "tasks", "repeat", "max_rounds", "episode_timeout", "sampling",
    "min_reward", "gates", "nodes", "description",
}


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


def is_suite_file(path: Path) -> bool:
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        return bool(_SUITE_MARK.search(path.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


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


def load_suite(path: Path, node: str, known_envs: list[str]) -> Suite:
    where = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    data = {**data, **overrides}
    env = data.get("environment")
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
    )


def suites_under(paths: list[str], settings: Any) -> list[Suite]:
    """The usable suites under command-line ``paths``, as collection would keep them
    (--agentgym-envs and the node's skip list applied; broken files left to collection)."""
    found: list[Suite] = []
    wanted = {e.lower() for e in settings.envs} if settings.envs else None
    for root in paths:
        root_path = Path(str(root).split("::")[0])
        files = [root_path] if root_path.is_file() else sorted(root_path.rglob("*.y*ml"))
        for path in files:
            if not is_suite_file(path):
                continue
            try:
                suite = load_suite(path, settings.node, list(settings.env_specs))
            except SuiteError:
                continue
            if (wanted and suite.environment.lower() not in wanted) or suite.environment in settings.skip_envs:
                continue
            found.append(suite)
    return found


def item_name(env: str, task: int, repeat: int) -> str:
    return f"{env}[{task}]" if repeat == 1 else f"{env}[{task}-r{repeat}]"


def episodes(suite: Suite, tasks: tuple[int, ...] | None, repeat: int | None) -> Iterator[tuple[int, int]]:
    """(task, repeat) pairs in run order: every task once, then the second repeats, ..."""
    for r in range(1, (repeat or suite.repeat) + 1):
        for task in tasks if tasks is not None else suite.tasks:
            yield task, r


# -- pytest nodes -------------------------------------------------------------------


class EpisodeInfraError(Exception):
    """The environment, the model or the harness failed: reported as a pytest error."""


class RewardBelowThreshold(AssertionError):
    """The episode's reward is below the suite's min_reward: a policy failure."""


class SuiteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        from pytest_agentgym.settings import SETTINGS_KEY, SUITE_ERRORS_KEY

        settings = self.config.stash[SETTINGS_KEY]
        try:
            suite = load_suite(self.path, settings.node, list(settings.env_specs))
        except SuiteError as exc:
            self.config.stash[SUITE_ERRORS_KEY].append(str(exc))
            return
        if settings.envs and suite.environment.lower() not in {e.lower() for e in settings.envs}:
            return
        skipped = suite.environment in settings.skip_envs
        for task, repeat in episodes(suite, settings.tasks, settings.repeat):
            name = item_name(suite.environment, task, repeat)
            item = EpisodeItem.from_parent(
                # The id is given as a string so that pytest parses "Env[17]" the way it
                # parses the ids it stores (name "Env", params "17"); --lf depends on it.
                self, name=name, nodeid=f"{self.nodeid}::{name}",
                suite=suite, task_index=task, repeat=repeat,
            )
            item.add_marker(pytest.mark.agentgym)
            item.add_marker(getattr(pytest.mark, suite.environment.lower()))
            if skipped:
                item.add_marker(pytest.mark.skip(reason=f"{suite.environment} is skipped on node {settings.node}"))
            yield item


class EpisodeItem(pytest.Item):
    """One episode. ``setup`` waits for its result (the engine may have run it
    already); an infrastructure error is raised there, so pytest reports an
    error, not a failure. ``runtest`` checks the reward against min_reward."""

    def __init__(self, *, suite: Suite, task_index: int, repeat: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.task_index = task_index
        self.repeat = repeat
        self.record = None

    def setup(self) -> None:
        from pytest_agentgym.settings import HARNESS_KEY

        harness = self.config.stash[HARNESS_KEY]
        self.record = harness.result(self)
        self.user_properties.append(("reward", self.record.reward))
        self.user_properties.append(("success", self.record.success))
        self.user_properties.append(("rounds", self.record.rounds))
        if self.record.error is not None:
            error = self.record.error
            retried = f" (after {len(self.record.retried)} retried attempt(s))" if self.record.retried else ""
            raise EpisodeInfraError(f"{error.where} error{retried}: {error.type}: {error.message}")

    def runtest(self) -> None:
        record = self.record
        if record.min_reward is not None and (record.reward is None or record.reward < record.min_reward):
            raise RewardBelowThreshold(failure_message(record))

    def repr_failure(self, excinfo, style=None):  # type: ignore[no-untyped-def]
        if isinstance(excinfo.value, (EpisodeInfraError, RewardBelowThreshold)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):  # type: ignore[no-untyped-def]
        return self.path, None, self.name


def failure_message(record: Any, last: int = 3) -> str:
    """Reward, threshold, how the episode ended, and its last turns."""
    lines = [
        f"{item_name(record.env, record.task_index, record.repeat)}: reward {record.reward} < min_reward "
        f"{record.min_reward} ({record.stop_reason} after {record.rounds} round(s))",
        f"last {min(last, len(record.turns))} turn(s):",
    ]
    for turn in record.turns[-last:]:
        reply = " ".join(turn.reply.split())
        feedback = " ".join(turn.feedback.split())
        lines.append(f"  [{turn.index}] reply: {reply[:160]}")
        lines.append(f"       action: {turn.action!r} -> {feedback[:160]} (reward {turn.reward})")
    return "\n".join(lines)
