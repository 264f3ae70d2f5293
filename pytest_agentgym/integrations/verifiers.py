"""AgentGym environments as ``verifiers`` environments (``vf-eval``, prime-rl).

    from pytest_agentgym.integrations.verifiers import load_environment
    env = load_environment(env="TextCraft", tasks="0-99", node="local")

or, through verifiers' own entry point, by the taskset id ``pytest-agentgym-verifiers``::

    vf-eval pytest-agentgym-verifiers --env.taskset.env TextCraft --env.taskset.tasks 0-9 \\
        --model reference --client.base-url http://127.0.0.1:8100/v1 --no-push

What it is: an ``Env`` whose seed taskset has one task per task index
(:class:`AgentGymTaskset`), and whose ``run()`` plays that task as one episode of
this project's engine (:func:`~pytest_agentgym.engine.episode.run_episode`: the same
adapter, prompt, action extraction, steps and failure taxonomy as a pytest run),
with the verifiers agent as the model (:mod:`.verifiers_turns`). The environment
server comes from the node profile (``node``, found like ``--agentgym-node`` from
``root``, default the current directory): spawned or attached when the env
starts serving, stopped when it stops. The episode's reward is recorded as the
reward ``agentgym_reward`` (weight 1); ``success`` and ``rounds`` as metrics; the
episode's record (stop reason, turns, error) as ``trace.info["agentgym"]``. An
episode that ends in an infrastructure error (env server, model, harness) fails
the verifiers episode instead of scoring 0, as a pytest run reports it as an error.
So does one that the harness's time budget ended (``stop_reason`` ``timeout``): a
pytest run scores it as the model's outcome, but a trainer would learn from it as a
bad episode when the harness was only slow (under load, nine of 40 TextCraft
rollouts scored 0 this way), so verifiers gets an error it can retry instead.

Needs the optional extra: ``pip install 'pytest-agentgym[verifiers]'`` (verifiers 0.4).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import verifiers.v1 as vf
    from verifiers.v1.runtimes import SubprocessConfig
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "pytest_agentgym.integrations.verifiers needs the verifiers package (0.4): "
        "pip install 'pytest-agentgym[verifiers]'") from exc

from pytest_agentgym.envs import adapter_class
from pytest_agentgym.engine.episode import run_episode
from pytest_agentgym.run.requests import RequestRules, build
from pytest_agentgym.integrations.verifiers_turns import ChatTurnHarness, InteractionModel

#: The id verifiers loads this taskset by (the top-level module pytest_agentgym_verifiers).
TASKSET_ID = "pytest-agentgym-verifiers"
#: Episode budget when neither the config nor the node profile sets one.
DEFAULT_EPISODE_TIMEOUT_S = 300.0


class AgentGymTasksetConfig(vf.TasksetConfig):
    id: str = TASKSET_ID
    env: str = "TextCraft"
    """The environment, as configs/envs.yaml names it (case-insensitive)."""
    tasks: str | None = None
    """Task indices: '0-99', '3,5,8-9'; default: all the environment has (a closed range)."""
    node: str = "local"
    """The node profile (a name under configs/nodes or a YAML path)."""
    root: str | None = None
    """Where node profiles and configs/envs.yaml are looked for (default: the current directory)."""
    max_rounds: int | None = None
    """Rounds per episode (default: the environment's, capped by the node's limit)."""
    episode_timeout: float | None = None
    """Seconds per episode (default: the node's limits.episode_timeout, else 300)."""


class AgentGymData(vf.TaskData):
    env: str
    task_index: int


class AgentGymTask(vf.Task[AgentGymData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        return f"{self.data.env}[{self.data.task_index}]"


class AgentGymTaskset(vf.Taskset[AgentGymTask, AgentGymTasksetConfig]):
    """One task per task index of one environment; the environment opens the conversation."""

    def load(self) -> Iterator[AgentGymTask]:
        node = NodeFacts.load(self.config)
        spec = node.spec
        for index in task_indices(self.config.tasks, spec.tasks, spec.name):
            yield AgentGymTask(AgentGymData(name=f"{spec.name}[{index}]", id=f"{spec.name}[{index}]",
                                            env=spec.name, task_index=index), self.config.task)


class AgentGymEnvConfig(vf.EnvConfig):
    taskset: AgentGymTasksetConfig = AgentGymTasksetConfig()
    #: The policy's seat: the taskset's own harness (ChatTurnHarness, a chat loop
    #: in-process), so no sandbox is provisioned.
    player: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())


class AgentGymEnv(vf.Env[AgentGymEnvConfig]):
    """Plays each task as one episode of this project's engine, the agent as its model."""

    async def start(self) -> None:
        from pytest_agentgym.run import factory

        self.node = NodeFacts.load(self.config.taskset)
        self.adapter = adapter_class(self.node.spec.name)(self.node.spec.prompt_template)
        self.pool = factory.server_pool({self.node.spec.name: self.node.spec}, self.node.servers,
                                        Path(tempfile.mkdtemp(prefix="agentgym-verifiers-")))
        server = await asyncio.to_thread(self.pool.start, self.node.spec.name)
        self.server_url = server.url

    async def stop(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            await asyncio.to_thread(pool.stop_all)

    async def run(self, task: AgentGymTask, agents: Any) -> None:
        if not hasattr(self, "server_url"):
            raise RuntimeError("the AgentGym environment is not serving: run it inside env.serving()")
        spec = self.node.spec
        request = build(run_id=os.environ.get("VF_RUN_ID", "verifiers"), spec=spec,
                        task_index=task.data.task_index, repeat=0, max_rounds=self.node.max_rounds,
                        timeout_s=self.node.episode_timeout, retries=0, nodeid=task.data.name,
                        node=self.node.name)
        player = agents.player
        model_name = getattr(getattr(player, "config", None), "model", None) or "verifiers-agent"
        async with player.interaction(task) as interaction:
            async with self.adapter.make_client(spec, self.server_url) as client:
                record = await run_episode(request, self.adapter, client, InteractionModel(interaction, model_name))
            # recorded before the interaction closes, so the rollout's own summary has them
            trace = interaction.trace
            trace.info["agentgym"] = {
                "env": record.env, "task_index": record.task_index, "reward": record.reward,
                "success": record.success, "rounds": record.rounds, "stop_reason": record.stop_reason,
                "outcome": record.outcome, "error": None if record.error is None else asdict(record.error),
                "actions": [turn.action for turn in record.turns]}
            failure = _not_scored(record, self.node.episode_timeout)
            if failure is None:
                trace.record_reward("agentgym_reward", float(record.reward), 1.0)
                trace.record_metric("success", 1.0 if record.success else 0.0)
                trace.record_metric("rounds", float(record.rounds))
        if failure is not None:
            raise RuntimeError(failure)


def _not_scored(record: Any, budget: float) -> str | None:
    """Why ``record`` must fail its verifiers episode instead of being scored (an
    infrastructure error, or the harness's time budget), or None."""
    if record.error is not None:
        return f"{record.error.where}:{record.error.type}: {record.error.message}"
    if record.stop_reason == "timeout":
        return (f"harness:EpisodeTimeout: the episode budget of {budget:g} s ran out after {record.rounds} "
                f"round(s), while the model was answering; not scored (a slow harness or model is not a bad "
                f"episode): raise episode_timeout, or lower the load")
    return None

class NodeFacts:
    """What a node profile says about one environment: its spec, servers mode, limits."""

    def __init__(self, name: str, spec: Any, servers: str, max_rounds: int, episode_timeout: float) -> None:
        self.name, self.spec, self.servers = name, spec, servers
        self.max_rounds, self.episode_timeout = max_rounds, episode_timeout

    @classmethod
    def load(cls, config: AgentGymTasksetConfig) -> "NodeFacts":
        from pytest_agentgym.config.profile import NodeProfile, ProfileError

        root = Path(config.root) if config.root else Path.cwd()
        try:
            node = NodeProfile.load(config.node, root, flag="env.taskset.node")
        except ProfileError as exc:
            raise ValueError(f"env.taskset.node {config.node!r}: {exc.reason}") from None
        spec = next((s for name, s in node.specs.items() if name.lower() == config.env.lower()), None)
        if spec is None:
            raise ValueError(f"env.taskset.env {config.env!r} is not an environment of node {node.name}; "
                             f"known: {', '.join(sorted(node.specs))}")
        rounds = RequestRules(run_id="", node=node.name, node_max_rounds=node.max_rounds).rounds(
            spec, config.max_rounds)
        budget = config.episode_timeout or node.limits.get("episode_timeout") or DEFAULT_EPISODE_TIMEOUT_S
        return cls(node.name, spec, node.servers_mode, int(rounds), float(budget))


def task_indices(tasks: str | None, valid: str, env: str) -> list[int]:
    """``'0-9'``, ``'3,5,8-9'`` as a list of indices, each within the environment's
    ``valid`` range (``'0-543'``, ``'0-'``); ``None``: the whole range, which must be closed."""
    low, _, high = valid.partition("-")
    first, last = int(low), int(high) if high else None
    if tasks is None:
        if last is None:
            raise ValueError(f"{env} has no last task index; say which tasks, e.g. env.taskset.tasks='0-99'")
        return list(range(first, last + 1))
    indices: list[int] = []
    for part in str(tasks).replace(" ", "").split(","):
        start, dash, end = part.partition("-")
        if not start.isdigit() or (dash and not end.isdigit()):
            raise ValueError(f"env.taskset.tasks {tasks!r}: write indices and ranges like '0-9' or '3,5,8-9'")
        indices += list(range(int(start), int(end if dash else start) + 1))
    outside = [i for i in indices if i < first or (last is not None and i > last)]
    if outside:
        raise ValueError(f"env.taskset.tasks {tasks!r}: {env} has tasks {valid}, not {outside[:5]}")
    return indices


def load_environment(**kwargs: Any) -> AgentGymEnv:
    """An AgentGym environment as a verifiers ``Env``: ``env``, ``tasks``, ``node``,
    ``root``, ``max_rounds``, ``episode_timeout`` configure its taskset; ``player``
    (a ``vf.AgentConfig`` or its fields) the policy's seat. Run it with verifiers'
    runners (``env.serving()``, ``env.run_slot(...)``) or ``vf-eval``."""
    taskset_keys = set(AgentGymTasksetConfig.model_fields) - {"id"}
    unknown = sorted(set(kwargs) - taskset_keys - {"player"})
    if unknown:
        raise TypeError(f"load_environment() got unknown arguments {', '.join(unknown)}; "
                        f"it takes {', '.join(sorted(taskset_keys | {'player'}))}")
    data: dict[str, Any] = {"taskset": {"id": TASKSET_ID, **{k: v for k, v in kwargs.items() if k in taskset_keys}}}
    if "player" in kwargs:
        data["player"] = kwargs["player"]
    return AgentGymEnv(AgentGymEnvConfig.model_validate(data))


__all__ = ["AgentGymEnv", "AgentGymTaskset", "ChatTurnHarness", "AgentGymEnvConfig", "AgentGymTasksetConfig",
           "AgentGymTask", "AgentGymData", "load_environment"]
